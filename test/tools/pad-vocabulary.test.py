"""pad-vocabulary.test's comparisons of a padded run with an unpadded one.

  same A.jsonl B.jsonl      every step's loss and gradient norm agree
  tail A.jsonl B.jsonl      B's steps are A's last ones (a resumed run)
  weights A.safetensors B.safetensors
                            the same tensors (names, dtypes, shapes: the
                            unpadded format) with the same values

"Agree" is within 1e-5 relative, not bit for bit: the padded GEMMs have
other shapes, for which the BLAS library may pick other kernels (which
ones depends on the CPU), so the sums may round differently."""
import json
import struct
import sys

TOL = 1e-5


def close(a, b):
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


def rows(path):
    return [(r["step"], r["loss"], r["grad_norm"]) for r in map(json.loads, open(path))]


def tensors(path):
    raw = open(path, "rb").read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    header.pop("__metadata__", None)
    data = raw[8 + size:]
    out = {}
    for name, t in header.items():
        lo, hi = t["data_offsets"]
        assert t["dtype"] == "F32", (name, t["dtype"])
        out[name] = (tuple(t["shape"]), struct.unpack("<%df" % ((hi - lo) // 4), data[lo:hi]))
    return out


mode, a, b = sys.argv[1:4]
if mode == "weights":
    x, y = tensors(a), tensors(b)
    if sorted(x) != sorted(y):
        sys.exit("different tensors: %s vs %s" % (sorted(x), sorted(y)))
    for name in x:
        if x[name][0] != y[name][0]:
            sys.exit("%s: shape %s vs %s" % (name, x[name][0], y[name][0]))
        scale = max([1.0] + [abs(v) for v in x[name][1]])
        worst = max([0.0] + [abs(p - q) for p, q in zip(x[name][1], y[name][1])])
        if worst > TOL * scale:
            sys.exit("%s differs by %g" % (name, worst))
    sys.exit(0)
x, y = rows(a), rows(b)
if mode == "tail":
    x = x[len(x) - len(y):]
ok = len(x) == len(y) and all(
    p[0] == q[0] and close(p[1], q[1]) and close(p[2], q[2]) for p, q in zip(x, y))
sys.exit(0 if ok else "runs differ:\n%s\n%s" % (x, y))
