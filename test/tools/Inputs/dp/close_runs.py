"""close_runs.py REF.jsonl REF.safetensors RUN.jsonl RUN.safetensors
                [RTOL [--losses-only | --weights-within=TOL]]

Exit 0 iff a data-parallel run matches the one-rank reference: the same
steps, every logged loss and gradient norm within RTOL (relative, default
1e-5), and every saved weight within fp32 noise of the reference's
(|a - b| <= 1e-5 * (1 + |b|)). Prints the largest differences.
--losses-only: the weights are not compared (16-bit runs, where Adam's
normalised update turns a rounding difference in a near-zero gradient into
a whole step). --weights-within=TOL: weights within TOL * (1 + |b|) instead
(a few 32-bit steps at a large learning rate amplify the summation order's
rounding the same way, less than any real difference would)."""
import json
import sys

sys.path.insert(0, __import__("os").path.join(
    __import__("os").path.dirname(__file__), "..", "..", "..", "reference"))
from safetensors_file import load_safetensors  # noqa: E402
import numpy as np  # noqa: E402


def records(path):
    return [(r["step"], r["loss"], r["grad_norm"])
            for r in map(json.loads, open(path))]


ref_log, ref_w, run_log, run_w = sys.argv[1:5]
rtol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-5
losses_only = sys.argv[6:] == ["--losses-only"]
weight_tol = 1e-5
if sys.argv[6:] and sys.argv[6].startswith("--weights-within="):
    weight_tol = float(sys.argv[6].split("=", 1)[1])
a, b = records(ref_log), records(run_log)
if not a or [s for s, _, _ in a] != [s for s, _, _ in b]:
    sys.exit(f"steps differ: {a} vs {b}")
worst_loss = max(abs(x[i] - y[i]) / abs(x[i])
                 for x, y in zip(a, b) for i in (1, 2))
wa, wb = load_safetensors(ref_w), load_safetensors(run_w)
if sorted(wa) != sorted(wb):
    sys.exit(f"tensors differ: {sorted(wa)} vs {sorted(wb)}")
worst_weight = max(
    float((np.abs(np.asarray(wb[k], np.float64) - np.asarray(wa[k], np.float64))
           / (1 + np.abs(np.asarray(wa[k], np.float64)))).max())
    for k in wa)
print(f"max relative loss/grad-norm difference {worst_loss:.2e}, "
      f"max weight difference {worst_weight:.2e}")
if worst_loss > rtol or (worst_weight > weight_tol and not losses_only):
    sys.exit(f"data-parallel run differs from the one-rank run "
             f"(rtol {rtol:g})")
