"""check_estimate.py WEIGHTS.safetensors REPORT.json adamw | adam8bit MIN |
adafactor FIRST

The optimizer_state bytes of a memory report (dsc-run estimate
--memory-report) against the formula for the model's parameters, whose
shapes come from a weights file: AdamW 8 bytes per element; 8-bit Adam,
for a parameter of n >= MIN elements, 2n bytes of u8 moments and two f32
scales per 256 elements (8 ceil(n / 256)), else 8n; Adafactor 4 bytes per
row and column factor of a matrix (4 (prod(shape[:-1]) + prod(shape[:-2]) *
shape[-1])), 4n for a vector, and 4n more with a first moment."""
import json
import math
import struct
import sys

with open(sys.argv[1], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
header.pop("__metadata__", None)
report = json.load(open(sys.argv[2]))
mode = sys.argv[3]
want = 0
for v in header.values():
    shape = v["shape"]
    n = math.prod(shape)
    if mode == "adamw":
        want += 8 * n
    elif mode == "adam8bit":
        want += 2 * n + 8 * math.ceil(n / 256) if n >= int(sys.argv[4]) else 8 * n
    else:
        if len(shape) >= 2:
            want += 4 * (math.prod(shape[:-1]) + math.prod(shape[:-2]) * shape[-1])
        else:
            want += 4 * n
        if sys.argv[4] == "1":
            want += 4 * n
got = report["optimizer_state"]
print(f"{mode}: optimizer_state {got} bytes, formula {want}: "
      + ("OK" if got == want else "DIFFERENT"))
sys.exit(0 if got == want else 1)
