"""nvme.py IN.json OUT.json SWAPDIR: IN.json with its optimizer offloaded to
NVMe (ZeRO-Infinity: offload_optimizer device nvme, nvme_path SWAPDIR) and
DeepSpeed's aio section."""
import json
import sys

config = json.load(open(sys.argv[1]))
config.setdefault("zero_optimization", {})["offload_optimizer"] = {
    "device": "nvme", "nvme_path": sys.argv[3], "pin_memory": True,
    "buffer_count": 4}
config["aio"] = {"block_size": 1048576, "queue_depth": 8, "thread_count": 1,
                 "single_submit": False, "overlap_events": True}
json.dump(config, open(sys.argv[2], "w"))
