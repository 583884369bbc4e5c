"""same_losses.py A.jsonl B.jsonl: exit 0 iff the two --log-json logs have
the same steps with bit-identical loss, lr and grad_norm (tokens/s ignored)."""
import json
import sys

def records(path):
    return [(r["step"], r["loss"], r["lr"], r["grad_norm"])
            for r in map(json.loads, open(path))]

a, b = records(sys.argv[1]), records(sys.argv[2])
if not a or a != b:
    sys.exit("logs differ:\n  %s\n  %s" % (a, b))
