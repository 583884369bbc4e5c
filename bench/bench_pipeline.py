#!/usr/bin/env python3
"""Pipeline stages on CPU ranks (Open MPI): the measured bubble against
(P-1)/(m+P-1), and tokens/s of the 4-rank meshes.

Part 1 runs 2 stages (one core each) with m = 2, 4 and 8 micro-batches per
step under 1F1B, GPipe and interleaved 1F1B with v = 2 model chunks per
rank (closed form (P-1)/(v*m+P-1)). Each rank's runtime measures the fraction of
its micro-batch phase it spent waiting for the other stage (activations,
gradients, sends); `pipeline_bubble` in --log-json is the mean over the
stages, reported here as the median over the steps (the first dropped).
The closed form assumes stages of equal cost; here the last stage's
forward is free (its backward recomputes it) and the cut is by the cost
model, so the measurement and the formula need not agree exactly.

Part 2 trains one GPT-2 and one global batch (16 sequences, 4
micro-batches per rank where the mesh has a pipeline) on 4 ranks as data
4, pipeline 4, data 2 x pipeline 2 (plain, ZeRO-1, ZeRO-3), tensor 2 x
pipeline 2 and data 2 x tensor 2, alternated for --repeats rounds:
median seconds per step, speed relative to DP4, bytes each rank sent per
step, the measured bubble, the largest stage's model state and planned
peak (`dsc-run estimate --pipeline-stage`: one micro-batch's activations;
the driver keeps the others in flight in host memory) and the largest
loss difference from DP4 (every
mesh trains the same model: 1e-5 relative or the script fails). The 4
ranks share this machine's cores, so the step times measure how the work
divides, not a cluster.

    /usr/bin/python3 bench/bench_pipeline.py
"""
import argparse
import os
import statistics
import sys

from cpu_ranks import DSC_RUN, Job

MESHES = [  # name, data, tensor, pipeline, ZeRO stage
    ("DP4", 4, 1, 1, 0),
    ("PP4", 1, 1, 4, 0),
    ("DP2 x PP2", 2, 1, 2, 0),
    ("DP2 x PP2 ZeRO-1", 2, 1, 2, 1),
    ("DP2 x PP2 ZeRO-3", 2, 1, 2, 3),
    ("TP2 x PP2", 1, 2, 2, 0),
    ("DP2 x TP2", 2, 2, 1, 0),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dsc-run", default=DSC_RUN)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args()
    job = Job("dsc-pp-", {"vocab_size": 256, "n_positions": 128, "n_embd": 256,
                          "n_layer": 4, "n_head": 8}, 2000)

    def config(tag, batch, accum, tensor, pipeline, stage, schedule="1f1b"):
        virtual = {"pipeline_virtual_stages": 2} if schedule == "interleaved" else {}
        return job.config(tag, {
            "train_batch_size": batch, "gradient_accumulation_steps": accum,
            "gradient_clipping": 1.0,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
            "tensor_parallel": {"autotp_size": tensor},
            "pipeline": {"stages": pipeline},
            "zero_optimization": {"stage": stage, "stage3_param_persistence_threshold": 0},
            "dsc": {"seq_len": 128, "pipeline_schedule": schedule, **virtual}})

    def run(cfg, tag, ranks):
        return job.train(a.dsc_run, ranks, cfg, tag, a.steps)

    print(f"GPT-2 n_embd 256, 4 layers, 8 heads, seq 128; {a.steps} steps x "
          f"{a.repeats} rounds on {os.cpu_count()} cores")
    print()
    print("Part 1: 2 stages, 2 sequences per micro-batch")
    print("| schedule | m | s/step | measured bubble | (P-1)/(v*m+P-1) |")
    print("| --- | --- | --- | --- | --- |")
    for schedule in ("1f1b", "gpipe", "interleaved"):
        v = 2 if schedule == "interleaved" else 1
        for m in (2, 4, 8):
            bubbles, steps = [], []
            for r in range(a.repeats):
                tag = f"bubble-{schedule}-{m}-{r}"
                recs = run(config(tag, 2 * m, m, 1, 2, 0, schedule), tag, 2)
                bubbles += [x["pipeline_bubble"] for x in recs[1:]]
                steps += [2 * m * 128 / x["tokens_per_s"] for x in recs[1:]]
            print(f"| {schedule}{' (v = 2)' if v > 1 else ''} | {m} "
                  f"| {statistics.median(steps):.3f} "
                  f"| {statistics.median(bubbles):.3f} | {1 / (v * m + 1):.3f} |")

    print()
    print("Part 2: 4 ranks, global batch 16")
    seconds = {name: [] for name, *_ in MESHES}
    records = {}
    for r in range(a.repeats):
        for name, d, t, pp, stage in MESHES:
            tag = f"{name.replace(' ', '_')}-{r}"
            accum = 4 if pp > 1 else 1
            recs = run(config(tag, 16, accum, t, pp, stage), tag, 4)
            records[name] = recs
            seconds[name] += [16 * 128 / x["tokens_per_s"] for x in recs[1:]]
    base = statistics.median(seconds["DP4"])
    print("| mesh | s/step | vs DP4 | bytes sent per rank per step | measured bubble "
          "| model state per rank (MiB) | planned peak per rank (MiB) "
          "| max loss diff vs DP4 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for name, d, t, pp, stage in MESHES:
        s = statistics.median(seconds[name])
        sent = sum(records[name][-1]["comm_bytes"].values())
        bubble = records[name][-1].get("pipeline_bubble")
        diff = max(abs(x["loss"] - y["loss"]) / abs(y["loss"])
                   for x, y in zip(records[name], records["DP4"]))
        worst = max(worst, diff)
        # The largest stage's (one micro-batch's activations: the driver
        # keeps the others in flight in host memory).
        cfg = config(f"est-{name.replace(' ', '_')}", 16, 4 if pp > 1 else 1, t, pp, stage)
        state, peak = map(max, zip(*[
            job.planned_memory(a.dsc_run, cfg, 4, st if pp > 1 else None)
            for st in range(pp)]))
        print(f"| {name} | {s:.3f} | {base / s:.2f}x | {sent:,} | "
              f"{'-' if bubble is None else f'{bubble:.3f}'} | {state / 2**20:.2f} "
              f"| {peak / 2**20:.1f} | {diff:.1e} |")
    if worst > 1e-5:
        sys.exit(f"a mesh trained a different model: loss difference {worst:.1e}")


if __name__ == "__main__":
    main()
