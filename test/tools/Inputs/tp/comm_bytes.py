"""comm_bytes.py LOG.jsonl T LAYERS ROWS SEQ HIDDEN

Exit 0 iff every step of LOG (a tensor-parallel run over T ranks, no data
parallelism) records the all-reduce bytes each rank sent by the ring
algorithm (include/dsc/Runtime/Runtime.h): per layer, Megatron's four
all-reduces of a [ROWS, SEQ, HIDDEN] activation (attention and MLP outputs
forward, their inputs' gradients backward), 2 * 4 * n * (T - 1) / T bytes
each, plus the loss and the sliced gradients' norm (one float each)."""
import json
import sys

log = sys.argv[1]
t, layers, rows, seq, hidden = map(int, sys.argv[2:7])
ring = lambda n: 2 * 4 * n * (t - 1) // t  # noqa: E731
expected = 4 * layers * ring(rows * seq * hidden) + 2 * ring(1)
for record in map(json.loads, open(log)):
    sent = record["comm_bytes"]
    others = {k: v for k, v in sent.items() if k != "all_reduce" and v}
    if sent["all_reduce"] != expected or others:
        sys.exit(f"step {record['step']}: sent {sent}, expected all_reduce "
                 f"{expected} and nothing else")
print(f"all_reduce {expected} bytes per step")
