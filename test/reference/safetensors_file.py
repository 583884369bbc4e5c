"""safetensors files as numpy arrays, with no torch import.

The format: u64 LE header length, JSON header {name: {dtype, shape,
data_offsets: [begin, end)}} (+ optional "__metadata__"), raw LE data.
Kept apart from dsc_reference so that scripts comparing two runs' saved
weights (tools/Inputs/dp/close_runs.py, run once per multi-rank check) do
not pay for importing torch.
"""
import json
import struct

import numpy as np

_ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U8": np.uint8, "U16": np.uint16, "U32": np.uint32, "U64": np.uint64,
    "BOOL": np.bool_,
}
_ST_NAMES = {np.dtype(v).str: k for k, v in _ST_DTYPES.items()}


def load_safetensors(path):
    """Returns {name: numpy array} in file order."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _ST_DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=np.dtype(dtype).newbyteorder("<"))
        out[name] = arr.reshape(tuple(info["shape"])).copy()
    return out


def save_safetensors(path, tensors, metadata=None):
    """tensors: {name: numpy array or torch tensor}."""
    header, chunks, off = {}, [], 0
    for name, a in tensors.items():
        if hasattr(a, "detach"):  # a torch tensor, without importing torch
            a = a.detach().cpu().numpy()
        a = np.asarray(a, order="C")  # (ascontiguousarray would make 0-d 1-d)
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        raw = a.tobytes()
        header[name] = {"dtype": _ST_NAMES[np.dtype(a.dtype).newbyteorder("<").str],
                        "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)  # keep the data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)
