"""check_comm_bytes.py WEIGHTS.safetensors LOG.jsonl N

Exit 0 iff every step of LOG (a run on N ranks) records the all-reduce bytes
of data parallelism: each gradient and the loss reduced by a ring,
2 * 4 * (parameters + 1) * (N - 1) / N bytes sent per rank, and no
all-gather."""
import json
import os
import struct
import sys

weights, log, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(weights, "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
params = 0
for name, t in header.items():
    if name != "__metadata__":
        size = 1
        for d in t["shape"]:
            size *= d
        params += size
expected = 2 * 4 * (params + 1) * (n - 1) // n
for record in map(json.loads, open(log)):
    got = record["comm_bytes"]
    if got != {"all_reduce": expected, "all_gather": 0}:
        sys.exit(f"step {record['step']}: comm_bytes {got}, expected "
                 f"all_reduce {expected} ({params} parameters, {n} ranks)")
print(f"comm bytes: OK ({expected} per rank per step)")
