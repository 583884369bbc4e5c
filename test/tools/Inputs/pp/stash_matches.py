"""stash_matches.py LOG.jsonl ESTIMATE.txt

The pipeline stash that `dsc-run estimate --pipeline-stage 0` predicts
(its "pipeline stash (N micro-batches)" row) against the most bytes stage
0's driver held in it (pipeline_stash_bytes of every --log-json step).
Prints "stash N micro-batches: BYTES estimated = measured" ("micro-batch
chunks" when interleaved) or exits 1.
"""
import json
import re
import sys

log_path, estimate_path = sys.argv[1], sys.argv[2]
measured = max(json.loads(line)["pipeline_stash_bytes"]
               for line in open(log_path) if line.strip())
m = re.search(r"pipeline stash \((\d+) (micro-batch(?:es| chunks?)?)\)\s+(\d+)",
              open(estimate_path).read())
if not m:
    sys.exit(f"{estimate_path}: no pipeline stash row")
n, what, estimated = int(m.group(1)), m.group(2), int(m.group(3))
if estimated != measured:
    sys.exit(f"stash: estimated {estimated} bytes, measured {measured}")
print(f"stash {n} {what}: {estimated} bytes estimated = measured")
