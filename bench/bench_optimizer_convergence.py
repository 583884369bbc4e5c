#!/usr/bin/env python3
"""8-bit AdamW and Adafactor against AdamW over many seeds: final loss of a
small GPT-2 on text like the demo's.

For each of --seeds (dsc.seed: initialisation and data order), one rank
trains a GPT-2 of 2 layers x 64 (byte vocabulary, T 32, 16 rows per step)
for --steps on lines of consecutive numbers with AdamW (lr 1e-3, weight
decay 0.01, clipping 1.0), AdamW8bit (bitsandbytes' block-wise 8-bit
moments; min_8bit_size 0 so every tensor is quantized) and Adafactor
(transformers' semantics with the same external lr, scale_parameter and
relative_step false, beta1 0.9 so it keeps a first moment as AdamW does).
Reported: each run's final loss (mean of the last --final-window steps),
each optimizer's mean and median and their differences to AdamW's (target:
within 3%), its worst and best seed, and the loss curves of one seed to
--plot.

    /usr/bin/python3 bench/bench_optimizer_convergence.py
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
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_onebit import counting_text, plot  # noqa: E402

OPTIMIZERS = [
    ("AdamW", {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}),
    ("AdamW8bit", {"type": "AdamW8bit",
                   "params": {"lr": 1e-3, "weight_decay": 0.01,
                              "min_8bit_size": 0}}),
    ("Adafactor", {"type": "Adafactor",
                   "params": {"lr": 1e-3, "weight_decay": 0.01,
                              "scale_parameter": False,
                              "relative_step": False, "warmup_init": False,
                              "beta1": 0.9}}),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dsc-run", default=os.path.join(ROOT, "build", "bin", "dsc-run"))
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--seeds", default=",".join(str(s) for s in range(1, 17)))
    p.add_argument("--final-window", type=int, default=50)
    p.add_argument("--smooth", type=int, default=25)
    p.add_argument("--plot", default=os.path.join(ROOT, "bench",
                                                  "optimizer_convergence.png"))
    a = p.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    wd = tempfile.mkdtemp(prefix="dsc-optconv-")
    model = os.path.join(wd, "model.json")
    json.dump({"model_type": "gpt2", "vocab_size": 128, "n_positions": 32,
               "n_embd": 64, "n_layer": 2, "n_head": 4}, open(model, "w"))
    data = counting_text(os.path.join(wd, "data.txt"), 400000)
    print(f"GPT-2 2 x 64, byte vocabulary, T 32, 16 rows, 1 rank, {a.steps} "
          f"steps on counting text, {len(seeds)} seeds; final loss = mean of "
          f"the last {a.final_window} steps")
    finals, curves = {}, {}
    for name, opt in OPTIMIZERS:
        for seed in seeds:
            cfg = os.path.join(wd, "cfg.json")
            json.dump({"train_batch_size": 16, "gradient_clipping": 1.0,
                       "optimizer": opt, "dsc": {"seed": seed, "seq_len": 32}},
                      open(cfg, "w"))
            log = os.path.join(wd, "log.jsonl")
            r = subprocess.run([a.dsc_run, "train", "--model", model, "--config", cfg,
                                "--data", data, "--steps", str(a.steps),
                                "--log-json", log],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
            if r.returncode:
                sys.exit(f"{name} seed {seed}: {r.stderr[-2000:]}")
            losses = [json.loads(l)["loss"] for l in open(log)]
            finals.setdefault(name, []).append(
                statistics.mean(losses[-a.final_window:]))
            if seed == seeds[0]:
                curves[name] = {"losses": losses}
        print(f"  {name}: done", flush=True)
    base = statistics.mean(finals["AdamW"])
    base_median = statistics.median(finals["AdamW"])
    print("| optimizer | mean final loss | vs AdamW | median | vs AdamW | "
          "worst seed | best seed | stdev |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, _ in OPTIMIZERS:
        f = finals[name]
        worst = max(range(len(f)), key=lambda i: f[i])
        best = min(range(len(f)), key=lambda i: f[i])
        mean, median = statistics.mean(f), statistics.median(f)
        print(f"| {name} | {mean:.4f} | {100 * (mean - base) / base:+.2f}% | "
              f"{median:.4f} | {100 * (median - base_median) / base_median:+.2f}% | "
              f"{f[worst]:.4f} (seed {seeds[worst]}) | {f[best]:.4f} "
              f"(seed {seeds[best]}) | {statistics.stdev(f):.4f} |")
    print("per seed: " + json.dumps({k: [round(x, 4) for x in v]
                                     for k, v in finals.items()}))
    how = plot(a, curves, f"Loss, seed {seeds[0]} (trailing mean of "
                          f"{a.smooth} steps)")
    print(f"plot: {a.plot} ({how})")
    shutil.rmtree(wd)


if __name__ == "__main__":
    main()
