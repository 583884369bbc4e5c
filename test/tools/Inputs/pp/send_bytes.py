"""Prints the bytes rank 0 sent point-to-point per step (the same every
step, or an error): a pipeline stage's activations and, for tied
embeddings, the word embedding's gradient."""
import json
import sys

records = [json.loads(line) for line in open(sys.argv[1])]
sent = {r["comm_bytes"]["send"] for r in records}
if len(sent) != 1:
    sys.exit("send bytes differ between steps: %s" % sorted(sent))
print("send %d bytes per step" % sent.pop())
