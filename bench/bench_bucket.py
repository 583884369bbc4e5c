#!/usr/bin/env python3
"""Gradients and shards in buckets (-dsc-bucket-collectives) against one
collective per tensor, on CPU ranks over Open MPI's TCP transport.

A GPT-2 of 12 narrow layers (about 150 small gradient tensors: latency,
not bandwidth, bounds its exchange) trains on 2 and 4 ranks at ZeRO stages
0, 1 and 2 with zero_optimization.reduce_bucket_size and
allgather_bucket_size 0 (one collective per tensor) and with DeepSpeed's
default (5e8 elements: one bucket each), alternating the two for
--repeats rounds in the same run. Reported per configuration: the
median seconds per step (from --log-json, first steps dropped), the
packets the loopback transmitted per step (each all-reduce is at least
one message per peer) and the ratio of the two variants. Weights after
the run are compared too: bucketing must not change them beyond the
reduction order of the transport (2 ranks: bit-identical).

Run inside a private network namespace so the loopback counts only this
job (as bench_onebit.py does):

    unshare -n /usr/bin/python3 bench/bench_bucket.py
"""
import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "tools", "Inputs", "dp"))
from loopback import MCA, lo_tx_packets  # noqa: E402


def safetensors_bytes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]]
            for k, v in header.items() if k != "__metadata__"}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dsc-run", default=os.path.join(ROOT, "build", "bin", "dsc-run"))
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--zero", default="0,1,2", help="ZeRO stages")
    a = p.parse_args()
    if [l.partition(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]] != ["lo"]:
        sys.exit("run inside a private network namespace: "
                 "unshare -n /usr/bin/python3 bench/bench_bucket.py")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    mpirun = shutil.which("mpirun")
    wd = tempfile.mkdtemp(prefix="dsc-bucket-")
    model = os.path.join(wd, "model.json")
    json.dump({"model_type": "gpt2", "vocab_size": 256, "n_positions": 32,
               "n_embd": 32, "n_layer": 12, "n_head": 2, "resid_pdrop": 0.0,
               "embd_pdrop": 0.0, "attn_pdrop": 0.0}, open(model, "w"))
    data = os.path.join(wd, "data.txt")
    open(data, "w").write("the quick brown fox jumps over the lazy dog. " * 400)

    def run(ranks, stage, bucket, tag):
        cfg = os.path.join(wd, f"{tag}.json")
        json.dump({"train_batch_size": 8, "optimizer": {"type": "AdamW"},
                   "zero_optimization": {"stage": stage, "reduce_bucket_size": bucket,
                                         "allgather_bucket_size": bucket},
                   "dsc": {"seq_len": 32}}, open(cfg, "w"))
        log, out = os.path.join(wd, f"{tag}.jsonl"), os.path.join(wd, f"{tag}.safetensors")
        cmd = ([mpirun, "-np", str(ranks), "--oversubscribe", "--allow-run-as-root",
                "-x", "OMP_NUM_THREADS=1"] + MCA +
               [a.dsc_run, "train", "--model", model, "--config", cfg, "--data", data,
                "--steps", str(a.steps), "--log-json", log, "--save", out])
        before = lo_tx_packets()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            sys.exit(f"{tag}: {r.stderr[-2000:]}")
        packets = (lo_tx_packets() - before) / a.steps
        recs = [json.loads(l) for l in open(log)]
        secs = statistics.median(1 / r["tokens_per_s"] for r in recs[3:]) * 8 * 32
        return secs, packets, safetensors_bytes(out)

    print(f"GPT-2 12 x 32 wide ({a.steps} steps, train_batch_size 8, seq 32), "
          f"median of {a.repeats} alternating rounds")
    print("| ranks | ZeRO | per tensor s/step | bucketed s/step | speed-up | "
          "loopback packets/step (per tensor / bucketed) | weights |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for ranks in map(int, a.ranks.split(",")):
        for stage in map(int, a.zero.split(",")):
            t0, t1, p0, p1 = [], [], [], []
            for i in range(a.repeats):
                s0, q0, w0 = run(ranks, stage, 0, f"r{ranks}-z{stage}-off-{i}")
                s1, q1, w1 = run(ranks, stage, 500000000, f"r{ranks}-z{stage}-on-{i}")
                t0.append(s0); t1.append(s1); p0.append(q0); p1.append(q1)
            same = "bit-identical" if w0 == w1 else "differ in the last bits (reduction order)"
            m0, m1 = statistics.median(t0), statistics.median(t1)
            print(f"| {ranks} | {stage} | {m0:.4f} | {m1:.4f} | {m0 / m1:.2f}x | "
                  f"{statistics.median(p0):.0f} / {statistics.median(p1):.0f} | {same} |",
                  flush=True)
    shutil.rmtree(wd)


if __name__ == "__main__":
    main()
