#!/usr/bin/env python3
"""Memory: dsc's static arena plan against DeepSpeed's formulas, and the plan
against what a real CPU run uses.

  python3 bench/memory.py [--dsc-run build/bin/dsc-run] [--json out.json]
                          [--no-train]

1. `dsc-run estimate` plans the GPT-2-small step (examples/gpt2-small.json:
   12 layers, hidden 768, 12 heads, vocab 50257) at micro-batch 8, seq 1024
   (AdamW, fp32) without allocating it, and the script sets the planner's
   numbers next to the formulas of ../shared/seeds/001 (ZeRO):
     - model states of mixed-precision Adam: 16 bytes/parameter
       (fp16 weights 2 + fp16 grads 2 + fp32 master 4 + Adam m 4 + v 4);
       dsc trains in fp32 with no master copy: weights 4 + gradient
       accumulators 4 + Adam m, v 8 = also 16 bytes/parameter;
     - parameters ~ 12 * nl * hd^2 (the four GEMMs of each block);
     - activation working memory of one block, ci = 1:
       bsz * seq * (16 * hd + 2 * heads * seq), which the seed calls bytes
       but which counts values (4 bytes each in dsc's fp32);
     - activation-checkpoint memory: 2 * bsz * seq * hd * nl / ci bytes
       (fp16 block inputs); dsc does not checkpoint yet (-dsc-remat), so
       this is only the target the recompute pass will be held to.
2. Unless --no-train, a smaller GPT-2 (the bench_cpu.py shape: L4 C256 H8
   V512, B8 T128, dropout 0.1) trains 2 steps twice, with the planned arena
   and with DSC_NO_MEMORY_PLAN=1 (one allocation per buffer): planned peak,
   the arena peak the CPU backend measured, the process's max RSS, and
   whether the losses agree bit for bit.
"""

import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1024.0 * 1024.0


def mib(n):
    return "{:,.1f}".format(n / MIB)


def run(cmd, env=None):
    """Runs cmd; returns its stdout."""
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, text=True)
    if proc.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), proc.stderr))
    return proc.stdout


def max_rss_kib(cmd, env):
    """Runs cmd alone under /usr/bin/time -f %M (max RSS, KiB)."""
    timed = ["/usr/bin/time", "-f", "%M"] + cmd
    proc = subprocess.run(timed, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, text=True)
    if proc.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), proc.stderr))
    return int(proc.stderr.strip().splitlines()[-1])


def estimate_gpt2_small(dsc_run, workdir):
    model = os.path.join(ROOT, "examples", "gpt2-small.json")
    ds = {"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
          "gradient_clipping": 1.0,
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.1}}}
    config = os.path.join(workdir, "ds_gpt2_small.json")
    json.dump(ds, open(config, "w"))
    report_path = os.path.join(workdir, "gpt2_small_memory.json")
    cmd = [dsc_run, "estimate", "--model", model, "--config", config,
           "--seq-len", "1024", "--memory-report", report_path]
    table = run(cmd)
    report = json.load(open(report_path))
    cfg = json.load(open(model))
    nl, hd, heads = cfg["n_layer"], cfg["n_embd"], cfg["n_head"]
    bsz, seq = 8, 1024
    phi = report["parameter_count"]
    states = report["parameters"] + report["gradients"] + report["optimizer_state"]
    awm_values = bsz * seq * (16 * hd + 2 * heads * seq)
    layers = report["layers"]
    ckpt_fp16 = 2 * bsz * seq * hd * nl

    rows = [
        ("parameters (count)", "{:,}".format(phi),
         "{:,} (12*nl*hd^2)".format(12 * nl * hd * hd),
         "the formula counts the block GEMMs only; dsc adds the 50257x768 "
         "token and 1024x768 position embeddings, biases and LayerNorms"),
        ("model states (MiB)", mib(states), mib(16 * phi) + " (16*Phi)",
         "equal: fp32 weights 4 + grads 4 + Adam 8 = mixed precision's "
         "2 + 2 + 4 + 4 + 4 bytes/param"),
        ("saved activations per layer (MiB)", mib(layers[0]),
         mib(4 * awm_values) + " (bsz*seq*(16hd+2*heads*seq) values x 4 B)",
         "equal: the formula counts values (Megatron-LM's 32h+4as fp16 "
         "bytes per token without dropout masks is the same count); fp32 "
         "stores 4 bytes each, and dropout masks are regenerated from Philox"),
        ("saved activations, 12 layers (MiB)", mib(sum(layers)),
         mib(4 * awm_values * nl), ""),
        ("saved activations outside layers (MiB)",
         mib(report["activations_outside_layers"]), "-",
         "embedding output and final LayerNorm output (2*hd per token)"),
        ("logits + dlogits (MiB)",
         mib(2 * 4 * bsz * seq * cfg["vocab_size"]), "-",
         "the [8,1024,50257] logits (an Output) and their gradient "
         "(workspace): not in the formulas, 1.5 GiB each"),
        ("per-layer checkpoints (MiB)", "not implemented",
         mib(ckpt_fp16) + " (2*bsz*seq*hd*nl, fp16)",
         "x2 in fp32; the target for -dsc-remat"),
        ("peak (MiB)", mib(report["peak_bytes"]), "-",
         "temp arena {} MiB vs lower bound {} MiB".format(
             mib(report["temp_bytes"]),
             mib(max(f["live_lower_bound_bytes"] for f in report["functions"])))),
    ]
    return table, report, rows, " ".join(cmd)


