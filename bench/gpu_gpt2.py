#!/usr/bin/env python3
"""GPU training throughput: dsc (dsc-run train --backend cuda) vs PyTorch
eager and torch.compile, GPT-2 124M, seq 1024, bf16 (or a LLaMA), on the
same GPU in the same run.

  python3 bench/gpu_gpt2.py [--dsc-run build/bin/dsc-run] [--steps 30]
                            [--warmup 10] [--json results.json]
  python3 bench/gpu_gpt2.py --model examples/llama-3.2-1b.json --seq-len 2048

Models, the PyTorch side written here (no transformers), attention through
F.scaled_dot_product_attention:
- GPT-2 as dsc builds it (learned positions, pre-LN, GELU tanh, tied
  embeddings, dropout from the model config; default
  examples/gpt2-small.json);
- LLaMA (model_type "llama"): RMSNorm computed in f32, rotary embeddings
  with the config's rope_theta and llama3 rope_scaling, SwiGLU MLP,
  grouped-query attention (SDPA's enable_gqa), embeddings tied or not as
  configured. Its tokens are written in llm.c's uint32 format when the
  vocabulary passes 65,536. Training: AdamW (lr 3e-4, betas 0.9/0.95,
weight decay 0.1), gradient clipping 1.0, bf16 autocast for PyTorch and
`bf16.enabled` for dsc (f32 master weights on both); the same random tokens
and batching (step s reads B*T+1 tokens at s*B*T, as dsc-run does).

Micro-batch: the largest power of two that fits (up to --max-batch), per
system. PyTorch: doubling from 1 (torch.compile from eager's) and catching
CUDA OOM. dsc: the largest whose `dsc-run estimate` peak is within 90% of
the free GPU memory, then doubled while a 2-step dsc-run succeeds (the
estimate overcounts bf16 buffers), halved while it reports out of memory.

Throughput: tokens/s over the steps after --warmup (dsc: from its
--log-json `tokens_per_s`; PyTorch: synchronised wall time per step).
MFU = tokens/s * FLOPs per token / peak, with the nanoGPT/PaLM count
FLOPs per token = 6 * N + 12 * L * T * d (N: parameters without the
embeddings that are only gathered, GPT-2's positions and an untied
LLaMA's input embedding; d: the attention width, heads * head_dim; the
second term is attention's QK^T and AV, forward and backward). Peak: bf16 dense, 989.4
TFLOP/s on H100 SXM and H200, 756 on H100 PCIe, 312 on A100; others need
--peak-tflops.

Without a CUDA device it exits 1 with one line. When dsc-run cannot train
on CUDA (a build without the CUDA backend), PyTorch is still measured and
dsc is reported unavailable with dsc-run's reason. --self-test checks the
CPU-only parts (FLOP count, peak table, batch search) and exits.
"""

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LLMC_MAGIC = 20240520         # llm.c's uint16 token files
LLMC_LLAMA3_MAGIC = 20240801  # and its uint32 ones (version 7)

# bf16 dense peak (TFLOP/s) by device-name substring, most specific first.
PEAKS = [("H100 PCIe", 756.0), ("H200", 989.4), ("H100", 989.4), ("A100", 312.0)]


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsc-run", default=os.path.join(HERE, "..", "build", "bin", "dsc-run"))
    ap.add_argument("--model", default=os.path.join(HERE, "..", "examples", "gpt2-small.json"),
                    help="Hugging Face GPT-2 or LLaMA config.json (default: GPT-2 124M)")
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, help="use this micro-batch for every system (no search)")
    ap.add_argument("--max-batch", type=int, default=128)
    ap.add_argument("--peak-tflops", type=float, help="bf16 dense peak of this GPU")
    ap.add_argument("--systems", default="dsc,eager,compile",
                    help="comma-separated subset of dsc,eager,compile")
    ap.add_argument("--workdir", help="keep configs/data/logs here (default: temp dir)")
    ap.add_argument("--json", help="also write the results as JSON here")
    ap.add_argument("--self-test", action="store_true", help="check the CPU-only parts and exit")
    a = ap.parse_args(argv)
    if a.steps <= a.warmup:
        ap.error("--steps must exceed --warmup")
    a.dsc_run, a.model = os.path.abspath(a.dsc_run), os.path.abspath(a.model)
    a.systems = a.systems.split(",")
    bad = [s for s in a.systems if s not in ("dsc", "eager", "compile")]
    if bad:
        ap.error("unknown system %s (dsc, eager, compile)" % ",".join(bad))
    return a


