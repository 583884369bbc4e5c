#!/usr/bin/env python3
"""ZeRO-Offload (zero_optimization.offload_optimizer, device cpu) and
ZeRO-Infinity (device nvme, the swap file in --nvme-path) against the same
ZeRO stage without offload, on CPU ranks: seconds per step (median over the
steps after the first 3, from --log-json), alternating the three for
--repeats rounds in the same run; the planned device and host arenas and
the swap file per rank (dsc-run estimate --memory-report); and whether the
weights after the run are the same bytes (they must be: on the CPU backend
the host update is the same kernels on the same values). One thread per rank: on
shared cores OpenMP's spinning threads make multi-threaded timings of
short kernels (the optimizer's) swing by several times.

    /usr/bin/python3 bench/bench_offload.py
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


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dsc-run", default=os.path.join(ROOT, "build", "bin", "dsc-run"))
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--zero", default="1,2,3", help="ZeRO stages")
    p.add_argument("--nvme-path", default=None,
                   help="directory of the swap file (default: a scratch "
                        "directory next to the run's files)")
    p.add_argument("--aio", default=None,
                   help="the NVMe runs' aio section as JSON (default: "
                        "DeepSpeed's defaults); `dsc-run swap-bench --tune` "
                        "prints one for the drive")
    a = p.parse_args()
    aio = json.loads(a.aio) if a.aio else None
    mpirun = shutil.which("mpirun")
    wd = tempfile.mkdtemp(prefix="dsc-offload-")
    model = os.path.join(wd, "model.json")
    json.dump({"model_type": "gpt2", "vocab_size": 8192, "n_positions": 128,
               "n_embd": 256, "n_layer": 4, "n_head": 4, "resid_pdrop": 0.0,
               "embd_pdrop": 0.0, "attn_pdrop": 0.0}, open(model, "w"))
    nvme = a.nvme_path or os.path.join(wd, "swap")
    os.makedirs(nvme, exist_ok=True)
    data = os.path.join(wd, "data.txt")
    open(data, "w").write("the quick brown fox jumps over the lazy dog. " * 2000)
    batch, seq = 8 * a.ranks, 128

    def config(stage, device, tag):
        zero = {"stage": stage, "stage3_param_persistence_threshold": 0}
        if device:
            zero["offload_optimizer"] = {"device": device, "pin_memory": True}
        if device == "nvme":
            zero["offload_optimizer"]["nvme_path"] = nvme
        cfg = os.path.join(wd, f"{tag}.json")
        body = {"train_batch_size": batch, "gradient_clipping": 1.0,
                "optimizer": {"type": "AdamW", "params": {"weight_decay": 0.01}},
                "zero_optimization": zero, "dsc": {"seq_len": seq}}
        if device == "nvme" and aio:
            body["aio"] = aio
        json.dump(body, open(cfg, "w"))
        return cfg

    def run(cfg, tag):
        log, out = os.path.join(wd, f"{tag}.jsonl"), os.path.join(wd, f"{tag}.safetensors")
        cmd = ([mpirun, "-np", str(a.ranks), "--oversubscribe", "--allow-run-as-root",
                "-x", "OMP_NUM_THREADS=1"] +
               [a.dsc_run, "train", "--model", model, "--config", cfg, "--data", data,
                "--steps", str(a.steps), "--log-json", log, "--save", out])
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            sys.exit(f"{tag}: {r.stderr[-2000:]}")
        recs = [json.loads(l) for l in open(log)]
        secs = statistics.median(batch * seq / r["tokens_per_s"] for r in recs[3:])
        return secs, open(out, "rb").read()

    def planned(cfg, tag):
        report = os.path.join(wd, f"{tag}-memory.json")
        subprocess.run([a.dsc_run, "estimate", "--model", model, "--config", cfg,
                        "--world-size", str(a.ranks), "--memory-report", report],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        m = json.load(open(report))
        return (m["peak_bytes"] / 2**20, m.get("host_peak_bytes", 0) / 2**20,
                m.get("nvme_bytes", 0) / 2**20)

    print(f"GPT-2 4 x 256 wide, vocabulary 8192 ({a.steps} steps, {a.ranks} ranks, "
          f"train_batch_size {batch}, seq {seq}, AdamW + clipping), median of "
          f"{a.repeats} alternating rounds")
    print("| ZeRO | s/step | cpu offload s/step | ratio | nvme offload s/step | "
          "ratio | device MiB | offloaded device MiB | cpu: host MiB | "
          "nvme: host MiB | nvme: swap MiB | weights |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
          "---: | ---: | --- |")
    for stage in map(int, a.zero.split(",")):
        cfgs = [config(stage, d, f"z{stage}{d or ''}") for d in (None, "cpu", "nvme")]
        times, same = [[], [], []], True
        for i in range(a.repeats):
            weights = []
            for k, cfg in enumerate(cfgs):
                secs, w = run(cfg, f"z{stage}-{k}-{i}")
                times[k].append(secs)
                weights.append(w)
            same = same and weights[0] == weights[1] == weights[2]
        d0, _, _ = planned(cfgs[0], f"z{stage}")
        d1, h1, _ = planned(cfgs[1], f"z{stage}cpu")
        _, h2, n2 = planned(cfgs[2], f"z{stage}nvme")
        m0, m1, m2 = (statistics.median(t) for t in times)
        print(f"| {stage} | {m0:.4f} | {m1:.4f} | {m1 / m0:.2f}x | {m2:.4f} | "
              f"{m2 / m0:.2f}x | {d0:.1f} | {d1:.1f} | {h1:.1f} | {h2:.1f} | "
              f"{n2:.1f} | {'bit-identical' if same else 'DIFFER'} |",
              flush=True)
    shutil.rmtree(wd)


if __name__ == "__main__":
    main()