def train_small(dsc_run, workdir):
    model = {"model_type": "gpt2", "vocab_size": 512, "n_positions": 128,
             "n_embd": 256, "n_layer": 4, "n_head": 8, "resid_pdrop": 0.1,
             "embd_pdrop": 0.1, "attn_pdrop": 0.1}
    ds = {"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
          "gradient_clipping": 1.0,
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.1}},
          "dsc": {"seq_len": 128}}
    mpath = os.path.join(workdir, "small_model.json")
    cpath = os.path.join(workdir, "small_ds.json")
    json.dump(model, open(mpath, "w"))
    json.dump(ds, open(cpath, "w"))
    data = os.path.join(workdir, "tokens.u16")
    rng = random.Random(1)
    with open(data, "wb") as f:
        f.write(struct.pack("<%dH" % 20000, *[rng.randrange(512) for _ in range(20000)]))
    results = {}
    for name, extra in (("planned", {}), ("unplanned", {"DSC_NO_MEMORY_PLAN": "1"})):
        env = dict(os.environ, **extra)
        env.setdefault("OMP_NUM_THREADS", "1")
        report = os.path.join(workdir, "small_%s.json" % name)
        log = os.path.join(workdir, "small_%s.jsonl" % name)
        cmd = [dsc_run, "train", "--model", mpath, "--config", cpath, "--data", data,
               "--steps", "2", "--log-json", log, "--memory-report", report]
        rss = max_rss_kib(cmd, env)
        r = json.load(open(report))
        losses = [json.loads(l)["loss"] for l in open(log)]
        results[name] = {"rss_kib": rss, "report": r, "losses": losses}
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsc-run", default=os.path.join(ROOT, "build", "bin", "dsc-run"))
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--no-train", action="store_true", help="skip part 2")
    ap.add_argument("--workdir", help="keep configs and reports here")
    args = ap.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="dsc-bench-memory-")
    os.makedirs(workdir, exist_ok=True)

    table, report, rows, cmd = estimate_gpt2_small(args.dsc_run, workdir)
    print("## GPT-2-small (124M), micro-batch 8, seq 1024, AdamW fp32\n")
    print("$ " + cmd + "\n")
    print(table)
    print("| quantity | dsc planner | DeepSpeed formula | note |")
    print("| --- | ---: | ---: | --- |")
    for r in rows:
        print("| %s | %s | %s | %s |" % r)
    out = {"gpt2_small": report}

    if not args.no_train:
        res = train_small(args.dsc_run, workdir)
        p, u = res["planned"], res["unplanned"]
        print("\n## GPT-2 L4 C256 H8 V512, B8 T128, dropout 0.1: 2 CPU steps\n")
        print("| run | planned peak (MiB) | measured arena peak (MiB) | max RSS (MiB) |")
        print("| --- | ---: | ---: | ---: |")
        for name in ("planned", "unplanned"):
            r = res[name]["report"]
            measured = r.get("measured_peak_bytes")
            print("| %s | %s | %s | %s |" % (
                name + (" arena" if name == "planned" else " (one allocation per buffer)"),
                mib(r["peak_bytes"]),
                mib(measured) if measured is not None else "-",
                mib(res[name]["rss_kib"] * 1024)))
        same = p["losses"] == u["losses"]
        print("\nlosses planned %s, unplanned %s: %s" % (
            p["losses"], u["losses"], "bit-identical" if same else "DIFFERENT"))
        if p["report"].get("measured_peak_bytes") != p["report"]["peak_bytes"]:
            print("WARNING: measured arena peak differs from the plan")
        out["small_train"] = res
        if not same:
            sys.exit(1)
    if args.json:
        json.dump(out, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
