#!/usr/bin/env python3
"""overlap_comm on CPU ranks: ZeRO-2 and ZeRO-3 step time with the
collectives beside the compute (a communication thread; ZeRO-3 also gathers
parameters ahead, -dsc-prefetch-gathers) against in program order, on a
loopback limited to --rate (tc tbf) inside a private network namespace.

A GPT-2 of --layers x --width trains on 2 ranks (Open MPI over TCP on the
loopback, one OpenMP thread each) with overlap_comm false and true,
alternating for --repeats rounds; the compute-only time is the same
per-rank work on one rank. Reported: median seconds per step (from
--log-json, first steps dropped), the communication time the serial run
adds over compute only, the share of it overlap hides, and whether the
weights are bit-identical.

    unshare -n /usr/bin/python3 bench/bench_overlap.py
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
from loopback import MCA, shaped_loopback  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dsc-run", default=os.path.join(ROOT, "build", "bin", "dsc-run"))
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--zero", default="2,3")
    p.add_argument("--reduce-bucket", type=int, default=500000000,
                   help="zero_optimization.reduce_bucket_size (elements)")
    a = p.parse_args()
    if [l.partition(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]] != ["lo"]:
        sys.exit("run inside a private network namespace: "
                 "unshare -n /usr/bin/python3 bench/bench_overlap.py")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    mpirun = shutil.which("mpirun")
    wd = tempfile.mkdtemp(prefix="dsc-overlap-")
    model = os.path.join(wd, "model.json")
    json.dump({"model_type": "gpt2", "vocab_size": 256, "n_positions": a.seq,
               "n_embd": a.width, "n_layer": a.layers, "n_head": 4,
               "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
              open(model, "w"))
    data = os.path.join(wd, "data.txt")
    open(data, "w").write("the quick brown fox jumps over the lazy dog. " * 2000)

    def run(ranks, stage, overlap, tag):
        cfg = os.path.join(wd, f"{tag}.json")
        json.dump({"train_micro_batch_size_per_gpu": a.micro_batch,
                   "optimizer": {"type": "AdamW"},
                   "zero_optimization": {"stage": stage, "overlap_comm": overlap,
                                         "reduce_bucket_size": a.reduce_bucket},
                   "dsc": {"seq_len": a.seq}}, open(cfg, "w"))
        log, out = os.path.join(wd, f"{tag}.jsonl"), os.path.join(wd, f"{tag}.safetensors")
        cmd = ([mpirun, "-np", str(ranks), "--oversubscribe", "--allow-run-as-root",
                "-x", "OMP_NUM_THREADS=1"] + MCA +
               [a.dsc_run, "train", "--model", model, "--config", cfg, "--data", data,
                "--steps", str(a.steps), "--log-json", log, "--save", out])
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            sys.exit(f"{tag}: {r.stderr[-2000:]}")
        recs = [json.loads(l) for l in open(log)]
        tokens = a.micro_batch * a.seq * ranks
        secs = statistics.median(tokens / r["tokens_per_s"] for r in recs[2:])
        return secs, open(out, "rb").read()

    params = a.layers * 12 * a.width * a.width
    print(f"GPT-2 {a.layers} x {a.width} (about {params / 1e6:.1f} M parameters), "
          f"micro-batch {a.micro_batch} x {a.seq} per rank, 2 ranks, loopback at "
          f"{a.rate}, reduce_bucket_size {a.reduce_bucket}; median s/step of "
          f"{a.repeats} alternating rounds "
          f"(steps 3..{a.steps})")
    print("| ZeRO | compute only (1 rank) | serial | overlap_comm | "
          "communication added by serial | hidden by overlap | weights |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    with shaped_loopback(a.rate):
        for stage in map(int, a.zero.split(",")):
            c, s, o = [], [], []
            for i in range(a.repeats):
                c.append(run(1, stage, False, f"z{stage}-one-{i}")[0])
                ts, ws = run(2, stage, False, f"z{stage}-serial-{i}")
                to, wo = run(2, stage, True, f"z{stage}-overlap-{i}")
                s.append(ts)
                o.append(to)
            mc, ms, mo = map(statistics.median, (c, s, o))
            comm = ms - mc
            hidden = (ms - mo) / comm if comm > 0 else float("nan")
            same = "bit-identical" if ws == wo else "DIFFER"
            print(f"| {stage} | {mc:.3f} | {ms:.3f} | {mo:.3f} | {comm:.3f} s | "
                  f"{100 * hidden:.0f}% | {same} |", flush=True)
    shutil.rmtree(wd)


if __name__ == "__main__":
    main()
