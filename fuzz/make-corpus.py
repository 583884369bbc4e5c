#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/<target>/ from the tree's test inputs.

Usage: fuzz/make-corpus.py [DSC_RUN]   (DSC_RUN: a built dsc-run, for one
compiled GPT-2 step as an MLIR seed; without it that seed is left as is).
The seeds are small valid (and a few nearly valid) inputs; the fuzzers grow
their own corpus under build-fuzz/.
"""
import glob, json, os, shutil, struct, subprocess, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
corpus = os.path.join(root, "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)] in data order."""
    header, off = {}, 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors)


f32 = lambda *v: struct.pack("<%df" % len(v), *v)
# safetensors
put("safetensors", "f32", safetensors(
    [("transformer.wte.weight", "F32", [2, 2], f32(1, 2, 3, 4))],
    {"format": "pt"}))
put("safetensors", "half", safetensors(
    [("a", "F16", [3], struct.pack("<3H", 0x3c00, 0x0001, 0x7c00)),
     ("b", "BF16", [1, 2], struct.pack("<2H", 0x3f80, 0xff80)),
     ("c", "I64", [1], struct.pack("<q", -5))]))
put("safetensors", "skipped", safetensors(
    [("mask", "BOOL", [2, 0], b""), ("u", "U8", [3], b"\x01\x02\x03"),
     ("i", "I32", [], struct.pack("<i", 7))]))
put("safetensors", "empty", safetensors([]))
put("safetensors", "bad-dtype", safetensors([("x", "Q9", [1], b"\0")]))

# token files: [format][B][T][step x8][micro][accum] + file bytes
def tokens(fmt, body, B=1, T=2, step=3):
    return bytes([fmt, B, T]) + struct.pack("<Q", step << 1) + bytes([0, 0]) + body

toks = list(range(1, 12))
llmc = struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253))
put("tokens", "llmc.bin", tokens(0, llmc + struct.pack("<%dH" % len(toks), *toks)))
put("tokens", "raw.bin", tokens(0, struct.pack("<8H", *range(8))))
put("tokens", "raw.tok", tokens(1, struct.pack("<6H", 5, 6, 7, 65535, 0, 1), B=2))
put("tokens", "text.txt", tokens(2, b"hello, tokens\n", B=3, T=3, step=1 << 40))
put("tokens", "short.bin", tokens(0, llmc[:100]))

# configs: every example and test config
for p in sorted(glob.glob(os.path.join(root, "examples", "*.json")) +
                glob.glob(os.path.join(root, "test", "tools", "Inputs", "*.json"))):
    put("config", os.path.basename(os.path.dirname(p)) + "-" + os.path.basename(p),
        open(p, "rb").read())

# checkpoint metadata: [mode] + safetensors (even) or key=value lines (odd)
meta = {"format": "dsc-checkpoint", "step": "12", "seed": "42",
        "skipped_steps": "1"}
put("checkpoint", "file", b"\0" + safetensors(
    [("transformer.wte.weight", "F32", [1], f32(0.5))], meta))
put("checkpoint", "lines", b"\1" + "".join(
    "%s=%s\n" % kv for kv in meta.items()).encode())
put("checkpoint", "old", b"\1format=dsc-checkpoint\nstep=0\nseed=18446744073709551615\n")
put("checkpoint", "bad", b"\1format=dsc-checkpoint\nstep=2x\nseed=-1\n")

# MLIR: the tree's IR tests split at their `// -----` markers, and the
# tools' step inputs
def mlir_pieces(path):
    text = open(path).read()
    for i, piece in enumerate(text.split("// -----")):
        lines = [l for l in piece.splitlines()
                 if not l.lstrip().startswith("// CHECK")]
        yield i, "\n".join(lines) + "\n"

for p in ["test/Dialect/ops.mlir", "test/Dialect/invalid.mlir",
          "test/Dialect/mixed-precision-ops.mlir",
          "test/Transforms/memory-report.mlir",
          "test/Transforms/build-train-step.mlir",
          "test/tools/Inputs/scalar-state.mlir",
          "test/tools/Inputs/invalid-step.mlir"]:
    for i, piece in mlir_pieces(os.path.join(root, p)):
        put("mlir", "%s-%d.mlir" % (os.path.basename(p)[:-5], i), piece)
if len(sys.argv) > 1:
    out = "/tmp/dsc-fuzz-seed-step.mlir"
    subprocess.run([sys.argv[1], "compile", "--model",
                    os.path.join(root, "test/tools/Inputs/gpt2.json"),
                    "--config", os.path.join(root, "test/tools/Inputs/ds.json"),
                    "--seq-len", "4", "-o", out], check=True)
    shutil.copy(out, os.path.join(corpus, "mlir", "gpt2-step.mlir"))
