"""Adds tensors to a safetensors file, keeping it valid (the data section
stays exactly covered): st_edit.py IN OUT EDIT...

EDIT is NEW=SRC (a copy of tensor SRC's dtype, shape and bytes), NEW=SRC~
(the same with the first byte changed), NEW=DTYPE:D0,D1,... (zeros), or
-NAME (tensor NAME and its bytes removed)."""
import json
import struct
import sys

SIZES = {"U8": 1, "F16": 2, "BF16": 2, "F32": 4, "I64": 8}

src, dst = sys.argv[1], sys.argv[2]
d = open(src, "rb").read()
n = struct.unpack("<Q", d[:8])[0]
header, data = json.loads(d[8:8 + n]), bytearray(d[8 + n:])
for edit in sys.argv[3:]:
    if edit.startswith("-"):
        b, e = header.pop(edit[1:])["data_offsets"]
        del data[b:e]
        for k, v in header.items():
            if k != "__metadata__" and v["data_offsets"][0] >= e:
                v["data_offsets"] = [x - (e - b) for x in v["data_offsets"]]
        continue
    name, what = edit.split("=", 1)
    if ":" in what:
        dtype, dims = what.split(":")
        shape = [int(x) for x in dims.split(",")] if dims else []
        size = SIZES[dtype]
        for x in shape:
            size *= x
        raw = bytes(size)
    else:
        flip = what.endswith("~")
        entry = header[what.rstrip("~")]
        dtype, shape = entry["dtype"], entry["shape"]
        b, e = entry["data_offsets"]
        raw = bytearray(data[b:e])
        if flip:
            raw[0] ^= 0x40
    header[name] = {"dtype": dtype, "shape": shape,
                    "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
h = json.dumps(header).encode()
open(dst, "wb").write(struct.pack("<Q", len(h)) + h + bytes(data))
