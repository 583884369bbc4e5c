#!/usr/bin/env python3
"""Fused causal attention, forward and backward, at GPT-2 124M's shapes
(micro-batch B, 12 heads, T=1024, head size 64, bf16, attention dropout
0.1): dsc's kernels against PyTorch's F.scaled_dot_product_attention on the
same GPU in the same run.

  python3 bench/gpu_attention.py [--dsc-run build/bin/dsc-run] [--batch 16]
                                 [--steps 3] [--iters 20] [--json F]

dsc: `DSC_PROFILE=1 dsc-run train --backend cuda` on examples/gpt2-small.json
(bf16) for --steps steps; its profile gives the GPU time (CUDA events, the
functions launched kernel by kernel) of the Attention and AttentionGrad
launches, divided by their count: one layer's forward and backward.
PyTorch: SDPA's forward, and forward + backward, on bf16 tensors of the same
shape with the same dropout, each the mean of --iters CUDA-event-timed
calls after warm-up; backward = (forward + backward) - forward.

TFLOP/s count the causal half of the score matrix: forward 4 B H T^2 D / 2,
backward 2.5 times the forward (FlashAttention-2's count).

Without a CUDA device it exits 1 with one line. --self-test checks the
profile parser and the FLOP count and exits.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HEADS, SEQ, HEAD_DIM, DROPOUT = 12, 1024, 64, 0.1


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsc-run", default=os.path.join(HERE, "..", "build", "bin", "dsc-run"))
    ap.add_argument("--model", default=os.path.join(HERE, "..", "examples", "gpt2-small.json"))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", help="also write the results as JSON here")
    ap.add_argument("--self-test", action="store_true")
    return ap.parse_args(argv)


def forward_flops(B):
    return 4 * B * HEADS * SEQ * SEQ * HEAD_DIM / 2


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
    assert forward_flops(1) == 2 * 12 * 1024 * 1024 * 64
    print("self-test ok")


def dsc_times(a, wd):
    """Seconds per call of dsc's Attention and AttentionGrad, or a reason."""
    config = {"train_micro_batch_size_per_gpu": a.batch, "gradient_accumulation_steps": 1,
              "bf16": {"enabled": True},
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
              "dsc": {"seed": 42, "seq_len": SEQ}}
    path = os.path.join(wd, "ds_config.json")
    json.dump(config, open(path, "w"))
    data = os.path.join(wd, "tokens.txt")
    with open(data, "w") as f:
        for i in range((a.steps + 1) * a.batch * SEQ + 1):
            f.write("%d\n" % (i * 7919 % 50000))
    r = subprocess.run([a.dsc_run, "train", "--backend", "cuda", "--model", a.model,
                        "--config", path, "--data", data, "--steps", str(a.steps)],
                       env=dict(os.environ, DSC_PROFILE="1"),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return "dsc-run: " + (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    rows = profile_times(r.stderr)
    if "Attention" not in rows or "AttentionGrad" not in rows:
        return "no Attention/AttentionGrad in dsc's profile"
    return {op: rows[op][0] / rows[op][1] for op in ("Attention", "AttentionGrad")}


def torch_times(a):
    import torch
    import torch.nn.functional as F
    shape = (a.batch, HEADS, SEQ, HEAD_DIM)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dy = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

    def fwd():
        return F.scaled_dot_product_attention(q, k, v, dropout_p=DROPOUT, is_causal=True)

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
    dsc = dsc_times(a, wd)
    sdpa = torch_times(a)
    f = forward_flops(a.batch)
    flops = {"Attention": f, "AttentionGrad": 2.5 * f}
    print("\n%s, torch %s: causal attention B=%d H=%d T=%d D=%d bf16, dropout %.1f\n"
          % (torch.cuda.get_device_name(), torch.__version__, a.batch, HEADS, SEQ, HEAD_DIM,
             DROPOUT))
    print("| pass | dsc ms | dsc TFLOP/s | SDPA ms | SDPA TFLOP/s | dsc / SDPA time |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for op, label in (("Attention", "forward"), ("AttentionGrad", "backward")):
        t = sdpa[op]
        if isinstance(dsc, str):
            print("| %s | unavailable: %s | - | %.3f | %.0f | - |"
                  % (label, dsc, 1e3 * t, flops[op] / t / 1e12))
            continue
        d = dsc[op]
        print("| %s | %.3f | %.0f | %.3f | %.0f | %.1fx |"
              % (label, 1e3 * d, flops[op] / d / 1e12, 1e3 * t, flops[op] / t / 1e12, d / t))
    if a.json:
        json.dump({"device": torch.cuda.get_device_name(), "batch": a.batch,
                   "dsc_seconds": dsc, "sdpa_seconds": sdpa}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