def gpt2_params(cfg, seq_len):
    """Parameter count of dsc's GPT-2 (tied embeddings): (all, without wpe)."""
    V, d, L = cfg["vocab_size"], cfg["n_embd"], cfg["n_layer"]
    inner = cfg.get("n_inner") or 4 * d
    per_layer = (2 * 2 * d            # ln_1, ln_2
                 + d * 3 * d + 3 * d  # c_attn
                 + d * d + d          # attn c_proj
                 + d * inner + inner  # c_fc
                 + inner * d + d)     # mlp c_proj
    wpe = cfg["n_positions"] * d
    total = V * d + wpe + L * per_layer + 2 * d
    return total, total - wpe


def llama_params(cfg):
    """Parameter count of a LLaMA: (all, without an untied input embedding)."""
    V, d, L = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or d // H
    inner = cfg["intermediate_size"]
    attn = d * H * hd + 2 * d * KV * hd + H * hd * d
    if cfg.get("attention_bias"):
        attn += H * hd + 2 * KV * hd + d
    mlp = 3 * d * inner + (2 * inner + d if cfg.get("mlp_bias") else 0)
    per_layer = 2 * d + attn + mlp
    tied = cfg.get("tie_word_embeddings", False)
    total = V * d * (1 if tied else 2) + L * per_layer + d
    return total, total if tied else total - V * d


def is_llama(cfg):
    return cfg.get("model_type") == "llama"


def model_params(cfg, seq_len):
    return llama_params(cfg) if is_llama(cfg) else gpt2_params(cfg, seq_len)


def flops_per_token(cfg, seq_len):
    """6 N + 12 L T d (see the module docstring)."""
    _, n = model_params(cfg, seq_len)
    if is_llama(cfg):
        L, H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
        width = H * (cfg.get("head_dim") or cfg["hidden_size"] // H)
    else:
        L, width = cfg["n_layer"], cfg["n_embd"]
    return 6 * n + 12 * L * seq_len * width


def peak_tflops(device_name, override=None):
    if override:
        return override
    for key, peak in PEAKS:
        if key in device_name:
            return peak
    return None


def largest_fitting(fits, start, limit):
    """The largest power-of-two multiple/fraction of `start` (<= limit) for
    which fits(b) holds, assuming fitting is monotone; None if not even 1."""
    b = start
    if not fits(b):
        while b > 1:
            b //= 2
            if fits(b):
                return b
        return None
    while b * 2 <= limit and fits(b * 2):
        b *= 2
    return b


def self_test():
    cfg = json.load(open(os.path.join(HERE, "..", "examples", "gpt2-small.json")))
    total, n = gpt2_params(cfg, 1024)
    assert total == 124439808, total  # GPT-2 124M (Hugging Face's count)
    assert n == total - 1024 * 768
    f = flops_per_token(cfg, 1024)
    assert f == 6 * n + 12 * 12 * 1024 * 768, f
    assert peak_tflops("NVIDIA H100 80GB HBM3") == 989.4
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert peak_tflops("NVIDIA H200") == 989.4
    assert peak_tflops("Tesla T4") is None and peak_tflops("Tesla T4", 65.0) == 65.0
    assert largest_fitting(lambda b: b <= 24, 1, 128) == 16
    assert largest_fitting(lambda b: b <= 24, 64, 128) == 16
    assert largest_fitting(lambda b: b <= 200, 16, 128) == 128
    assert largest_fitting(lambda b: False, 8, 128) is None
    llama = json.load(open(os.path.join(HERE, "..", "examples", "llama-3.2-1b.json")))
    total_l, n_l = llama_params(llama)
    assert total_l == n_l == 1235814400, total_l  # Llama 3.2 1B, tied embeddings
    assert flops_per_token(llama, 2048) == 6 * n_l + 12 * 16 * 2048 * 2048
    untied = dict(llama, tie_word_embeddings=False)
    assert llama_params(untied) == (total_l + 128256 * 2048, total_l)
    with tempfile.TemporaryDirectory() as tmp:
        import numpy as np
        for vocab, magic, width in ((50257, LLMC_MAGIC, 2), (128256, LLMC_LLAMA3_MAGIC, 4)):
            path = os.path.join(tmp, "t.bin")
            write_tokens(path, np.array([1, vocab - 1, 3]), vocab)
            raw = open(path, "rb").read()
            header = np.frombuffer(raw[:1024], dtype="<i4")
            assert (header[0], header[2]) == (magic, 3) and len(raw) == 1024 + 3 * width
            dtype = "<u2" if width == 2 else "<u4"
            assert list(np.frombuffer(raw[1024:], dtype=dtype)) == [1, vocab - 1, 3]
    a = parse(["--systems", "eager,compile", "--steps", "5", "--warmup", "2"])
    assert a.systems == ["eager", "compile"]
    assert dsc_problem({"losses": [10.98, 10.9]}) is None
    assert dsc_problem({"unavailable": "no dsc-run"}) == "no dsc-run"
    assert dsc_problem({"losses": [10.98, None]}).startswith("a loss is not finite")
    assert dsc_problem({"losses": [10.9, 10.98]}).startswith("the loss did not fall")
    print("self-test ok: GPT-2 124M %d params, %.1f GFLOP/token at T=1024; "
          "Llama 3.2 1B %d params, %.1f GFLOP/token at T=2048"
          % (total, f / 1e9, total_l, flops_per_token(llama, 2048) / 1e9))


# ---------------------------------------------------------------- data --

def write_tokens(path, tokens, vocab):
    """llm.c .bin: 256 int32 header words (magic, version, count), then
    uint16 tokens (version 1), or uint32 ones (version 7) for a vocabulary
    past 65,536."""
    import numpy as np
    wide = vocab > 65536
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = (LLMC_LLAMA3_MAGIC if wide else LLMC_MAGIC,
                                       7 if wide else 1, len(tokens))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens).astype("<u4" if wide else "<u2").tobytes())


