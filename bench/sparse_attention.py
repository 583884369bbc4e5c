#!/usr/bin/env python3
"""Block-sparse against dense attention on the CPU: step time and memory.

  python3 bench/sparse_attention.py [--dsc-run build/bin/dsc-run]
      [--seq-lens 1024,2048,4096,8192,16384] [--steps 3] [--budget-mib 2048]
      [--block 64] [--num-local-blocks 16] [--unfused-max 8192]
      [--json out.json]

One GPT-2-shaped model (1 layer, hidden 256, 4 heads of 64, vocab 512,
micro-batch 1, AdamW, no dropout) trains with three attentions, each at
every sequence length:
  - dense-unfused: dsc.fusion.attention false, the [B, H, T, T] scores
    materialised (what attention costs without a FlashAttention kernel);
  - dense: the fused FlashAttention-2 kernels (causal tiles only);
  - sparse: the same kernels over DeepSpeed's Fixed layout (--block 64,
    --num-local-blocks 16: windows of 1,024 tokens, the last block of each
    window global; unidirectional), visiting only its blocks.
dense-unfused runs only up to --unfused-max tokens (its [T, T] tensors
outgrow the machine).
For each: seconds per training step (dsc-run train --log-json: the median
of the steps after the first; the peers run in the same invocation, one
after the other), the planned peak memory (dsc-run estimate), the scores
the forward attends sparse and dense (estimate's block-sparse line: the
attention work, which the whole step's time dilutes with the GEMMs) and, by doubling then bisecting on
multiples of 64 with estimate alone, the longest sequence whose planned
peak fits --budget-mib. Ratios are against dense in the same run.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
import dsc_reference as R  # noqa: E402  (the llm.c token file writer)
MIB = 1024.0 * 1024.0
VARIANTS = ("dense-unfused", "dense", "sparse")


def parse():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsc-run", default=os.path.join(ROOT, "build", "bin", "dsc-run"))
    ap.add_argument("--seq-lens", default="1024,2048,4096,8192,16384")
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--num-local-blocks", type=int, default=16)
    ap.add_argument("--unfused-max", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--budget-mib", type=float, default=2048.0)
    ap.add_argument("--max-seq", type=int, default=1 << 17,
                    help="end of the longest-sequence search (reported as is)")
    ap.add_argument("--json", help="also write the results here")
    return ap.parse_args()


def model(max_positions):
    return {"model_type": "gpt2", "vocab_size": 512, "n_positions": max_positions,
            "n_ctx": max_positions, "n_embd": 256, "n_layer": 1, "n_head": 4,
            "activation_function": "gelu_new", "resid_pdrop": 0.0,
            "embd_pdrop": 0.0, "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-5,
            "initializer_range": 0.02}


def config(a, variant, seq_len):
    c = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
         "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
         "dsc": {"seed": 1, "seq_len": seq_len,
                 "fusion": {"attention": variant != "dense-unfused"}}}
    if variant == "sparse":
        c["sparse_attention"] = sparse_section(a)
    return c


def sparse_section(a):
    return {"mode": "fixed", "block": a.block,
            "num_local_blocks": a.num_local_blocks, "num_global_blocks": 1,
            "attention": "unidirectional"}


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return r.stdout


def estimate(a, wd, variant, seq_len):
    m = write(os.path.join(wd, "model.json"), model(seq_len))
    c = write(os.path.join(wd, f"{variant}.json"), config(a, variant, seq_len))
    report = os.path.join(wd, "memory.json")
    out = run([a.dsc_run, "estimate", "--model", m, "--config", c,
               "--memory-report", report])
    scores = None
    for line in out.splitlines():
        if line.startswith("block-sparse attention:"):
            words = line.split()  # "... S attended scores ... dense D (...)"
            scores = (int(words[2]), int(words[words.index("dense") + 1]))
    with open(report) as f:
        return json.load(f)["peak_bytes"], scores


def longest(a, wd, variant):
    """Longest multiple of 64 tokens whose planned peak fits the budget."""
    fits = lambda t: estimate(a, wd, variant, t)[0] <= a.budget_mib * MIB  # noqa: E731
    lo, hi = 0, 64
    while fits(hi):
        lo, hi = hi, hi * 2
        if hi > a.max_seq:
            return lo  # fits up to the search's end
    while hi - lo > 64:
        mid = (lo + hi) // 2 // 64 * 64
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def train_seconds(a, wd, variant, seq_len):
    m = write(os.path.join(wd, "model.json"), model(seq_len))
    c = write(os.path.join(wd, f"{variant}.json"), config(a, variant, seq_len))
    data = os.path.join(wd, "tokens.bin")
    R.write_tokens(data, R.random_tokens(a.steps * (seq_len + 1) + 1, 512, seed=1))
    log = os.path.join(wd, "log.jsonl")
    run([a.dsc_run, "train", "--model", m, "--config", c, "--data", data,
         "--steps", str(a.steps), "--log-json", log])
    with open(log) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return statistics.median(seq_len / r["tokens_per_s"] for r in recs[1:])


def main():
    a = parse()
    rows = []
    with tempfile.TemporaryDirectory() as wd:
        for t in (int(s) for s in a.seq_lens.split(",")):
            row = {"seq_len": t}
            for v in VARIANTS:
                if v == "dense-unfused" and t > a.unfused_max:
                    continue
                peak, scores = estimate(a, wd, v, t)
                row[v] = {"s_per_step": train_seconds(a, wd, v, t),
                          "peak_mib": peak / MIB}
                if scores is not None:
                    row[v]["attended_scores"], row[v]["dense_scores"] = scores
            rows.append(row)
            print(json.dumps(row), flush=True)
        best = {v: longest(a, wd, v) for v in VARIANTS}

    print()
    print("| seq | dense unfused s/step | dense (fused) s/step | sparse s/step "
          "| dense / sparse time | dense / sparse scores "
          "| peak MiB: unfused / dense / sparse |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        d, s = r["dense"], r["sparse"]
        u = r.get("dense-unfused")
        ut, um = (f"{u['s_per_step']:.3f}", f"{u['peak_mib']:.0f}") if u else ("n/a", "n/a")
        print(f"| {r['seq_len']} | {ut} | {d['s_per_step']:.3f} "
              f"| {s['s_per_step']:.3f} | {d['s_per_step'] / s['s_per_step']:.2f}x "
              f"| {s['dense_scores'] / s['attended_scores']:.2f}x "
              f"| {um} / {d['peak_mib']:.0f} / {s['peak_mib']:.0f} |")
    print()
    print(f"longest sequence planned within {a.budget_mib:.0f} MiB: "
          + ", ".join(f"{v} {best[v]}" for v in VARIANTS)
          + f" (sparse / dense-unfused {best['sparse'] / max(best['dense-unfused'], 1):.1f}x)")
    if a.json:
        write(a.json, {"rows": rows, "longest": best, "budget_mib": a.budget_mib,
                       "sparse_attention": sparse_section(a)})


if __name__ == "__main__":
    main()
