"""check_state.py CK.safetensors adam8bit MIN_8BIT_SIZE | adafactor FIRST

Checks the optimizer state a checkpoint holds against its parameters'
shapes and prints one summary line. 8-bit Adam: a parameter of at least
MIN_8BIT_SIZE elements has u8 exp_avg and exp_avg_sq of its shape and f32
exp_avg_absmax and exp_avg_sq_absmax of ceil(n / 256) elements, a smaller
one f32 moments and no scales. Adafactor: a matrix has f32 exp_avg_sq_row
(shape[:-1]) and exp_avg_sq_col (shape[:-2] + shape[-1:]), a vector
exp_avg_sq of its shape; with FIRST = 1 every parameter has an f32
exp_avg. Nothing else."""
import json
import math
import struct
import sys

path, mode = sys.argv[1], sys.argv[2]
with open(path, "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
header.pop("__metadata__", None)
params = {k: v["shape"] for k, v in header.items() if "/" not in k}
want = {}
for p, shape in params.items():
    n = math.prod(shape)
    if mode == "adam8bit":
        if n >= int(sys.argv[3]):
            want["exp_avg/" + p] = want["exp_avg_sq/" + p] = ("U8", shape)
            want["exp_avg_absmax/" + p] = ("F32", [(n + 255) // 256])
            want["exp_avg_sq_absmax/" + p] = ("F32", [(n + 255) // 256])
        else:
            want["exp_avg/" + p] = want["exp_avg_sq/" + p] = ("F32", shape)
    else:
        if len(shape) >= 2:
            want["exp_avg_sq_row/" + p] = ("F32", shape[:-1])
            want["exp_avg_sq_col/" + p] = ("F32", shape[:-2] + shape[-1:])
        else:
            want["exp_avg_sq/" + p] = ("F32", shape)
        if sys.argv[3] == "1":
            want["exp_avg/" + p] = ("F32", shape)
got = {k: (v["dtype"], v["shape"]) for k, v in header.items() if "/" in k}
bad = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
for k in bad:
    print(f"BAD {k}: {got.get(k)}, expected {want.get(k)}")
kinds = {}
for k, (dtype, _) in got.items():
    kinds[(k.split("/")[0], dtype)] = kinds.get((k.split("/")[0], dtype), 0) + 1
print("state:", "OK" if not bad else f"{len(bad)} wrong", "|",
      ", ".join(f"{k} {d} x{c}" for (k, d), c in sorted(kinds.items())))
sys.exit(1 if bad else 0)
