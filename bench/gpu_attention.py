#!/usr/bin/env python3
"""Fused attention, forward and backward, on the GPU: dsc's kernels (dense
causal, and DeepSpeed's Fixed block-sparse layout) against PyTorch's
F.scaled_dot_product_attention (flash) on the same GPU in the same run.

  python3 bench/gpu_attention.py [--dsc-run build/bin/dsc-run]
      [--model examples/gpt2-small.json] [--batch 16] [--layers L]
      [--seq-lens 1024] [--layouts dense[,fixed]] [--block 64]
      [--num-local-blocks 16] [--steps 3] [--iters 20] [--json F]

The defaults time GPT-2 124M's attention (12 heads of 64, T=1024, bf16,
its attention dropout 0.1) at micro-batch 16. Long sequences, sparse
against dense (issue 14's benchmark):
  --batch 1 --layers 1 --seq-lens 4096,8192,16384 --layouts dense,fixed

dsc: `DSC_PROFILE=1 dsc-run train --backend cuda` on --model (its
n_positions raised to the sequence, --layers layers), bf16, for --steps
steps; the profile gives the GPU time (CUDA events, kernel by kernel) of
its Attention and AttentionGrad launches per call: one layer's forward and
backward. `fixed` adds DeepSpeed's sparse_attention section (mode fixed,
--block, --num-local-blocks, one global block, unidirectional).
PyTorch: SDPA's forward, and forward + backward, causal, on bf16 tensors of
the same shape with the same dropout, each the mean of --iters
CUDA-event-timed calls after warm-up; backward = (forward + backward) -
forward.

TFLOP/s (dense only) count the causal half of the score matrix: forward
4 B H T^2 D / 2, backward 2.5 times the forward (FlashAttention-2's count).

Without a CUDA device it exits 1 with one line. --self-test checks the
profile parser, the FLOP count and the configs and exits.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsc-run", default=os.path.join(HERE, "..", "build", "bin", "dsc-run"))
    ap.add_argument("--model", default=os.path.join(HERE, "..", "examples", "gpt2-small.json"))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--layers", type=int, help="default: the model's")
    ap.add_argument("--seq-lens", default="1024")
    ap.add_argument("--layouts", default="dense", help="dense and/or fixed")
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--num-local-blocks", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", help="also write the results as JSON here")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args(argv)
    a.seq_lens = [int(t) for t in a.seq_lens.split(",")]
    a.layouts = a.layouts.split(",")
    bad = [x for x in a.layouts if x not in ("dense", "fixed")]
    if bad:
        ap.error("unknown layout %s (dense, fixed)" % ",".join(bad))
    return a


class Shape:
    """The attention's shape and dropout from a GPT-2 config."""

    def __init__(self, cfg, batch, seq):
        self.batch, self.seq = batch, seq
        self.heads = cfg["n_head"]
        self.head_dim = cfg["n_embd"] // cfg["n_head"]
        self.dropout = cfg.get("attn_pdrop", 0.0)

    def forward_flops(self):
        return 4 * self.batch * self.heads * self.seq * self.seq * self.head_dim / 2


def dsc_model(cfg, a, seq):
    m = dict(cfg)
    m["n_positions"] = m["n_ctx"] = max(seq, cfg.get("n_positions", 0))
    if a.layers:
        m["n_layer"] = a.layers
    return m


def dsc_config(a, seq, layout):
    c = {"train_micro_batch_size_per_gpu": a.batch, "gradient_accumulation_steps": 1,
         "bf16": {"enabled": True},
         "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
         "dsc": {"seed": 42, "seq_len": seq}}
    if layout == "fixed":
        c["sparse_attention"] = {"mode": "fixed", "block": a.block,
                                 "num_local_blocks": a.num_local_blocks,
                                 "num_global_blocks": 1, "attention": "unidirectional"}
    return c


def profile_times(stderr):
    """{opcode: (seconds, calls)} from a `dsc cuda profile` report."""
    rows = {}
    for m in re.finditer(r"^\s+(\w+)\s+([0-9.]+) s\s+[0-9.]+%\s+(\d+) calls$", stderr, re.M):
        rows[m.group(1)] = (float(m.group(2)), int(m.group(3)))
    return rows


def self_test():
    report = ("dsc cuda profile: 0.504 s in 31 opcodes\n"
              "  AttentionGrad               0.1957 s  38.8%       36 calls\n"
              "  Attention                   0.0809 s  16.0%       36 calls\n")
    rows = profile_times(report)
    assert rows == {"AttentionGrad": (0.1957, 36), "Attention": (0.0809, 36)}, rows
    cfg = json.load(open(os.path.join(HERE, "..", "examples", "gpt2-small.json")))
    shape = Shape(cfg, 1, 1024)
    assert (shape.heads, shape.head_dim, shape.dropout) == (12, 64, 0.1)
    assert shape.forward_flops() == 2 * 12 * 1024 * 1024 * 64
    a = parse(["--layers", "1", "--seq-lens", "4096,16384", "--layouts", "dense,fixed"])
    m = dsc_model(cfg, a, 16384)
    assert (m["n_positions"], m["n_layer"]) == (16384, 1)
    assert "sparse_attention" not in dsc_config(a, 4096, "dense")
    assert dsc_config(a, 4096, "fixed")["sparse_attention"]["mode"] == "fixed"
    print("self-test ok")


