"""What the CPU-rank benchmarks share: a scratch GPT-2 job (model config
and a text file) and a training run on N Open MPI ranks whose --log-json
records come back."""
import json
import os
import re
import shutil
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DSC_RUN = os.path.join(ROOT, "build", "bin", "dsc-run")


class Job:
    """A working directory with `model` (GPT-2 of `model_keys`, no
    dropout) and `data` (`repeats` copies of a sentence)."""

    def __init__(self, prefix, model_keys, repeats):
        self.wd = tempfile.mkdtemp(prefix=prefix)
        self.model = os.path.join(self.wd, "model.json")
        json.dump({"model_type": "gpt2", "resid_pdrop": 0.0, "embd_pdrop": 0.0,
                   "attn_pdrop": 0.0, **model_keys}, open(self.model, "w"))
        self.data = os.path.join(self.wd, "data.txt")
        open(self.data, "w").write("the quick brown fox jumps over the lazy dog. " * repeats)

    def config(self, tag, cfg):
        """Writes training config `cfg` as <tag>.json; returns its path."""
        path = os.path.join(self.wd, f"{tag}.json")
        json.dump(cfg, open(path, "w"))
        return path

    def train(self, dsc_run, ranks, cfg, tag, steps, extra=()):
        """Trains on `ranks` ranks (one thread each); the log's records."""
        log = os.path.join(self.wd, f"{tag}.jsonl")
        subprocess.run([shutil.which("mpirun"), "-np", str(ranks), "--oversubscribe",
                        "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1", dsc_run, "train",
                        "--model", self.model, "--config", cfg, "--data", self.data,
                        "--steps", str(steps), "--log-json", log, *extra],
                       check=True, stdout=subprocess.DEVNULL)
        return [json.loads(line) for line in open(log)]

    def planned_memory(self, dsc_run, cfg, world, stage=None):
        """One rank's model state (parameters + gradients + optimizer
        state) and planned peak in bytes, from `dsc-run estimate` (of
        pipeline stage `stage`)."""
        cmd = [dsc_run, "estimate", "--model", self.model, "--config", cfg,
               "--world-size", str(world)]
        if stage is not None:
            cmd += ["--pipeline-stage", str(stage)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout

        def field(name):
            return int(re.search(rf"^\s+{name}\s+(\d+)", out, re.M).group(1))
        return (field("parameters") + field("gradients") + field("optimizer state"),
                field("peak"))