def batch_at(tokens, step, B, T):
    """dsc-run's batching: B*T+1 tokens from (step*B*T) mod (N - B*T - 1)."""
    n = B * T
    start = (step * n) % (len(tokens) - n - 1)
    chunk = tokens[start:start + n + 1]
    return chunk[:-1].view(B, T), chunk[1:].view(B, T)


# ------------------------------------------------------------- PyTorch --

def make_model(cfg, seq_len):
    return make_llama(cfg, seq_len) if is_llama(cfg) else make_gpt2(cfg, seq_len)


def rope_inv_freq(cfg, head_dim):
    """Rotary frequencies: rope_theta, with transformers' "llama3" scaling
    (long wavelengths divided by factor, short ones kept, a smooth blend
    between low_freq_factor and high_freq_factor)."""
    import math
    import torch
    base = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    sc = cfg.get("rope_scaling") or {}
    if sc.get("rope_type", sc.get("type")) == "llama3":
        factor, old = sc["factor"], sc["original_max_position_embeddings"]
        lo, hi = sc["low_freq_factor"], sc["high_freq_factor"]
        wavelen = 2 * math.pi / inv
        smooth = (old / wavelen - lo) / (hi - lo)
        blended = (1 - smooth) * inv / factor + smooth * inv
        inv = torch.where(wavelen > old / lo, inv / factor,
                          torch.where(wavelen < old / hi, inv, blended))
    return inv.float()


