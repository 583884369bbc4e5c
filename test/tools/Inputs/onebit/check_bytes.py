"""check_bytes.py LOG.jsonl FREEZE MIN_RATIO

Bytes each rank sent per step (--log-json's comm_bytes) in 1-bit Adam's two
stages: the warm-up all-reduces every gradient in fp32; the compression
stage sends signs and scales (all_to_all, all_gather) and the loss (a 4-byte
all_reduce). Fails unless warm-up bytes / compression bytes >= MIN_RATIO.
"""
import json
import sys

log = [json.loads(line) for line in open(sys.argv[1])]
freeze, min_ratio = int(sys.argv[2]), float(sys.argv[3])
warm = [sum(r["comm_bytes"].values()) for r in log[:freeze]]
compressed = [sum(r["comm_bytes"].values()) for r in log[freeze:]]
if not warm or not compressed or len(set(warm)) != 1 or len(set(compressed)) != 1:
    sys.exit(f"FAIL: expected constant per-step bytes in each stage: {warm} {compressed}")
for r in log[freeze:]:
    if r["comm_bytes"]["all_reduce"] != 4:
        sys.exit(f"FAIL: step {r['step']} all-reduced {r['comm_bytes']['all_reduce']} bytes, expected only the loss (4)")
ratio = warm[0] / compressed[0]
print(f"bytes per step: warm-up {warm[0]}, compression {compressed[0]}, {ratio:.1f}x fewer")
if ratio < min_ratio:
    sys.exit(f"FAIL: {ratio:.1f}x < {min_ratio}x")
