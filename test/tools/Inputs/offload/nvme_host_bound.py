"""nvme_host_bound.py MODEL.json REPORT.json: checks that ZeRO-Infinity's
planned host arena (--memory-report's host_peak_bytes, one rank) holds the
gradient copies (4 bytes per parameter) and at most the two largest
updates' states (master weights and Adam's two moments: 12 bytes per
element each), once each: an update writes its new state over the copy it
read from the swap file. Prints the two numbers."""
import json
import sys

model = json.load(open(sys.argv[1]))
report = json.load(open(sys.argv[2]))
vocab, width = model["vocab_size"], model["n_embd"]
tensors = sorted([vocab * width, model["n_positions"] * width,
                  4 * width * width, 3 * width * width], reverse=True)
bound = 4 * report["parameter_count"] + 12 * (tensors[0] + tensors[1])
slack = 64 * 1024  # alignment and the step's scalars
host = report["host_peak_bytes"]
print(f"host arena {host} bytes, bound {bound}")
if host > bound + slack:
    sys.exit(f"host arena {host} bytes exceeds the gradient copies and two "
             f"updates' states ({bound} bytes)")
