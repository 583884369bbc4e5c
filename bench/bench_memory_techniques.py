#!/usr/bin/env python3
"""The memory techniques side by side on one device: AdamW, ZeRO-Offload of
the optimizer (and at stage 3 of the parameters), ZeRO-Infinity's NVMe
offload, 8-bit AdamW and Adafactor, on GPT-2-shaped models (vocabulary
50257) of growing size.

1. For each timed model and technique: the planned device peak (`dsc-run
   estimate --memory-report`, with the host arena and swap file beside it)
   and the measured seconds per step of a one-rank run (median of the steps
   after the first), with its ratio to AdamW's in the same round.
2. For each technique: the deepest GPT-2 of --fit-width (12 heads per 768)
   whose planned device peak fits --budget, found by bisection over the
   number of layers from the compiler's plans alone (no trial run).

    /usr/bin/python3 bench/bench_memory_techniques.py [--budget 2GiB]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ADAMW = {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01}}


def techniques(nvme):
    """(name, optimizer, zero_optimization) of every technique compared."""
    def offload(stage, device, params):
        zero = {"stage": stage, "stage3_param_persistence_threshold": 0,
                "offload_optimizer": {"device": device, "pin_memory": True}}
        if device == "nvme":
            zero["offload_optimizer"]["nvme_path"] = nvme
        if params:
            zero["offload_param"] = {"device": device, "pin_memory": True}
            if device == "nvme":
                zero["offload_param"]["nvme_path"] = nvme
        return zero
    return [
        ("AdamW", ADAMW, None),
        ("ZeRO-Offload (cpu, ZeRO-2)", ADAMW, offload(2, "cpu", False)),
        ("ZeRO-Offload + parameters (cpu, ZeRO-3)", ADAMW, offload(3, "cpu", True)),
        ("ZeRO-Infinity (nvme, ZeRO-2)", ADAMW, offload(2, "nvme", False)),
        ("ZeRO-Infinity + parameters (nvme, ZeRO-3)", ADAMW, offload(3, "nvme", True)),
        ("8-bit AdamW", {"type": "AdamW8bit",
                         "params": {"lr": 1e-4, "weight_decay": 0.01}}, None),
        ("Adafactor", {"type": "Adafactor",
                       "params": {"lr": 1e-4, "scale_parameter": False,
                                  "relative_step": False, "warmup_init": False}},
         None),
    ]


def parse_size(text):
    units = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10}
    for suffix, scale in units.items():
        if text.endswith(suffix):
            return int(float(text[:-len(suffix)]) * scale)
    return int(text)


class Bench:
    def __init__(self, a, wd):
        self.a, self.wd = a, wd
        self.data = os.path.join(wd, "data.txt")
        open(self.data, "w").write(
            "the quick brown fox jumps over the lazy dog. " * 4000)

    def model(self, layers, width):
        path = os.path.join(self.wd, f"gpt2-{layers}x{width}.json")
        json.dump({"model_type": "gpt2", "vocab_size": 50257,
                   "n_positions": 1024, "n_embd": width, "n_layer": layers,
                   "n_head": max(1, width // 64), "resid_pdrop": 0.0,
                   "embd_pdrop": 0.0, "attn_pdrop": 0.0}, open(path, "w"))
        return path

    def config(self, k, optimizer, zero):
        path = os.path.join(self.wd, f"technique-{k}.json")
        body = {"train_batch_size": self.a.micro_batch,
                "train_micro_batch_size_per_gpu": self.a.micro_batch,
                "gradient_clipping": 1.0, "optimizer": optimizer,
                "dsc": {"seq_len": self.a.seq_len}}
        if zero:
            body["zero_optimization"] = zero
        json.dump(body, open(path, "w"))
        return path

    def planned(self, model, cfg):
        """(device peak, host arena, swap file, parameter count) as planned."""
        report = os.path.join(self.wd, "memory.json")
        r = subprocess.run([self.a.dsc_run, "estimate", "--model", model,
                            "--config", cfg, "--memory-report", report],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        if r.returncode:
            sys.exit(f"estimate {model} {cfg}: {r.stderr.strip()}")
        m = json.load(open(report))
        return (m["peak_bytes"], m.get("host_peak_bytes", 0),
                m.get("nvme_bytes", 0), m["parameter_count"])

    def seconds_per_step(self, model, cfg):
        log = os.path.join(self.wd, "log.jsonl")
        env = dict(os.environ, OMP_NUM_THREADS=str(self.a.threads))
        r = subprocess.run([self.a.dsc_run, "train", "--model", model,
                            "--config", cfg, "--data", self.data,
                            "--steps", str(self.a.steps), "--log-json", log],
                           env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode:
            sys.exit(f"train {model} {cfg}: {r.stderr.strip()[-2000:]}")
        tokens = self.a.micro_batch * self.a.seq_len
        recs = [json.loads(line) for line in open(log)]
        return statistics.median(tokens / rec["tokens_per_s"] for rec in recs[1:])

    def deepest_fit(self, cfg, width):
        """The most layers (and that model's plan) under the budget, or None."""
        def plan(layers):
            return self.planned(self.model(layers, width), cfg)
        lo, hi = 0, 1
        while plan(hi)[0] <= self.a.budget_bytes:
            lo, hi = hi, hi * 2
            if hi > self.a.max_layers:
                hi = self.a.max_layers + 1
                break
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if plan(mid)[0] <= self.a.budget_bytes:
                lo = mid
            else:
                hi = mid
        return (lo, plan(lo)) if lo else None


def mib(n):
    return f"{n / 2**20:,.0f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dsc-run", default=os.path.join(ROOT, "build", "bin", "dsc-run"))
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=2)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--repeats", type=int, default=1,
                   help="rounds of the timed runs (the techniques alternate)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--timed", default="4x256,8x512,12x768",
                   help="the timed models, LAYERSxWIDTH")
    p.add_argument("--budget", default="2GiB")
    p.add_argument("--fit-width", type=int, default=768)
    p.add_argument("--max-layers", type=int, default=1024)
    p.add_argument("--nvme-path", default=None,
                   help="directory of the swap file (default: a scratch "
                        "directory beside the run's files; put it on a disk, "
                        "not tmpfs)")
    p.add_argument("--json", default=None, help="also write the numbers here")
    a = p.parse_args()
    a.budget_bytes = parse_size(a.budget)
    wd = tempfile.mkdtemp(prefix="dsc-memtech-")
    nvme = a.nvme_path or os.path.join(wd, "swap")
    os.makedirs(nvme, exist_ok=True)
    b = Bench(a, wd)
    techs = techniques(nvme)
    cfgs = [b.config(k, opt, zero) for k, (_, opt, zero) in enumerate(techs)]
    results = {"timed": [], "fit": []}
    try:
        print(f"One rank, {a.threads} threads, micro-batch {a.micro_batch}, "
              f"sequence {a.seq_len}, fp32, clipping 1.0; seconds per step: "
              f"median of steps 2-{a.steps}, {a.repeats} round(s)\n")
        print("| model | parameters | technique | device peak MiB | host MiB "
              "| swap file MiB | s/step | vs AdamW |")
        print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        for shape in a.timed.split(","):
            layers, width = map(int, shape.split("x"))
            model = b.model(layers, width)
            times = [[] for _ in techs]
            for _ in range(a.repeats):
                for k, cfg in enumerate(cfgs):
                    times[k].append(b.seconds_per_step(model, cfg))
            base = statistics.median(times[0])
            for k, (name, _, _) in enumerate(techs):
                peak, host, swap, count = b.planned(model, cfgs[k])
                secs = statistics.median(times[k])
                results["timed"].append({"model": shape, "parameters": count,
                                         "technique": name, "device_peak": peak,
                                         "host": host, "swap": swap,
                                         "seconds_per_step": secs})
                print(f"| GPT-2 {layers} x {width} | {count / 1e6:.1f}M | {name} "
                      f"| {mib(peak)} | {mib(host)} | {mib(swap)} | {secs:.3f} "
                      f"| {secs / base:.2f}x |", flush=True)
        print(f"\nDeepest GPT-2 of width {a.fit_width} whose planned device "
              f"peak fits {a.budget} (the same micro-batch and sequence):\n")
        print("| technique | layers | parameters | device peak MiB | host MiB "
              "| swap file MiB |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for k, (name, _, _) in enumerate(techs):
            fit = b.deepest_fit(cfgs[k], a.fit_width)
            if fit is None:
                print(f"| {name} | none | | | | |", flush=True)
                continue
            layers, (peak, host, swap, count) = fit
            results["fit"].append({"technique": name, "layers": layers,
                                   "parameters": count, "device_peak": peak,
                                   "host": host, "swap": swap})
            more = "" if layers < a.max_layers else " (the --max-layers limit)"
            print(f"| {name} | {layers}{more} | {count / 1e6:.1f}M | {mib(peak)} "
                  f"| {mib(host)} | {mib(swap)} |", flush=True)
        if a.json:
            json.dump(results, open(a.json, "w"), indent=1)
    finally:
        shutil.rmtree(wd)


if __name__ == "__main__":
    main()
