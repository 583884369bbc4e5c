"""list_tensors.py FILE PREFIX...: "name [shape]" of every tensor of a
safetensors file whose name starts with one of the PREFIXes, in name order
(from the header alone)."""
import json
import struct
import sys

with open(sys.argv[1], "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
for name in sorted(header):
    if name != "__metadata__" and name.startswith(tuple(sys.argv[2:])):
        print(name, header[name]["shape"])
