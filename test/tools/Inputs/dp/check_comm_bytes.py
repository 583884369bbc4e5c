"""check_comm_bytes.py WEIGHTS.safetensors LOG.jsonl N [STAGE ACCUM [THRESHOLD]]

Exit 0 iff every step of LOG (a run on N ranks) records the bytes each rank
sent by the ring algorithms' volumes (include/dsc/Runtime/Runtime.h):

- ZeRO stage 0: an all-reduce of every gradient and of the loss,
  2 * 4 * (parameters + 1) * (N - 1) / N bytes;
- stage 1 or 2: each parameter of n elements padded to N * ceil(n / N),
  its gradient reduce-scattered (once per step, or once per micro-batch at
  stage 2: ACCUM times) and its shard all-gathered, 4 * ceil(n / N) * (N - 1)
  bytes each; plus all-reduces of the loss and of the shards' norm;
- stage 3: the reduce-scatter of stage 2; every parameter all-gathered for
  the forward of each micro-batch and again for the backward if the backward
  reads it (not an embedding table's gradient or a bias's), so between 1
  and 2 times the shards per micro-batch, and nothing after the update;
  parameters of fewer than THRESHOLD elements (persistent) are gathered
  after the update as in stage 1 and 2 instead."""
import json
import sys

from weights import tensor_sizes

weights, log, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
stage = int(sys.argv[4]) if len(sys.argv) > 4 else 0
accum = int(sys.argv[5]) if len(sys.argv) > 5 else 1
threshold = int(sys.argv[6]) if len(sys.argv) > 6 else 0
sizes = tensor_sizes(weights)
scalar_all_reduce = 2 * 4 * (n - 1) // n
if stage == 0:
    expected = {"all_reduce": sum(2 * 4 * s * (n - 1) // n for s in sizes)
                + scalar_all_reduce,
                "reduce_scatter": 0, "all_gather": 0, "all_to_all": 0,
                "broadcast": 0, "send": 0}
else:
    shard_bytes = sum(4 * -(-s // n) * (n - 1) for s in sizes)
    expected = {"all_reduce": 2 * scalar_all_reduce,
                "reduce_scatter": shard_bytes * (accum if stage >= 2 else 1),
                "all_gather": shard_bytes, "all_to_all": 0,
                "broadcast": 0, "send": 0}


def matches(got):
    if stage < 3:
        return got == expected
    # Persistent parameters: their shards gathered once, after the update.
    persistent = sum(4 * -(-s // n) * (n - 1) for s in sizes if s < threshold)
    partitioned = shard_bytes - persistent
    gathered = got["all_gather"] - persistent
    return (got["all_reduce"] == expected["all_reduce"] and
            got["reduce_scatter"] == expected["reduce_scatter"] and
            partitioned * accum < gathered <= 2 * partitioned * accum)


for record in map(json.loads, open(log)):
    if not matches(record["comm_bytes"]):
        sys.exit(f"step {record['step']}: comm_bytes {record['comm_bytes']}, "
                 f"expected {expected} ({sum(sizes)} parameters, {n} ranks, "
                 f"ZeRO stage {stage}, accumulation {accum})")
got = record["comm_bytes"]
print(f"comm bytes: OK ({got} per rank per step, "
      f"{sum(got.values()) / (2 * 4 * (sum(sizes) + 1) * (n - 1) / n):.2f}x "
      f"data parallelism's)")
