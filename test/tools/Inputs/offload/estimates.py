"""estimates.py DIR MODEL.json WEIGHTS.safetensors: runs `dsc-run estimate
--memory-report` for DIR/z<s>.json and DIR/z<s>-offload.json (configs.py's)
on 2 and 4 ranks and checks each pair with check_offload_memory.py."""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
out, model, weights = sys.argv[1:4]
for ranks in (2, 4):
    for stage in (1, 2, 3):
        reports = []
        for kind in ("", "-offload"):
            report = f"{out}/estimate-z{stage}{kind}-n{ranks}.json"
            subprocess.run(["dsc-run", "estimate", "--model", model,
                            "--config", f"{out}/z{stage}{kind}.json",
                            "--world-size", str(ranks),
                            "--memory-report", report],
                           check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            reports.append(report)
        subprocess.run([sys.executable, f"{here}/check_offload_memory.py",
                        weights, str(ranks), str(stage), *reports], check=True)