def make_llama(cfg, seq_len):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    KV = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or d // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    abias, mbias = bool(cfg.get("attention_bias")), bool(cfg.get("mlp_bias"))
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    native_gqa = (major, minor) >= (2, 5)  # SDPA's enable_gqa

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            h = x.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
            return self.weight * h.to(x.dtype)

    def rotate(x, cos, sin):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos.to(x.dtype) + torch.cat((-x2, x1), dim=-1) * sin.to(x.dtype)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm()
            self.q_proj = nn.Linear(d, H * hd, bias=abias)
            self.k_proj = nn.Linear(d, KV * hd, bias=abias)
            self.v_proj = nn.Linear(d, KV * hd, bias=abias)
            self.o_proj = nn.Linear(H * hd, d, bias=abias)
            self.post_attention_layernorm = RMSNorm()
            self.gate_proj = nn.Linear(d, cfg["intermediate_size"], bias=mbias)
            self.up_proj = nn.Linear(d, cfg["intermediate_size"], bias=mbias)
            self.down_proj = nn.Linear(cfg["intermediate_size"], d, bias=mbias)

        def forward(self, x, cos, sin):
            B, T, _ = x.shape
            h = self.input_layernorm(x)
            q = self.q_proj(h).view(B, T, H, hd).transpose(1, 2)
            k = self.k_proj(h).view(B, T, KV, hd).transpose(1, 2)
            v = self.v_proj(h).view(B, T, KV, hd).transpose(1, 2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            if native_gqa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                k, v = (t.repeat_interleave(H // KV, dim=1) for t in (k, v))
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o_proj(y.transpose(1, 2).reshape(B, T, H * hd))
            h = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(cfg["vocab_size"], d)
            self.layers = nn.ModuleList(Block() for _ in range(L))
            self.norm = RMSNorm()
            self.tied = cfg.get("tie_word_embeddings", False)
            if not self.tied:
                self.lm_head = nn.Linear(d, cfg["vocab_size"], bias=False)
            freqs = torch.outer(torch.arange(seq_len).float(), rope_inv_freq(cfg, hd))
            angles = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)
            std = cfg.get("initializer_range", 0.02)
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=std)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)

        def forward(self, idx, targets):
            T = idx.shape[1]
            cos, sin = self.cos[:T], self.sin[:T]
            x = self.embed_tokens(idx)
            for block in self.layers:
                x = block(x, cos, sin)
            x = self.norm(x)
            head = self.embed_tokens.weight if self.tied else self.lm_head.weight
            logits = F.linear(x, head)
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                                   targets.reshape(-1))

    return Llama()


def make_gpt2(cfg, seq_len):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    d, H = cfg["n_embd"], cfg["n_head"]
    inner = cfg.get("n_inner") or 4 * d
    eps = cfg.get("layer_norm_epsilon", 1e-5)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d, eps=eps)
            self.c_attn = nn.Linear(d, 3 * d)
            self.attn_proj = nn.Linear(d, d)
            self.ln_2 = nn.LayerNorm(d, eps=eps)
            self.c_fc = nn.Linear(d, inner)
            self.mlp_proj = nn.Linear(inner, d)
            self.attn_p = cfg.get("attn_pdrop", 0.0)
            self.resid = nn.Dropout(cfg.get("resid_pdrop", 0.0))

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (t.view(B, T, H, d // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, dropout_p=self.attn_p if self.training else 0.0)
            y = y.transpose(1, 2).reshape(B, T, d)
            x = x + self.resid(self.attn_proj(y))
            h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
            return x + self.resid(self.mlp_proj(h))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(cfg["vocab_size"], d)
            self.wpe = nn.Embedding(cfg["n_positions"], d)
            self.drop = nn.Dropout(cfg.get("embd_pdrop", 0.0))
            self.h = nn.ModuleList(Block() for _ in range(cfg["n_layer"]))
            self.ln_f = nn.LayerNorm(d, eps=eps)
            std = cfg.get("initializer_range", 0.02)
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=std)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)

        def forward(self, idx, targets):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for block in self.h:
                x = block(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # tied
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                                   targets.reshape(-1))

    return GPT2()


def torch_trainer(cfg, seq_len, B, compiled):
    """A step function for micro-batch B (model and AdamW on the GPU)."""
    import torch
    model = make_model(cfg, seq_len).cuda().train()
    total, _ = model_params(cfg, seq_len)
    assert sum(p.numel() for p in model.parameters()) == total
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    fwd = torch.compile(model) if compiled else model

    def step(x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def free_cuda(compiled):
    import torch
    if compiled:
        torch._dynamo.reset()  # one graph per batch size: stay under its cache limit
    gc.collect()
    torch.cuda.empty_cache()


def torch_fits(cfg, a, tokens, compiled):
    import torch

    def fits(B):
        try:
            step = torch_trainer(cfg, a.seq_len, B, compiled)
            for s in range(2):
                step(*batch_at(tokens, s, B, a.seq_len))
            torch.cuda.synchronize()
            return True
        except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
            # Inductor's kernels report OOM as a plain RuntimeError.
            if "out of memory" not in str(e).lower():
                raise
            return False
        finally:
            step = None
            free_cuda(compiled)
    return fits


def bench_torch(cfg, a, tokens, B, compiled):
    import torch
    step = torch_trainer(cfg, a.seq_len, B, compiled)
    times, losses = [], []
    for s in range(a.steps):
        x, y = batch_at(tokens, s, B, a.seq_len)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = step(x, y)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    step = None
    free_cuda(compiled)
    timed = times[a.warmup:]
    return {"micro_batch": B, "tokens_per_s": B * a.seq_len * len(timed) / sum(timed),
            "losses": losses}


# ----------------------------------------------------------------- dsc --

def dsc_config(a, B):
    return {"train_micro_batch_size_per_gpu": B, "gradient_accumulation_steps": 1,
            "gradient_clipping": 1.0, "steps_per_print": a.steps,
            "bf16": {"enabled": True},
            "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95],
                                                      "eps": 1e-8, "weight_decay": 0.1}},
            "dsc": {"seed": 42, "seq_len": a.seq_len}}


