"""Compares the memory reports and dsc-translate summaries of
estimate-half.test (argument: its temporary directory)."""
import json
import re
import sys

d = sys.argv[1]
report = {p: json.load(open(f"{d}/{p}.json")) for p in ("bf16", "fp32")}
for p in ("bf16", "fp32"):
    summary = open(f"{d}/{p}.summary").read()
    arena = int(re.search(r"device arena (\d+) bytes", summary).group(1))
    peak = report[p]["peak_bytes"]
    if arena != peak:
        sys.exit(f"{p}: estimate peak {peak} != CUDA device arena {arena}")
    print(f"{p}: estimate peak == CUDA device arena")

half, full = report["bf16"]["layers"], report["fp32"]["layers"]
ratios = [h / f for h, f in zip(half, full)]
if len(half) != len(full) or not half or not all(0.45 <= r <= 0.55 for r in ratios):
    sys.exit(f"saved activations per layer bf16 {half} vs fp32 {full}")
print("bf16 saved activations per layer = 0.5 x fp32")
if not report["bf16"]["peak_bytes"] < report["fp32"]["peak_bytes"]:
    sys.exit("bf16 peak is not below fp32's")
print("bf16 peak < fp32 peak")
