"""comm_bytes.py LOG.jsonl T LAYERS ROWS SEQ HIDDEN

Exit 0 iff every step of LOG (a tensor-parallel run over T ranks, no data
parallelism, one micro-batch) records the all-reduce bytes each rank sent
by the ring algorithm (include/dsc/Runtime/Runtime.h), 2 * 4 * n * (T - 1)
/ T bytes for n floats: per layer, Megatron's four all-reduces of a [ROWS,
SEQ, HIDDEN] activation (attention and MLP outputs forward, their inputs'
gradients backward); for the vocabulary-parallel embedding and head, two
more (the lookup forward, the head input's gradient backward) and five of
one float per token (the loss's row maxima, sums and label logits forward,
maxima and sums again backward); and one float each for the loss and the
sliced gradients' norm."""
import json
import sys

log = sys.argv[1]
t, layers, rows, seq, hidden = map(int, sys.argv[2:7])
ring = lambda n: 2 * 4 * n * (t - 1) // t  # noqa: E731
tokens = rows * seq
expected = ((4 * layers + 2) * ring(tokens * hidden) + 5 * ring(tokens)
            + 2 * ring(1))
for record in map(json.loads, open(log)):
    sent = record["comm_bytes"]
    others = {k: v for k, v in sent.items() if k != "all_reduce" and v}
    if sent["all_reduce"] != expected or others:
        sys.exit(f"step {record['step']}: sent {sent}, expected all_reduce "
                 f"{expected} and nothing else")
print(f"all_reduce {expected} bytes per step")
