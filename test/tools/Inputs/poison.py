"""Copies a safetensors file with the first element of one F32 tensor set to
NaN (or +inf, or any number): poison.py IN OUT TENSOR [nan|inf|VALUE]."""
import json
import struct
import sys

src, dst, name = sys.argv[1:4]
value = float(sys.argv[4]) if len(sys.argv) > 4 else float("nan")
data = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
entry = header[name]
assert entry["dtype"] == "F32", entry
at = 8 + n + entry["data_offsets"][0]
data[at:at + 4] = struct.pack("<f", value)
open(dst, "wb").write(data)
