"""Reads a --log-json of a 0/1 Adam run and prints, per step, the stage its
bytes show: F (full: the gradients all-reduced), C (compressed: signs and
scales over all_to_all/all_gather), L (local: nothing but the logged loss's
4-byte all-reduce). Also prints the ratio of a full step's bytes to a
compressed step's, and fails if any step fits none of the three."""
import json
import sys

stages, full, compressed = [], [], []
for line in open(sys.argv[1]):
    b = json.loads(line)["comm_bytes"]
    if b["all_to_all"] > 0 and b["all_gather"] > 0:
        stages.append("C")
        compressed.append(sum(b.values()))
    elif b["all_reduce"] > 4:
        stages.append("F")
        full.append(sum(b.values()))
    elif sum(b.values()) == 4:
        stages.append("L")
    else:
        sys.exit(f"step {len(stages)}: bytes {b} fit no stage")
print("stages:", "".join(stages))
if full and compressed:
    print(f"full / compressed bytes: {min(full) / max(compressed):.1f}x")
