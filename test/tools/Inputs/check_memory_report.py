"""check_memory_report.py EST.json [RUN.json]: the categories of a memory
report add up to peak_bytes, the per-layer activations to the activations;
an estimate has no measured peak; a run's report is the estimate's plus a
measured_peak_bytes equal to peak_bytes."""
import json
import sys

CATEGORIES = ["parameters", "gradients", "optimizer_state", "inputs_outputs",
              "alignment_padding", "activations", "workspace"]

est = json.load(open(sys.argv[1]))
if sum(est[k] for k in CATEGORIES) != est["peak_bytes"]:
    sys.exit("categories do not add up to peak_bytes: %s" % est)
if sum(est["layers"]) + est["activations_outside_layers"] != est["activations"]:
    sys.exit("layers do not add up to activations: %s" % est)
if "measured_peak_bytes" in est:
    sys.exit("an estimate measured something: %s" % est)
if len(sys.argv) > 2:
    run = json.load(open(sys.argv[2]))
    measured = run.pop("measured_peak_bytes", None)
    if measured != run["peak_bytes"]:
        sys.exit("measured peak %s != planned peak %s" % (measured, run["peak_bytes"]))
    if run != est:
        sys.exit("estimate and run differ:\n  %s\n  %s" % (est, run))
print("memory report ok")
