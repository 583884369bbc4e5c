"""Copies a safetensors file with __metadata__ entries set:
set_metadata.py IN OUT KEY=VALUE..."""
import json
import struct
import sys

src, dst = sys.argv[1], sys.argv[2]
d = open(src, "rb").read()
n = struct.unpack("<Q", d[:8])[0]
header = json.loads(d[8:8 + n])
for kv in sys.argv[3:]:
    key, value = kv.split("=", 1)
    header.setdefault("__metadata__", {})[key] = value
h = json.dumps(header).encode()
open(dst, "wb").write(struct.pack("<Q", len(h)) + h + d[8 + n:])
