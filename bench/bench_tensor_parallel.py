#!/usr/bin/env python3
"""Tensor slicing against data parallelism on 4 CPU ranks (Open MPI).

One GPT-2 and one global batch train on 4 ranks as data 4 (DP4, with and
without ZeRO-1), data 2 x tensor 2 (with and without ZeRO-1) and tensor 4,
the configurations alternated for --repeats rounds in the same run.
Reported per configuration: the median seconds per step (from --log-json,
the first steps dropped), the bytes each rank sent per step (the runtime's
own count), one rank's planned model-state and peak memory (`dsc-run
estimate` of the same step), its speed relative to DP4, and the largest
loss difference from DP4 (every mesh trains the same model: 1e-5
relative or the script fails).

On this 2-core machine the 4 ranks share 2 cores, so the step time mostly
measures how the work divides, not a cluster; the bytes and the memory are
what a real job would see.

    /usr/bin/python3 bench/bench_tensor_parallel.py
"""
import argparse
import os
import statistics
import sys

from cpu_ranks import DSC_RUN, Job

MESHES = [  # name, autotp_size, ZeRO stage
    ("DP4", 1, 0),
    ("DP4 ZeRO-1", 1, 1),
    ("DP2 x TP2", 2, 0),
    ("DP2 x TP2 ZeRO-1", 2, 1),
    ("TP4", 4, 0),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dsc-run", default=DSC_RUN)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args()
    job = Job("dsc-tp-", {"vocab_size": 256, "n_positions": 128, "n_embd": 256,
                          "n_layer": 4, "n_head": 8}, 2000)

    def config(tag, tp, stage):
        return job.config(tag, {"train_batch_size": 16, "gradient_clipping": 1.0,
                                "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                                "tensor_parallel": {"autotp_size": tp},
                                "zero_optimization": {"stage": stage},
                                "dsc": {"seq_len": 128}})

    def run(cfg, tag):
        return job.train(a.dsc_run, 4, cfg, tag, a.steps)

    seconds = {name: [] for name, _, _ in MESHES}
    records = {}
    for r in range(a.repeats):
        for name, tp, stage in MESHES:
            tag = f"{name.replace(' ', '_')}-{r}"
            recs = run(config(tag, tp, stage), tag)
            records[name] = recs
            tokens = 16 * 128
            seconds[name] += [tokens / x["tokens_per_s"] for x in recs[2:]]

    base = statistics.median(seconds["DP4"])
    print(f"GPT-2 n_embd 256, 4 layers, 8 heads, seq 128, global batch 16; "
          f"{a.steps} steps x {a.repeats} rounds, 4 ranks on {os.cpu_count()} cores")
    print("| mesh | s/step | vs DP4 | bytes sent per rank per step | model state per rank (MiB) "
          "| planned peak per rank (MiB) | max loss diff vs DP4 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for name, tp, stage in MESHES:
        s = statistics.median(seconds[name])
        sent = sum(records[name][-1]["comm_bytes"].values())
        state, peak = job.planned_memory(a.dsc_run, config(f"est-{tp}-{stage}", tp, stage), 4)
        diff = max(abs(x["loss"] - y["loss"]) / abs(y["loss"])
                   for x, y in zip(records[name], records["DP4"]))
        worst = max(worst, diff)
        print(f"| {name} | {s:.3f} | {base / s:.2f}x | {sent:,} | {state / 2**20:.2f} "
              f"| {peak / 2**20:.1f} | {diff:.1e} |")
    if worst > 1e-5:
        sys.exit(f"a mesh trained a different model: loss difference {worst:.1e}")


if __name__ == "__main__":
    main()