def run_dsc(a, wd, args):
    return subprocess.run([a.dsc_run, *args], cwd=wd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def last_line(r):
    lines = (r.stderr.strip() or r.stdout.strip() or "exit status %d" % r.returncode).splitlines()
    return lines[-1]


def bench_dsc(a, wd, data, free_bytes):
    """dsc's result, or {"unavailable": reason}."""
    def config(B):
        path = os.path.join(wd, "ds_config.b%d.json" % B)
        json.dump(dsc_config(a, B), open(path, "w"))
        return path

    def estimate_fits(B):
        report = os.path.join(wd, "estimate.b%d.json" % B)
        r = run_dsc(a, wd, ["estimate", "--model", a.model, "--config", config(B),
                            "--memory-report", report])
        if r.returncode != 0:
            raise RuntimeError(last_line(r))
        return json.load(open(report))["peak_bytes"] <= 0.9 * free_bytes

    def train(B, steps, log):
        t0 = time.perf_counter()
        r = run_dsc(a, wd, ["train", "--model", a.model, "--config", config(B),
                            "--data", data, "--backend", "cuda", "--steps", str(steps),
                            "--log-json", log])
        print("dsc-run train, micro-batch %d, %d steps: %s (%.0f s)"
              % (B, steps, "ok" if r.returncode == 0 else last_line(r),
                 time.perf_counter() - t0), file=sys.stderr, flush=True)
        return r

    def oom(r):
        return r.returncode != 0 and "out of memory" in r.stderr.lower()

    if not os.path.exists(a.dsc_run):
        return {"unavailable": "no dsc-run at %s" % a.dsc_run}
    try:
        B = a.batch or largest_fitting(estimate_fits, 8, a.max_batch)
    except RuntimeError as e:
        return {"unavailable": str(e)}
    if B and not a.batch:
        # The estimate counts 16-bit buffers at 4 bytes (README, Mixed
        # precision), so it undershoots: probe larger batches for real.
        probe = os.path.join(wd, "dsc-probe.jsonl")
        while B * 2 <= a.max_batch:
            r = train(B * 2, 2, probe)
            if r.returncode != 0:
                if oom(r):
                    break
                return {"unavailable": last_line(r)}
            B *= 2
    while B:
        log = os.path.join(wd, "dsc-log.b%d.jsonl" % B)
        r = train(B, a.steps, log)
        if r.returncode == 0:
            break
        if not oom(r) or a.batch:
            return {"unavailable": last_line(r)}
        B //= 2
    if not B:
        return {"unavailable": "dsc-run train: out of memory at micro-batch 1"}
    rows = [json.loads(l) for l in open(log) if l.strip()]
    timed = rows[a.warmup:]
    tok = B * a.seq_len
    secs = sum(tok / r["tokens_per_s"] for r in timed)
    return {"micro_batch": B, "tokens_per_s": tok * len(timed) / secs,
            "losses": [r["loss"] for r in rows]}


# ---------------------------------------------------------------- main --

def progress(system, result):
    """One line per system as soon as it is measured, so that a run cut
    short by a time limit still shows what it measured."""
    shown = {k: v for k, v in result.items() if k != "losses"}
    print("measured %s: %s" % (system, json.dumps(shown)), file=sys.stderr, flush=True)


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
        sys.exit("no CUDA device: torch.cuda.is_available() is False (torch %s)"
                 % torch.__version__)
    cfg = json.load(open(a.model))
    name = torch.cuda.get_device_name()
    peak = peak_tflops(name, a.peak_tflops)
    wd = os.path.abspath(a.workdir or tempfile.mkdtemp(prefix="dsc-gpu-bench-"))
    os.makedirs(wd, exist_ok=True)
    # Enough tokens that no step of the largest batch wraps around.
    n = (a.steps + 1) * a.max_batch * a.seq_len + 1
    g = torch.Generator().manual_seed(0)
    tokens_cpu = torch.randint(0, cfg["vocab_size"], (n,), generator=g, dtype=torch.int64)
    data = os.path.join(wd, "tokens.bin")
    write_tokens(data, tokens_cpu.numpy(), cfg["vocab_size"])

    res = {}
    # dsc first, in its own process, while this one holds no GPU memory
    # beyond its context.
    if "dsc" in a.systems:
        free_bytes, _ = torch.cuda.mem_get_info()
        res["dsc"] = bench_dsc(a, wd, data, free_bytes)
        progress("dsc", res["dsc"])
    tokens = tokens_cpu.cuda()
    eager_b = None
    for system in ("eager", "compile"):
        if system not in a.systems:
            continue
        compiled = system == "compile"
        B = a.batch or largest_fitting(torch_fits(cfg, a, tokens, compiled),
                                       eager_b or 1, a.max_batch)
        if B is None:
            res[system] = {"unavailable": "out of memory at micro-batch 1"}
            continue
        eager_b = eager_b or B
        res[system] = bench_torch(cfg, a, tokens, B, compiled)
        progress(system, res[system])

    fpt = flops_per_token(cfg, a.seq_len)
    total, _ = model_params(cfg, a.seq_len)
    ref = res.get("compile", {}).get("tokens_per_s")
    print("\n%s, torch %s, %s %.0fM params, T=%d, bf16, %d steps (%d warm-up excluded)"
          % (name, torch.__version__, "LLaMA" if is_llama(cfg) else "GPT-2", total / 1e6,
             a.seq_len, a.steps, a.warmup))
    print("MFU: tokens/s * %.3g FLOP/token (6N + 12LTd) / %s\n"
          % (fpt, "%.1f TFLOP/s" % peak if peak else "unknown peak (pass --peak-tflops)"))
    print("| system | micro-batch | tokens/s | MFU | vs torch.compile |")
    print("| --- | ---: | ---: | ---: | ---: |")
    labels = {"dsc": "dsc", "eager": "PyTorch eager", "compile": "torch.compile"}
    for system in ("dsc", "eager", "compile"):
        r = res.get(system)
        if r is None:
            continue
        if "unavailable" in r:
            print("| %s | - | unavailable: %s | - | - |" % (labels[system], r["unavailable"]))
            continue
        tps = r["tokens_per_s"]
        r["mfu"] = tps * fpt / (peak * 1e12) if peak else None
        print("| %s | %d | %s | %s | %s |" % (
            labels[system], r["micro_batch"], "{:,.0f}".format(tps),
            "%.1f%%" % (100 * r["mfu"]) if peak else "-",
            "%.2fx" % (tps / ref) if ref else "-"))
    for system, r in res.items():
        if "losses" in r:
            print("\n%s losses: %s" % (labels[system], " ".join(
                "%.3f" % x if isinstance(x, (int, float)) else str(x)
                for x in r["losses"])))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": name, "torch": torch.__version__, "peak_tflops": peak,
                       "flops_per_token": fpt, "seq_len": a.seq_len, "steps": a.steps,
                       "warmup": a.warmup, "results": res}, f, indent=1)
    if "dsc" in res:
        problem = dsc_problem(res["dsc"])
        if problem:
            sys.exit("FAIL: dsc: " + problem)


def dsc_problem(r):
    """Why dsc's result is not a measurement of training, or None: it did
    not run (a benchmark without dsc measured nothing), a loss is not
    finite (null in its log), or the loss did not fall over the steps."""
    if "unavailable" in r:
        return r["unavailable"]
    losses = r["losses"]
    if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in losses):
        return "a loss is not finite: %s" % losses
    if len(losses) > 1 and not losses[-1] < losses[0]:
        return "the loss did not fall (%.4f -> %.4f)" % (losses[0], losses[-1])
    return None


if __name__ == "__main__":
    main()
