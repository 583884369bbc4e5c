"""check_zero_memory.py WEIGHTS.safetensors N STAGE REPORT.json [THRESHOLD]

Exit 0 iff the per-rank model states of `dsc-run estimate --world-size N
--memory-report` equal ZeRO's formulas for dsc's f32 master weights and
Adam: parameters 4*Psi bytes, or at stage 3 the rank's shards
4*sum(ceil(n/N)); gradients 4*Psi, or from stage 2 on 4*sum(ceil(n/N));
optimizer state (two moments) 8*Psi, or from stage 1 on 8*sum(ceil(n/N)), n
the elements of each parameter (each is padded to a multiple of N). At
stage 3, parameters of fewer than THRESHOLD elements (the
stage3_param_persistence_threshold; default 0) stay whole."""
import json
import sys

from weights import tensor_sizes

weights, n, stage, report = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
threshold = int(sys.argv[5]) if len(sys.argv) > 5 else 0
sizes = tensor_sizes(weights)
psi = sum(sizes)
shards = sum(-(-s // n) for s in sizes)
stage3_params = sum(-(-s // n) if s >= threshold else s for s in sizes)
want = {"parameters": 4 * (stage3_params if stage >= 3 else psi),
        "gradients": 4 * (shards if stage >= 2 else psi),
        "optimizer_state": 8 * (shards if stage >= 1 else psi)}
got = json.load(open(report))
have = {k: got[k] for k in want}
if have != want:
    sys.exit(f"stage {stage}, {n} ranks: {have}, expected {want}")
print(f"stage {stage} on {n} ranks: {have} (Psi = {psi}, "
      f"{sum(s < threshold for s in sizes) if stage >= 3 else 0} of "
      f"{len(sizes)} parameters whole)")
