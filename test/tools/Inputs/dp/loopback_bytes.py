"""loopback_bytes.py N MPIRUN DSC_RUN MODEL CONFIG DATA WORKDIR

Run inside a private network namespace (unshare -n): checks the bytes that
--log-json reports against the bytes that crossed the transport. Open MPI is
made to use TCP over the namespace's loopback only (no shared memory) and
its ring all-reduce; MPIRUN "tcp" starts the ranks torchrun's way instead
(../tcp/torchrun.py), so they talk over dsc's own TCP transport, whose
collectives are rings too. Two runs of different lengths are measured by the
loopback's transmit counter, so the start-up and the launcher's own traffic
cancel. The traffic of the extra steps must be at least what the ranks
reported (every rank's comm_bytes) and at most 15% more (TCP/IP and MPI
headers, acknowledgements)."""
import json
import os
import subprocess
import sys

from loopback import MCA, lo_tx_bytes

n, mpirun, dsc_run, model, config, data, work = sys.argv[1:8]
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def run(steps):
    log = os.path.join(work, f"loopback-{n}-{steps}.jsonl")
    if mpirun == "tcp":
        torchrun = os.path.join(os.path.dirname(__file__), "..", "tcp", "torchrun.py")
        launch = [sys.executable, torchrun, "--nproc", n, "--"]
    else:
        launch = mpirun.split() + ["-np", n] + MCA
    before = lo_tx_bytes()
    subprocess.run(launch + [dsc_run, "train", "--model", model, "--config", config,
                             "--data", data, "--steps", str(steps), "--log-json", log],
                   check=True, stdout=subprocess.DEVNULL)
    records = [json.loads(line) for line in open(log)]
    return lo_tx_bytes() - before, records


short_bytes, _ = run(4)
long_bytes, records = run(24)
measured = (long_bytes - short_bytes) / 20
reported = int(n) * records[-1]["comm_bytes"]["all_reduce"]
ratio = measured / reported
print(f"{n} ranks: {measured:.0f} bytes per step on the loopback, "
      f"{reported} reported by the ranks (ratio {ratio:.3f})")
if not 1.0 <= ratio <= 1.15:
    sys.exit("the reported communication does not match the transport's")
