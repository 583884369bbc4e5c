"""configs.py IN.json OUTDIR: writes OUTDIR/z<s>.json and OUTDIR/z<s>-offload.json
for ZeRO stages 1, 2 and 3 from the training config IN.json: the same
config at that stage without and with ZeRO-Offload
(zero_optimization.offload_optimizer: device cpu, pin_memory true).
Stage 3 shards every parameter (stage3_param_persistence_threshold 0)."""
import copy
import json
import sys

base = json.load(open(sys.argv[1]))
for stage in (1, 2, 3):
    plain = copy.deepcopy(base)
    zero = plain.setdefault("zero_optimization", {})
    zero["stage"] = stage
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = 0
    offload = copy.deepcopy(plain)
    offload["zero_optimization"]["offload_optimizer"] = {
        "device": "cpu", "pin_memory": True}
    json.dump(plain, open("%s/z%d.json" % (sys.argv[2], stage), "w"))
    json.dump(offload, open("%s/z%d-offload.json" % (sys.argv[2], stage), "w"))
