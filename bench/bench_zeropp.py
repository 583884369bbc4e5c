#!/usr/bin/env python3
"""ZeRO++ and hybrid sharding on the wire: bytes per step and step time of
ZeRO-3, qwZ, qgZ, both, hpZ and hybrid sharding (MiCS) on 4 ranks inside a
private network namespace.

A GPT-2 of --layers x --width trains on 4 ranks (Open MPI over TCP on the
namespace's loopback, one OpenMP thread each; "nodes" of 2 ranks for hpZ and
hybrid sharding). Reported per configuration:
- bytes the loopback carried per step (all ranks), from two runs of
  --steps and 2 x --steps steps (their difference, so start-up traffic
  cancels), and that against ZeRO-3's;
- rank 0's bytes per collective kind per step, from --log-json, against
  ZeRO-3's all-gather and reduce-scatter (the paper's expectations: qwZ
  about half of the all-gather bytes with 16-bit weights, a quarter of
  f32's here; qgZ about a quarter of a 16-bit reduce-scatter, an eighth of
  f32's);
- the median step time with the loopback limited to --rate (tc tbf).

With --convergence N: instead, a small GPT-2 (2 x 64, byte vocabulary,
T 32, 8 rows per rank) trains N steps on 2 ranks on text like the demo's
(lines of consecutive numbers) with ZeRO-3, qwZ, qgZ and both, for each of
--seeds (dsc.seed: initialisation and data order); reported: each run's
final loss (mean of the last 50 steps), the mean over the seeds and its
difference to ZeRO-3's mean (target: within 3%; one seed's trajectory
varies by more than that between runs of the same configuration).

    unshare -n /usr/bin/python3 bench/bench_zeropp.py
    /usr/bin/python3 bench/bench_zeropp.py --convergence 1000
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
sys.path.insert(0, os.path.join(ROOT, "test", "tools", "Inputs", "dp"))
from loopback import MCA, lo_tx_bytes, shaped_loopback  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_onebit import counting_text  # noqa: E402

CONFIGS = [
    ("ZeRO-3", {}),
    ("qwZ", {"zero_quantized_weights": True}),
    ("qgZ", {"zero_quantized_gradients": True}),
    ("qwZ + qgZ", {"zero_quantized_weights": True,
                   "zero_quantized_gradients": True}),
    ("hpZ (2 per node)", {"zero_hpz_partition_size": 2}),
    ("hybrid (MiCS, 2 per node)", {"mics_shard_size": 2}),
]
KINDS = ("all_gather", "reduce_scatter", "all_to_all", "all_reduce")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dsc-run", default=os.path.join(ROOT, "build", "bin", "dsc-run"))
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--convergence", type=int, default=0, metavar="STEPS")
    p.add_argument("--seeds", default="1,2,3,42")
    a = p.parse_args()
    if a.convergence:
        return convergence(a)
    if [l.partition(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]] != ["lo"]:
        sys.exit("run inside a private network namespace: "
                 "unshare -n /usr/bin/python3 bench/bench_zeropp.py")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    mpirun = shutil.which("mpirun")
    wd = tempfile.mkdtemp(prefix="dsc-zeropp-")
    model = os.path.join(wd, "model.json")
    json.dump({"model_type": "gpt2", "vocab_size": 256, "n_positions": a.seq,
               "n_embd": a.width, "n_layer": a.layers, "n_head": 4,
               "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
              open(model, "w"))
    data = os.path.join(wd, "data.txt")
    open(data, "w").write("the quick brown fox jumps over the lazy dog. " * 2000)

    def run(tag, extra, steps):
        cfg = os.path.join(wd, f"{tag}.json")
        zero = {"stage": 3, "stage3_param_persistence_threshold": 0,
                "overlap_comm": False, **extra}
        json.dump({"train_micro_batch_size_per_gpu": a.micro_batch,
                   "gradient_accumulation_steps": 1,
                   "optimizer": {"type": "AdamW"}, "zero_optimization": zero,
                   "dsc": {"seq_len": a.seq}}, open(cfg, "w"))
        log = os.path.join(wd, f"{tag}-{steps}.jsonl")
        cmd = ([mpirun, "-np", "4", "--oversubscribe", "--allow-run-as-root",
                "-x", "OMP_NUM_THREADS=1"] + MCA +
               [a.dsc_run, "train", "--model", model, "--config", cfg, "--data", data,
                "--steps", str(steps), "--log-json", log])
        before = lo_tx_bytes()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            sys.exit(f"{tag}: {r.stderr[-2000:]}")
        return lo_tx_bytes() - before, [json.loads(l) for l in open(log)]

    params = a.layers * 12 * a.width * a.width
    print(f"GPT-2 {a.layers} x {a.width} (about {params / 1e6:.1f} M parameters), "
          f"micro-batch {a.micro_batch} x {a.seq} per rank, 4 ranks (2 per node), "
          f"ZeRO stage 3, f32 parameters and gradients; wire bytes from "
          f"{a.steps}- and {2 * a.steps}-step runs, step time at {a.rate} "
          f"(median of steps 3..{2 * a.steps})")
    print("| configuration | loopback MB/step | vs ZeRO-3 | rank 0 all-gather KB | "
          "reduce-scatter KB | all-to-all KB | all-reduce KB | s/step at "
          f"{a.rate} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    wire = {}
    results = []
    for name, extra in CONFIGS:
        tag = name.split()[0].replace("+", "p")
        short, _ = run(tag + "-a", extra, a.steps)
        long_, recs = run(tag + "-b", extra, 2 * a.steps)
        per_step = (long_ - short) / a.steps
        wire[name] = per_step
        kinds = recs[-1]["comm_bytes"]
        results.append((name, extra, per_step, kinds))
    with shaped_loopback(a.rate):
        for name, extra, per_step, kinds in results:
            _, recs = run(name.split()[0].replace("+", "p") + "-t", extra, 2 * a.steps)
            tokens = a.micro_batch * a.seq * 4
            secs = statistics.median(tokens / r["tokens_per_s"] for r in recs[2:])
            print(f"| {name} | {per_step / 1e6:.2f} | "
                  f"{per_step / wire['ZeRO-3']:.2f}x | " +
                  " | ".join(f"{kinds.get(k, 0) / 1e3:.0f}" for k in KINDS) +
                  f" | {secs:.3f} |", flush=True)
    shutil.rmtree(wd)


def convergence(a):
    mpirun = shutil.which("mpirun")
    wd = tempfile.mkdtemp(prefix="dsc-zeropp-conv-")
    model = os.path.join(wd, "model.json")
    json.dump({"model_type": "gpt2", "vocab_size": 128, "n_positions": 32,
               "n_embd": 64, "n_layer": 2, "n_head": 4}, open(model, "w"))
    data = counting_text(os.path.join(wd, "data.txt"), 400000)
    window = 50
    print(f"GPT-2 2 x 64, byte vocabulary, T 32, 8 rows per rank, 2 ranks, "
          f"AdamW lr 1e-3, {a.convergence} steps on counting text; final loss "
          f"= mean of the last {window} steps")
    seeds = [int(x) for x in a.seeds.split(",")]
    print("| configuration | " + " | ".join(f"seed {x}" for x in seeds) +
          " | mean | vs ZeRO-3 |")
    print("| --- |" + " ---: |" * (len(seeds) + 2))
    base = None
    for name, extra in CONFIGS[:4]:
        finals = []
        for seed in seeds:
            cfg = os.path.join(wd, "cfg.json")
            json.dump({"train_micro_batch_size_per_gpu": 8,
                       "gradient_accumulation_steps": 1,
                       "gradient_clipping": 1.0,
                       "optimizer": {"type": "AdamW",
                                     "params": {"lr": 1e-3, "weight_decay": 0.01}},
                       "zero_optimization": {"stage": 3,
                                             "stage3_param_persistence_threshold": 0,
                                             **extra},
                       "dsc": {"seq_len": 32, "seed": seed}}, open(cfg, "w"))
            log = os.path.join(wd, "log.jsonl")
            cmd = [mpirun, "-np", "2", "--oversubscribe", "--allow-run-as-root",
                   "-x", "OMP_NUM_THREADS=1", a.dsc_run, "train", "--model", model,
                   "--config", cfg, "--data", data, "--steps", str(a.convergence),
                   "--log-json", log]
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            if r.returncode:
                sys.exit(f"{name}: {r.stderr[-2000:]}")
            losses = [json.loads(l)["loss"] for l in open(log)]
            finals.append(statistics.mean(losses[-window:]))
        mean = statistics.mean(finals)
        base = base or mean
        print(f"| {name} | " + " | ".join(f"{f:.4f}" for f in finals) +
              f" | {mean:.4f} | {100 * (mean - base) / base:+.2f}% |", flush=True)
    shutil.rmtree(wd)


if __name__ == "__main__":
    main()