def dsc_times(a, wd, cfg, seq, layout):
    """Seconds per call of dsc's Attention and AttentionGrad, or a reason."""
    model = os.path.join(wd, "model-%d.json" % seq)
    json.dump(dsc_model(cfg, a, seq), open(model, "w"))
    path = os.path.join(wd, "ds_config-%d-%s.json" % (seq, layout))
    json.dump(dsc_config(a, seq, layout), open(path, "w"))
    data = os.path.join(wd, "tokens-%d.txt" % seq)
    with open(data, "w") as f:
        for i in range((a.steps + 1) * a.batch * seq + 1):
            f.write("%d\n" % (i * 7919 % min(cfg["vocab_size"], 50000)))
    r = subprocess.run([a.dsc_run, "train", "--backend", "cuda", "--model", model,
                        "--config", path, "--data", data, "--steps", str(a.steps)],
                       env=dict(os.environ, DSC_PROFILE="1"),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return "dsc-run: " + (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    rows = profile_times(r.stderr)
    if "Attention" not in rows or "AttentionGrad" not in rows:
        return "no Attention/AttentionGrad in dsc's profile"
    return {op: rows[op][0] / rows[op][1] for op in ("Attention", "AttentionGrad")}


def torch_times(a, shape):
    import torch
    import torch.nn.functional as F
    dims = (shape.batch, shape.heads, shape.seq, shape.head_dim)
    q, k, v = (torch.randn(dims, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dy = torch.randn(dims, device="cuda", dtype=torch.bfloat16)

    def fwd():
        return F.scaled_dot_product_attention(q, k, v, dropout_p=shape.dropout,
                                              is_causal=True)

    def fwd_bwd():
        fwd().backward(dy)

    def timed(f):
        for _ in range(3):
            f()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.iters):
            f()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1000 / a.iters

    with torch.no_grad():
        t_fwd = timed(fwd)
    t_both = timed(fwd_bwd)
    return {"Attention": t_fwd, "AttentionGrad": t_both - t_fwd}


def main():
    a = parse()
    if a.self_test:
        self_test()
        return
    try:
        import torch
    except ImportError as e:
        sys.exit("no CUDA device: cannot import torch (%s)" % e)
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: torch.cuda.is_available() is False")
    wd = tempfile.mkdtemp(prefix="dsc-attention-bench-")
    cfg = json.load(open(a.model))
    print("\n%s, torch %s: causal attention, bf16, micro-batch %d, %d heads of %d, "
          "dropout %g; fixed: block %d, %d local blocks\n"
          % (torch.cuda.get_device_name(), torch.__version__, a.batch, cfg["n_head"],
             cfg["n_embd"] // cfg["n_head"], cfg.get("attn_pdrop", 0.0), a.block,
             a.num_local_blocks))
    print("| T | pass | " + " | ".join("dsc %s ms" % x for x in a.layouts) +
          " | SDPA ms | dsc dense TFLOP/s | SDPA TFLOP/s | "
          + " | ".join("SDPA / dsc %s time" % x for x in a.layouts) + " |")
    print("|" + " ---: |" * (5 + 2 * len(a.layouts)))
    results = []
    for seq in a.seq_lens:
        shape = Shape(cfg, a.batch, seq)
        dsc = {x: dsc_times(a, wd, cfg, seq, x) for x in a.layouts}
        sdpa = torch_times(a, shape)
        results.append({"seq": seq, "dsc_seconds": dsc, "sdpa_seconds": sdpa})
        f = shape.forward_flops()
        for op, label, flops in (("Attention", "forward", f),
                                 ("AttentionGrad", "backward", 2.5 * f)):
            t = sdpa[op]
            cells = [("%.3f" % (1e3 * dsc[x][op])) if isinstance(dsc[x], dict)
                     else "unavailable: " + dsc[x] for x in a.layouts]
            dense = dsc.get("dense")
            ratios = [("%.2fx" % (t / dsc[x][op])) if isinstance(dsc[x], dict) else "-"
                      for x in a.layouts]
            print("| %d | %s | %s | %.3f | %s | %.0f | %s |"
                  % (seq, label, " | ".join(cells), 1e3 * t,
                     "%.0f" % (flops / dense[op] / 1e12) if isinstance(dense, dict) else "-",
                     flops / t / 1e12, " | ".join(ratios)))
        sys.stdout.flush()
    if a.json:
        json.dump({"device": torch.cuda.get_device_name(), "batch": a.batch,
                   "results": results}, open(a.json, "w"), indent=1)
    # A benchmark that could not run dsc measured nothing: fail, so that a
    # prepared GPU run does not pass on SDPA's numbers alone.
    failed = ["T=%d %s: %s" % (r["seq"], x, reason)
              for r in results for x, reason in r["dsc_seconds"].items()
              if not isinstance(reason, dict)]
    if failed:
        sys.exit("FAIL: dsc did not run: " + "; ".join(failed))


if __name__ == "__main__":
    main()
