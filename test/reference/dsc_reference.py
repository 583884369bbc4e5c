"""Independent PyTorch references for dsc's numerical tests.

Everything here is written from the public descriptions of the formats and
algorithms (safetensors, llm.c token files, Hugging Face GPT2LMHeadModel,
BertForMaskedLM and LlamaForCausalLM (with its Mistral and Qwen2 variants),
torch.optim, DeepSpeed's lr_schedules.py and FusedLamb,
Random123's Philox4x32-10), never from dsc's C++, so the tests check dsc
against an outside oracle.

Run under Debian's interpreter (/usr/bin/python3): python3-torch imports only
there. Only torch and numpy are needed.
"""

import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

from safetensors_file import load_safetensors, save_safetensors  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "configs")

# ---------------------------------------------------------------------------
# llm.c token files: 256 int32 header (magic 20240520, version 1, count),
# then uint16 tokens.
# ---------------------------------------------------------------------------

LLMC_MAGIC = 20240520


def write_tokens(path, tokens):
    tokens = np.asarray(tokens)
    if tokens.min() < 0 or tokens.max() > 0xFFFF:
        raise ValueError("tokens must fit in uint16")
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = LLMC_MAGIC, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype("<u2").tobytes())


def read_tokens(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype="<i4")
        assert header[0] == LLMC_MAGIC and header[1] == 1, path
        toks = np.frombuffer(f.read(), dtype="<u2")
    assert len(toks) == header[2], path
    return toks.astype(np.int64)


def random_tokens(n, vocab, seed=0):
    return np.random.RandomState(seed).randint(0, vocab, size=n)


def batch_at(tokens, step, micro, B, T, A):
    """llm.c-style batching (no shuffle): the step's global batch is the
    A*B*T consecutive tokens at (step*A*B*T) mod (N - A*B*T - 1); micro-batch
    m is its rows [m*B, (m+1)*B) (TokenFile::batch in lib/Runtime/IO.cpp)."""
    N = len(tokens)
    G = A * B * T
    start = (step * G) % (N - G - 1) + micro * B * T
    chunk = tokens[start:start + B * T + 1]
    x = torch.from_numpy(chunk[:-1].reshape(B, T).copy())
    y = torch.from_numpy(chunk[1:].reshape(B, T).copy())
    return x, y


def pad_batch(tokens, pad, B, T):
    """Pads the rows of step 0's micro-batch 0 (tokens[b*T:(b+1)*T], see
    batch_at) in place: row 0 on the left, row 1 on the right, row 2 (if
    any) in the middle. Other tokens equal to `pad` become pad + 1."""
    tokens[tokens == pad] = pad + 1
    n = max(2, T // 4)
    spans = [(0, n), (T - n, T), (T // 2 - n // 2, T // 2 + (n + 1) // 2)]
    for b, (lo, hi) in enumerate(spans[:B]):
        tokens[b * T + lo:b * T + hi] = pad


# ---------------------------------------------------------------------------
# Model configs (Hugging Face config.json keys and defaults)
# ---------------------------------------------------------------------------

def load_json(path):
    with open(path) as f:
        return json.load(f)


def model_type(cfg):
    return cfg["model_type"]


def _act(name):
    # transformers.activations: "gelu" = exact erf GELU, "gelu_new" and
    # "gelu_pytorch_tanh" = tanh approximation.
    if name == "gelu":
        return lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return lambda x: 0.5 * x * (1.0 + torch.tanh(
            math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    raise ValueError(f"unsupported activation {name!r}")


def _ln(x, P, prefix, eps):
    return F.layer_norm(x, (x.shape[-1],), P[prefix + ".weight"],
                        P[prefix + ".bias"], eps)


# ---------------------------------------------------------------------------
# GPT2LMHeadModel (modeling_gpt2.py), functional over a {HF name: tensor} dict
# ---------------------------------------------------------------------------

def block_mask(layout, T):
    """The [heads, T, T] element mask (True: attended) of a block-sparse
    layout, heads x blocks x blocks 0/1 as `dsc-run layout` prints it."""
    L = torch.tensor(layout, dtype=torch.bool)
    b = T // L.shape[-1]
    return L.repeat_interleave(b, dim=1).repeat_interleave(b, dim=2)


def masked_softmax(s, mask):
    """softmax over the last dim of the scores where `mask` (bool,
    broadcastable to s) is True: masked probabilities are 0, and a row with
    no key left is all 0 (dsc's convention for a query that sees only
    padding; Hugging Face's rows of finfo.min give it uniform weights, which
    nothing downstream of a padding query can tell apart)."""
    mask = mask.expand(s.shape)
    dead = ~mask.any(-1, keepdim=True)
    s = s.masked_fill(~mask, float("-inf")).masked_fill(dead, 0.0)
    return torch.softmax(s, dim=-1).masked_fill(~mask, 0.0)


def gpt2_forward(P, cfg, ids, targets=None, attn_mask=None):
    """Returns (logits [B,T,V], loss).

    dsc's batches already hold next-token targets (llm.c convention), so the
    loss is CrossEntropy(logits, targets) over all positions; this equals HF's
    GPT2LMHeadModel(labels=...) which does the shift itself."""
    C = cfg["n_embd"]
    H = cfg["n_head"]
    D = C // H
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    act = _act(cfg.get("activation_function", "gelu_new"))
    B, T = ids.shape
    p = "transformer."
    h = P[p + "wte.weight"][ids] + P[p + "wpe.weight"][torch.arange(T)]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    if attn_mask is not None:
        causal = causal & attn_mask
    for l in range(cfg["n_layer"]):
        lp = f"{p}h.{l}."
        a = _ln(h, P, lp + "ln_1", eps)
        # Conv1D: y = x @ W + b with W [in, out]
        qkv = a @ P[lp + "attn.c_attn.weight"] + P[lp + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=2)
        heads = lambda t: t.view(B, T, H, D).permute(0, 2, 1, 3)
        q, k, v = heads(q), heads(k), heads(v)
        w = q @ k.transpose(-1, -2)
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype)
        w = masked_softmax(w, causal)
        o = (w @ v).permute(0, 2, 1, 3).contiguous().view(B, T, C)
        o = o @ P[lp + "attn.c_proj.weight"] + P[lp + "attn.c_proj.bias"]
        h = h + o
        m = _ln(h, P, lp + "ln_2", eps)
        m = act(m @ P[lp + "mlp.c_fc.weight"] + P[lp + "mlp.c_fc.bias"])
        m = m @ P[lp + "mlp.c_proj.weight"] + P[lp + "mlp.c_proj.bias"]
        h = h + m
    h = _ln(h, P, p + "ln_f", eps)
    logits = h @ P[p + "wte.weight"].t()  # tied lm_head, no bias
    loss = None
    if targets is not None:
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)),
                               targets.reshape(-1), ignore_index=-100)
    return logits, loss


# ---------------------------------------------------------------------------
# BertForMaskedLM (modeling_bert.py)
# ---------------------------------------------------------------------------

def bert_forward(P, cfg, ids, labels=None, attn_mask=None):
    """ids: the already-masked inputs; labels: -100 where not predicted.

    NOTE: dsc does not implement padding_idx (HF's word_embeddings has
    padding_idx=pad_token_id=0, which only zeroes row 0's *gradient*); dsc
    treats row 0 as an ordinary row, so this reference uses a plain gather
    (no padding_idx) as well. No attention mask: every position is real
    (HF's extended mask is then all zeros)."""
    C = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    D = C // H
    eps = cfg.get("layer_norm_eps", 1e-12)
    act = _act(cfg.get("hidden_act", "gelu"))
    B, T = ids.shape
    lin = lambda x, pre: F.linear(x, P[pre + ".weight"], P[pre + ".bias"])
    e = "bert.embeddings."
    tt = torch.zeros(B, T, dtype=torch.long)  # token_type_ids all zero
    h = (P[e + "word_embeddings.weight"][ids]
         + P[e + "token_type_embeddings.weight"][tt]
         + P[e + "position_embeddings.weight"][torch.arange(T)])
    h = _ln(h, P, e + "LayerNorm", eps)
    heads = lambda t: t.view(B, T, H, D).permute(0, 2, 1, 3)
    for l in range(cfg["num_hidden_layers"]):
        lp = f"bert.encoder.layer.{l}."
        sp = lp + "attention.self."
        q, k, v = (heads(lin(h, sp + n)) for n in ("query", "key", "value"))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
        pr = (torch.softmax(s, dim=-1) if attn_mask is None
              else masked_softmax(s, attn_mask))
        o = (pr @ v).permute(0, 2, 1, 3).contiguous().view(B, T, C)
        a = _ln(lin(o, lp + "attention.output.dense") + h, P,
                lp + "attention.output.LayerNorm", eps)
        f = act(lin(a, lp + "intermediate.dense"))
        h = _ln(lin(f, lp + "output.dense") + a, P, lp + "output.LayerNorm", eps)
    c = "cls.predictions."
    x = _ln(act(lin(h, c + "transform.dense")), P, c + "transform.LayerNorm", eps)
    logits = F.linear(x, P[e + "word_embeddings.weight"], P[c + "bias"])
    loss = None
    if labels is not None:
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)),
                               labels.reshape(-1), ignore_index=-100)
    return logits, loss


# ---------------------------------------------------------------------------
# LlamaForCausalLM (modeling_llama.py) and the same decoder as Hugging Face
# builds it for MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
# GemmaForCausalLM and MixtralForCausalLM
# ---------------------------------------------------------------------------

LLAMA_FAMILY = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2",
                "mixtral", "qwen2_moe", "qwen3_moe")


def gemma_like(cfg):
    """Gemma and Gemma 2: embeddings scaled by sqrt(hidden_size), RMSNorm
    by (1 + weight), a GELU-gated MLP, head_dim 256 and a tied head by
    default."""
    return model_type(cfg) in ("gemma", "gemma2")


def llama_dims(cfg):
    """(hidden, heads, kv_heads, head_dim, intermediate) with the configs'
    defaults: num_key_value_heads absent or null means plain multi-head
    attention (= num_attention_heads); head_dim absent or null means
    hidden_size // num_attention_heads. head_dim may differ from that
    quotient, so q_proj has heads*head_dim outputs, not hidden_size."""
    C = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    D = cfg.get("head_dim") or C // H
    if gemma_like(cfg):  # GemmaConfig: head_dim 256 by default
        D = cfg.get("head_dim", 256)
    if model_type(cfg) == "qwen3":  # Qwen3Config: head_dim 128 by default
        D = cfg.get("head_dim", 128) or C // H
    if H % KV:
        raise ValueError(f"num_attention_heads {H} is not a multiple of "
                         f"num_key_value_heads {KV}")
    return C, H, KV, D, cfg["intermediate_size"]


def llama_biases(cfg):
    """(q/k/v bias, o_proj bias, MLP bias) as each model class builds its
    nn.Linear layers: LLaMA reads attention_bias (all four projections) and
    mlp_bias; Qwen2 always has q/k/v biases and never an o_proj or MLP bias;
    Qwen3 and Gemma read attention_bias (all four projections) and have no
    MLP bias; Mistral has no bias anywhere (its config has neither key)."""
    mt = model_type(cfg)
    if mt in ("qwen2", "qwen2_moe"):
        return True, False, False
    if mt in ("mistral", "mixtral"):
        return False, False, False
    ab = bool(cfg.get("attention_bias", False))
    if mt in ("gemma", "gemma2", "qwen3", "qwen3_moe"):  # attention_bias on all four
        return ab, ab, False
    return ab, ab, bool(cfg.get("mlp_bias", False))


def llama_tied(cfg):
    """LlamaConfig, MistralConfig and Qwen2Config all default
    tie_word_embeddings to false (GPT-2, BERT and Gemma default to true)."""
    return bool(cfg.get("tie_word_embeddings", gemma_like(cfg)))


def llama_param_shapes(cfg):
    """{HF parameter name: shape}, in the modules' order, exactly the
    parameters (no tied alias: a tied model has no lm_head.weight, as in the
    safetensors files save_pretrained writes). Weights in nn.Linear layout
    [out, in]."""
    C, H, KV, D, I = llama_dims(cfg)
    V = cfg["vocab_size"]
    qkv_b, o_b, mlp_b = llama_biases(cfg)
    s = {"model.embed_tokens.weight": (V, C)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        for n, out, inp, b in (("self_attn.q_proj", H * D, C, qkv_b),
                               ("self_attn.k_proj", KV * D, C, qkv_b),
                               ("self_attn.v_proj", KV * D, C, qkv_b),
                               ("self_attn.o_proj", C, H * D, o_b)):
            s[p + n + ".weight"] = (out, inp)
            if b:
                s[p + n + ".bias"] = (out,)
        if qk_norm(cfg):  # Qwen3Attention: q_norm, k_norm over head_dim
            s[p + "self_attn.q_norm.weight"] = (D,)
            s[p + "self_attn.k_norm.weight"] = (D,)
        sparse = is_moe_layer(cfg, l)
        for n, out, inp in (() if sparse else (
                ("mlp.gate_proj", I, C), ("mlp.up_proj", I, C),
                ("mlp.down_proj", C, I))):
            s[p + n + ".weight"] = (out, inp)
            if mlp_b:
                s[p + n + ".bias"] = (out,)
        if sparse and model_type(cfg) == "mixtral":
            # MixtralSparseMoeBlock: router, then experts
            E = moe_experts(cfg)
            s[p + "block_sparse_moe.gate.weight"] = (E, C)
            for e in range(E):
                q = f"{p}block_sparse_moe.experts.{e}."
                s[q + "w1.weight"] = (I, C)
                s[q + "w2.weight"] = (C, I)
                s[q + "w3.weight"] = (I, C)
        elif sparse:
            # Qwen2MoeSparseMoeBlock: router, experts, shared expert, its
            # gate; Qwen3MoeSparseMoeBlock: router, experts
            qwen2 = model_type(cfg) == "qwen2_moe"
            E = moe_experts(cfg)
            F = cfg.get("moe_intermediate_size", 1408 if qwen2 else 768)
            S = cfg.get("shared_expert_intermediate_size", 5632)
            s[p + "mlp.gate.weight"] = (E, C)
            for q, f in [(f"{p}mlp.experts.{e}.", F) for e in range(E)] + \
                    ([(f"{p}mlp.shared_expert.", S)] if qwen2 else []):
                s[q + "gate_proj.weight"] = (f, C)
                s[q + "up_proj.weight"] = (f, C)
                s[q + "down_proj.weight"] = (C, f)
            if qwen2:
                s[p + "mlp.shared_expert_gate.weight"] = (1, C)
        s[p + "input_layernorm.weight"] = (C,)
        s[p + "post_attention_layernorm.weight"] = (C,)
        if model_type(cfg) == "gemma2":  # Gemma2DecoderLayer's sandwich
            s[p + "pre_feedforward_layernorm.weight"] = (C,)
            s[p + "post_feedforward_layernorm.weight"] = (C,)
    s["model.norm.weight"] = (C,)
    if not llama_tied(cfg):
        s["lm_head.weight"] = (V, C)
    return s


def qk_norm(cfg):
    """Qwen3 and Qwen3-MoE RMS-normalise each query and key head (q_norm,
    k_norm)."""
    return model_type(cfg) in ("qwen3", "qwen3_moe")


def moe_experts(cfg):
    """Experts per sparse layer: Mixtral's num_local_experts (default 8),
    Qwen2-MoE's num_experts (default 60), or 0 for the dense models."""
    if model_type(cfg) == "mixtral":
        return cfg.get("num_local_experts", 8)
    if model_type(cfg) == "qwen2_moe":
        return cfg.get("num_experts", 60)
    if model_type(cfg) == "qwen3_moe":
        return cfg.get("num_experts", 128)
    return 0


def moe_top_k(cfg):
    """num_experts_per_tok: Mixtral's default 2, Qwen2-MoE's 4, Qwen3-MoE's 8."""
    return cfg.get("num_experts_per_tok", {"qwen2_moe": 4, "qwen3_moe": 8}.get(
        model_type(cfg), 2))


def is_moe_layer(cfg, l):
    """Qwen2MoeDecoderLayer: layer l is sparse unless it is listed in
    mlp_only_layers or (l + 1) is not a multiple of decoder_sparse_step;
    every Mixtral layer is sparse."""
    if not moe_experts(cfg):
        return False
    if model_type(cfg) == "mixtral":
        return True
    return l not in (cfg.get("mlp_only_layers") or []) and \
        (l + 1) % cfg.get("decoder_sparse_step", 1) == 0


def moe_capacity(ds, cfg, tokens):
    """Each expert's capacity per micro-batch of `tokens` tokens under the
    ds_config's moe section with drop_tokens (DeepSpeed-MoE's
    max(ceil(K * tokens * capacity_factor / E), min_capacity), at most
    every token), or None without token dropping."""
    moe = ds.get("moe", {})
    if not moe.get("drop_tokens", False):
        return None
    E, K = moe_experts(cfg), moe_top_k(cfg)
    cap = math.ceil(K * tokens * moe.get("capacity_factor", 1.0) / E)
    return min(tokens, max(cap, moe.get("min_capacity", 4)))


def moe_block(P, cfg, p, x, capacity=None):
    """MixtralSparseMoeBlock and Qwen2MoeSparseMoeBlock on x [B, T, C]
    (parameters under prefix p): router logits, softmax (float64 here), the
    top num_experts_per_tok experts, renormalised to sum to 1 (Mixtral
    always, Qwen2-MoE with norm_topk_prob), and the weighted sum of those
    experts' SwiGLU MLPs down(silu(gate x) * up x) (Mixtral's w2, w1, w3);
    Qwen2-MoE adds its shared expert's MLP times
    sigmoid(shared_expert_gate x). Written per token and expert choice, not
    as transformers' index_add. With `capacity` (token dropping) an expert
    takes at most that many assignments, all tokens' first choices before
    any second choice, each choice rank in token order; a dropped
    assignment contributes nothing (the kept weights are not renormalised
    again). Returns (y, router logits [B*T, E])."""
    if cfg.get("router_jitter_noise", 0.0):
        raise NotImplementedError("router_jitter_noise")
    mixtral = model_type(cfg) == "mixtral"
    gate_n, up_n, down_n = (("w1", "w3", "w2") if mixtral else
                            ("gate_proj", "up_proj", "down_proj"))
    B, T, C = x.shape
    K = moe_top_k(cfg)
    xs = x.reshape(B * T, C)
    logits = F.linear(xs, P[p + "gate.weight"])
    probs = torch.softmax(logits, dim=-1)
    top, chosen = torch.topk(probs, K, dim=-1)
    weights = top
    if mixtral or cfg.get("norm_topk_prob", False):
        weights = top / top.sum(-1, keepdim=True)
    if capacity is not None:
        taken = [0] * moe_experts(cfg)
        keep = torch.ones_like(weights)
        for k in range(K):
            for n in range(B * T):
                e = int(chosen[n, k])
                if taken[e] >= capacity:
                    keep[n, k] = 0
                else:
                    taken[e] += 1
        weights = weights * keep
    y = torch.zeros_like(xs)
    for e in range(moe_experts(cfg)):
        q = f"{p}experts.{e}."
        tok, slot = torch.nonzero(chosen == e, as_tuple=True)
        if tok.numel() == 0:
            continue
        h = F.silu(F.linear(xs[tok], P[q + gate_n + ".weight"])) * \
            F.linear(xs[tok], P[q + up_n + ".weight"])
        out = F.linear(h, P[q + down_n + ".weight"]) * weights[tok, slot, None]
        y = y.index_put((tok,), out, accumulate=True)
    if model_type(cfg) == "qwen2_moe":  # the shared expert, gated per token
        q = p + "shared_expert."
        h = F.silu(F.linear(xs, P[q + "gate_proj.weight"])) * \
            F.linear(xs, P[q + "up_proj.weight"])
        gate = torch.sigmoid(F.linear(xs, P[p + "shared_expert_gate.weight"]))
        y = y + gate * F.linear(h, P[q + "down_proj.weight"])
    return y.reshape(B, T, C), logits


def load_balancing_loss(router_logits, cfg):
    """transformers' load_balancing_loss_func without an attention mask,
    over the router logits [N, E] of every layer: E * sum over experts of
    (the fraction of all top-k assignments that chose it) * (its softmax
    probability averaged over all layers' tokens)."""
    E, K = moe_experts(cfg), moe_top_k(cfg)
    logits = torch.cat(router_logits, dim=0)
    probs = torch.softmax(logits, dim=-1)
    chosen = torch.topk(probs, K, dim=-1).indices
    per_choice = F.one_hot(chosen, E).to(probs.dtype).mean(0)  # [K, E]
    return E * (per_choice * probs.mean(0)[None, :]).sum()


def rope_type(cfg):
    """The rope_scaling kind; "type" is the older spelling of "rope_type"."""
    rs = cfg.get("rope_scaling")
    if not rs:
        return "default"
    return rs.get("rope_type", rs.get("type", "default"))


def rope_inv_freq(cfg, dtype=torch.float64, dim=None):
    """Rotary inverse frequencies [head_dim/2]:
    inv_freq[j] = 1 / rope_theta^(2j/head_dim), then rope_scaling:
      linear: inv_freq / factor (the same as dividing positions by factor);
      llama3 (Llama 3.1): with L = original_max_position_embeddings and
        wavelength w = 2 pi / inv_freq, frequencies with w < L /
        high_freq_factor are kept, those with w > L / low_freq_factor are
        divided by factor, and in between
        s = (L / w - low_freq_factor) / (high_freq_factor - low_freq_factor)
        blends them: (1 - s) inv_freq / factor + s inv_freq.
    dtype: float64 for the reference; float32 reproduces transformers, which
    computes its rotary tables in float32 whatever the model's dtype."""
    D = dim or llama_dims(cfg)[3]
    if dim is None and cfg.get("partial_rotary_factor", 1.0) != 1.0:
        raise NotImplementedError("partial_rotary_factor")
    theta = float(cfg.get("rope_theta",
                          1e6 if model_type(cfg) == "mixtral" else 10000.0))
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=dtype) / D))
    kind = rope_type(cfg)
    rs = cfg.get("rope_scaling") or {}
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / rs["factor"]
    if kind == "llama3":
        factor = rs["factor"]
        lo, hi = rs["low_freq_factor"], rs["high_freq_factor"]
        L = rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        s = (L / wavelen - lo) / (hi - lo)
        blend = (1 - s) * inv / factor + s * inv
        return torch.where(wavelen < L / hi, inv,
                           torch.where(wavelen > L / lo, inv / factor, blend))
    raise NotImplementedError(f"rope_scaling type {kind!r}")


def rope_cos_sin(cfg, T, dtype=torch.float64, dim=None):
    """cos, sin [T, dim] (dim: head_dim unless given) for positions 0..T-1
    in HF's half layout: frequency j turns the pair of dimensions
    (j, j + dim/2)."""
    inv = rope_inv_freq(cfg, dtype, dim)
    ang = torch.arange(T, dtype=dtype)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) over the two halves of the last dimension."""
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def apply_rope(x, cos, sin):
    """x [..., T, head_dim]; cos, sin [T, head_dim]."""
    return x * cos + rotate_half(x) * sin


def rms_norm(x, w, eps):
    """LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * w, eps inside the root."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def gemma_mlp_act(cfg):
    """GemmaMLP's activation: hidden_activation; null (the default) means
    gelu_pytorch_tanh, and hidden_act is not read."""
    return _act(cfg.get("hidden_activation") or "gelu_pytorch_tanh")


def llama_init(cfg, seed=0):
    """{name: float32 numpy array} initialised like HF's _init_weights:
    matrices normal(0, initializer_range), biases zero, RMSNorm gammas one
    (for tests that have no dsc-run to ask for initial weights)."""
    rs = np.random.RandomState(seed)
    std = cfg.get("initializer_range", 0.02)
    out = {}
    for k, shape in llama_param_shapes(cfg).items():
        if len(shape) == 2:
            out[k] = (std * rs.randn(*shape)).astype(np.float32)
        elif k.endswith("norm.weight"):  # Gemma's scale is 1 + weight
            out[k] = (np.zeros if gemma_like(cfg) else np.ones)(
                shape, dtype=np.float32)
        else:
            out[k] = np.zeros(shape, dtype=np.float32)
    return out


def _check_llama_params(P, cfg):
    want = llama_param_shapes(cfg)
    missing = [k for k in want if k not in P]
    extra = [k for k in P if k not in want]
    if missing or extra:
        hint = (" (tie_word_embeddings is true: the head is embed_tokens, "
                "no lm_head.weight)" if "lm_head.weight" in extra else "")
        raise ValueError(f"{model_type(cfg)} parameters: missing {missing}, "
                         f"unexpected {extra}{hint}")
    for k, s in want.items():
        if tuple(P[k].shape) != s:
            raise ValueError(f"{k}: shape {tuple(P[k].shape)}, expected {s}")


def llama_forward(P, cfg, ids, targets=None, rope_dtype=torch.float64,
                  attn_mask=None):
    """LlamaForCausalLM (and MistralForCausalLM, Qwen2ForCausalLM,
    Qwen3ForCausalLM, GemmaForCausalLM, MixtralForCausalLM) with no cache,
    no padding, positions 0..T-1. Returns (logits [B,T,V], loss). Qwen3
    RMS-normalises every query and key head over its head_dim features
    (weights q_norm, k_norm; rms_norm_eps) before the rotation, as
    Qwen3Attention does. Gemma multiplies the
    embeddings by sqrt(hidden_size), scales its RMSNorms by (1 + weight) and
    gates its MLP through GELU (hidden_activation; null: the tanh
    approximation). Mixtral replaces each MLP by a sparse MoE block
    (moe_block); with output_router_logits its loss adds
    router_aux_loss_coef * load_balancing_loss.

    Per layer: h += o_proj(attn(rope(q_proj(n)), rope(k_proj(n)),
    v_proj(n))) with n = RMSNorm(h); h += down_proj(silu(gate_proj(m)) *
    up_proj(m)) with m = RMSNorm(h). Grouped-query attention: query head i
    reads key/value head i // (heads / kv_heads). Causal softmax of
    q.k / sqrt(head_dim). Then the final RMSNorm and lm_head (embed_tokens
    when tied), no bias.

    dsc's batches already hold next-token targets (llm.c convention), so the
    loss is CrossEntropy(logits, targets) over all positions, no shift; HF's
    labels=... shifts instead (the same with targets = ids shifted left).
    rope_dtype: where cos/sin are computed (float64 here; float32 to mirror
    transformers exactly, see rope_inv_freq)."""
    if cfg.get("attention_dropout", 0.0):
        raise ValueError("attention_dropout must be 0 for the reference")
    gemma = gemma_like(cfg)
    gemma2 = model_type(cfg) == "gemma2"
    if gemma:
        # GemmaForCausalLM: embeddings times sqrt(hidden_size), RMSNorm
        # scaled by (1 + weight), MLP gate through GELU.
        act_fn = gemma_mlp_act(cfg)
        norm = lambda x, w, e: rms_norm(x, 1.0 + w, e)  # noqa: E731
        if cfg.get("rope_scaling"):
            raise NotImplementedError("rope_scaling for gemma")
    else:
        act = cfg.get("hidden_act", "silu")
        if act not in ("silu", "swish"):
            raise NotImplementedError(f"hidden_act {act!r}")
        act_fn, norm = F.silu, rms_norm
    _check_llama_params(P, cfg)
    C, H, KV, D, _ = llama_dims(cfg)
    V = cfg["vocab_size"]
    eps = cfg.get("rms_norm_eps", 1e-5 if model_type(cfg) == "mixtral" else 1e-6)
    B, T = ids.shape
    window = cfg.get("sliding_window", 4096 if gemma2 else None)
    if model_type(cfg) in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe") and \
            not cfg.get("use_sliding_window", False):
        window = None
    if window is not None and T > window:
        raise NotImplementedError(f"sliding_window {window} < seq_len {T}")

    h = P["model.embed_tokens.weight"][ids]
    if gemma:
        h = h * math.sqrt(C)
    cos, sin = (t.to(h.dtype) for t in rope_cos_sin(cfg, T, rope_dtype))
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    if attn_mask is not None:
        causal = causal & attn_mask
    lin = lambda x, n: F.linear(x, P[n + ".weight"], P.get(n + ".bias"))  # noqa: E731
    router_logits = []
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        n = norm(h, P[p + "input_layernorm.weight"], eps)
        q = lin(n, p + "self_attn.q_proj").view(B, T, H, D)
        k = lin(n, p + "self_attn.k_proj").view(B, T, KV, D)
        if qk_norm(cfg):
            q = rms_norm(q, P[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, P[p + "self_attn.k_norm.weight"], eps)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = lin(n, p + "self_attn.v_proj").view(B, T, KV, D).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        if gemma2:
            # Gemma2Attention: q.k * query_pre_attn_scalar^-1/2, then
            # soft-capped: cap * tanh(s / cap) (attn_logit_softcapping).
            s = (q @ k.transpose(-1, -2)) * cfg.get("query_pre_attn_scalar", 224) ** -0.5
            cap = cfg.get("attn_logit_softcapping", 50.0)
            if cap is not None:
                s = torch.tanh(s / cap) * cap
        else:
            s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
        o = (masked_softmax(s, causal) @ v).transpose(1, 2).reshape(B, T, H * D)
        o = lin(o, p + "self_attn.o_proj")
        if gemma2:  # the sandwich: outputs normalised before the residual
            o = norm(o, P[p + "post_attention_layernorm.weight"], eps)
        h = h + o
        m = norm(h, P[p + ("pre_feedforward_layernorm.weight" if gemma2
                           else "post_attention_layernorm.weight")], eps)
        if is_moe_layer(cfg, l):
            block = "block_sparse_moe." if model_type(cfg) == "mixtral" \
                else "mlp."
            m, router = moe_block(P, cfg, p + block, m,
                                  cfg.get("_dsc_moe_capacity"))
            router_logits.append(router)
            h = h + m
            continue
        m = act_fn(lin(m, p + "mlp.gate_proj")) * lin(m, p + "mlp.up_proj")
        m = lin(m, p + "mlp.down_proj")
        if gemma2:
            m = norm(m, P[p + "post_feedforward_layernorm.weight"], eps)
        h = h + m
    h = norm(h, P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight"] if llama_tied(cfg) else P["lm_head.weight"]
    logits = F.linear(h, head)
    if gemma2 and cfg.get("final_logit_softcapping", 30.0) is not None:
        cap = cfg.get("final_logit_softcapping", 30.0)
        logits = torch.tanh(logits / cap) * cap
    loss = None
    if targets is not None:
        loss = F.cross_entropy(logits.view(-1, V), targets.reshape(-1),
                               ignore_index=-100)
        # MixtralForCausalLM and Qwen2MoeForCausalLM with
        # output_router_logits: the training objective adds the
        # load-balancing loss (over the sparse layers).
        if router_logits and cfg.get("output_router_logits", False):
            loss = loss + cfg.get("router_aux_loss_coef", 0.001) * \
                load_balancing_loss(router_logits, cfg)
    return logits, loss


# ---------------------------------------------------------------------------
# PhiForCausalLM (modeling_phi.py)
# ---------------------------------------------------------------------------

def phi_dims(cfg):
    """(hidden, heads, kv heads, head_dim, rotary dims) with PhiConfig's
    defaults; the rotary embedding turns the first int(head_dim *
    partial_rotary_factor) dimensions of each head."""
    C = cfg.get("hidden_size", 2048)
    H = cfg.get("num_attention_heads", 32)
    KV = cfg.get("num_key_value_heads") or H
    D = C // H
    return C, H, KV, D, int(D * cfg.get("partial_rotary_factor", 0.5))


def phi_forward(P, cfg, ids, targets=None, rope_dtype=torch.float64,
                attn_mask=None):
    """PhiForCausalLM with no cache, positions 0..T-1, no dropout. Returns
    (logits [B,T,V], loss).

    Per layer (a parallel block): n = LayerNorm(h) (input_layernorm, with
    bias); q, k, v = q_proj(n), k_proj(n), v_proj(n) (all with biases),
    split into heads; the first R = rotary dims of every query and key head
    are rotated (the rotary frequencies computed over R dimensions), the
    rest pass; causal softmax of q.k / sqrt(head_dim); grouped-query heads
    as LLaMA's; h = dense(attention) + fc2(act(fc1(n))) + h, the attention
    and the MLP both reading n. Then final_layernorm and lm_head with its
    bias (the weight tied to embed_tokens with tie_word_embeddings)."""
    for k in ("attention_dropout", "resid_pdrop", "embd_pdrop"):
        if cfg.get(k, 0.0):
            raise ValueError(f"{k} must be 0 for the reference")
    C, H, KV, D, R = phi_dims(cfg)
    V = cfg.get("vocab_size", 51200)
    eps = cfg.get("layer_norm_eps", 1e-5)
    act = _act(cfg.get("hidden_act", "gelu_new"))
    B, T = ids.shape
    h = P["model.embed_tokens.weight"][ids]
    cos, sin = (t.to(h.dtype) for t in rope_cos_sin(cfg, T, rope_dtype, dim=R))
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    if attn_mask is not None:
        causal = causal & attn_mask
    lin = lambda x, n: F.linear(x, P[n + ".weight"], P[n + ".bias"])  # noqa: E731

    def turn(x):
        return torch.cat([apply_rope(x[..., :R], cos, sin), x[..., R:]], dim=-1)

    for l in range(cfg.get("num_hidden_layers", 24)):
        p = f"model.layers.{l}."
        n = _ln(h, P, p + "input_layernorm", eps)
        q = lin(n, p + "self_attn.q_proj").view(B, T, H, D).transpose(1, 2)
        k = lin(n, p + "self_attn.k_proj").view(B, T, KV, D).transpose(1, 2)
        v = lin(n, p + "self_attn.v_proj").view(B, T, KV, D).transpose(1, 2)
        q, k = turn(q), turn(k)
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
        o = (masked_softmax(s, causal) @ v).transpose(1, 2).reshape(B, T, H * D)
        a = lin(o, p + "self_attn.dense")
        m = lin(act(lin(n, p + "mlp.fc1")), p + "mlp.fc2")
        h = a + m + h
    h = _ln(h, P, "model.final_layernorm", eps)
    head = (P["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False)
            else P["lm_head.weight"])
    logits = F.linear(h, head, P["lm_head.bias"])
    loss = None
    if targets is not None:
        loss = F.cross_entropy(logits.view(-1, V), targets.reshape(-1),
                               ignore_index=-100)
    return logits, loss


def forward(P, cfg, ids, labels, attn_mask=None, key_mask=None):
    """attn_mask: None (dense) or a [heads or 1, T, T] element mask;
    key_mask: None or [B, T] bool, False where the key is padding."""
    if key_mask is not None:
        keys = key_mask[:, None, None, :]
        attn_mask = keys if attn_mask is None else attn_mask[None] & keys
    if model_type(cfg) == "gpt2":
        return gpt2_forward(P, cfg, ids, labels, attn_mask)
    if model_type(cfg) == "bert":
        return bert_forward(P, cfg, ids, labels, attn_mask)
    if model_type(cfg) in LLAMA_FAMILY:
        return llama_forward(P, cfg, ids, labels, attn_mask=attn_mask)
    if model_type(cfg) == "phi":
        return phi_forward(P, cfg, ids, labels, attn_mask=attn_mask)
    raise ValueError(cfg["model_type"])


# ---------------------------------------------------------------------------
# Philox4x32-10 (Salmon et al. 2011; Random123) and BERT 80/10/10 masking
# ---------------------------------------------------------------------------

_M32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(ctr, key):
    """ctr: 4 arrays (or ints) of uint32 counter words; key: (k0, k1).
    Returns 4 uint64 arrays holding the uint32 output words."""
    c = [np.asarray(x, dtype=np.uint64) & _M32 for x in ctr]
    c = np.broadcast_arrays(*c)
    c0, c1, c2, c3 = (x.copy() for x in c)
    k0, k1 = np.uint64(key[0]) & _M32, np.uint64(key[1]) & _M32
    m0, m1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    w0, w1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
    s32 = np.uint64(32)
    for _ in range(10):
        p0 = m0 * c0  # < 2^64: exact in uint64
        p1 = m1 * c2
        c0, c1, c2, c3 = ((p1 >> s32) ^ c1 ^ k0, p1 & _M32,
                          (p0 >> s32) ^ c3 ^ k1, p0 & _M32)
        k0 = (k0 + w0) & _M32
        k1 = (k1 + w1) & _M32
    return c0, c1, c2, c3


def philox_selftest():
    """Random123 known-answer vectors for philox4x32-10."""
    got = [int(x) for x in philox4x32_10([0, 0, 0, 0], (0, 0))]
    want = [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
    if got != want:
        raise AssertionError(f"philox KAT (ctr 0, key 0): got "
                             f"{[hex(x) for x in got]}, want {[hex(x) for x in want]}")
    got = [int(x) for x in philox4x32_10([0xffffffff] * 4, (0xffffffff, 0xffffffff))]
    want = [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
    if got != want:
        raise AssertionError(f"philox KAT (all ones): got {[hex(x) for x in got]}")
    ctr = [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344]
    got = [int(x) for x in philox4x32_10(ctr, (0xa4093822, 0x299f31d0))]
    want = [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
    if got != want:
        raise AssertionError(f"philox KAT (pi): got {[hex(x) for x in got]}")


def _uniform(x):
    # 24 high bits -> float in [0, 1), exact in fp32
    return (x >> np.uint64(8)).astype(np.float32) * np.float32(2.0 ** -24)


def mlm_mask(ids, mask_prob, mask_token, vocab, seed, offset, stream=1,
             pad_token=None):
    """BERT's 80/10/10 corruption drawn from Philox: element i of the
    micro-batch uses counter {i, stream, offset lo, offset hi} under key
    {seed lo, seed hi}; word 0 decides selection (u < p), word 1 the
    80/10/10 branch, word 2 the random token (mod vocab). The padding token
    is never selected."""
    flat = np.asarray(ids, dtype=np.int64).reshape(-1)
    n = flat.size
    i = np.arange(n, dtype=np.uint64)
    o = int(offset)
    r0, r1, r2, _ = philox4x32_10(
        [i, stream, o & 0xFFFFFFFF, o >> 32],
        (seed & 0xFFFFFFFF, seed >> 32))
    sel = _uniform(r0) < np.float32(mask_prob)
    if pad_token is not None:
        sel &= flat != pad_token
    u = _uniform(r1)
    inputs = flat.copy()
    labels = np.full(n, -100, dtype=np.int64)
    labels[sel] = flat[sel]
    mask_tok = sel & (u < np.float32(0.8))
    rand_tok = sel & ~(u < np.float32(0.8)) & (u < np.float32(0.9))
    inputs[mask_tok] = mask_token
    inputs[rand_tok] = (r2[rand_tok] % np.uint64(vocab)).astype(np.int64)
    shape = np.asarray(ids).shape
    return (torch.from_numpy(inputs.reshape(shape)),
            torch.from_numpy(labels.reshape(shape)))


# ---------------------------------------------------------------------------
# Training config helpers
# ---------------------------------------------------------------------------

class TrainCfg:
    """The parts of a ds_config.json the reference needs, with DeepSpeed's
    defaults."""

    def __init__(self, ds):
        self.ds = ds
        self.B = ds["train_micro_batch_size_per_gpu"]
        self.A = ds.get("gradient_accumulation_steps", 1)
        self.clip = ds.get("gradient_clipping", 0.0)
        d = ds.get("dsc", {})
        self.seed = d.get("seed", 42)
        self.T = d["seq_len"]
        self.mlm_probability = d.get("mlm_probability", 0.15)
        self.mask_token_id = d.get("mask_token_id", 103)
        self.pad_token_id = d.get("pad_token_id")
        self.opt = ds["optimizer"]
        self.sched = ds.get("scheduler")


def micro_batch(tokens, tc, mcfg, step, micro):
    """(model inputs, labels) for one micro-batch, as dsc should see them."""
    x, y = batch_at(tokens, step, micro, tc.B, tc.T, tc.A)
    if model_type(mcfg) == "bert":
        return mlm_mask(x.numpy(), tc.mlm_probability, tc.mask_token_id,
                        mcfg["vocab_size"], tc.seed, step * tc.A + micro)
    return x, y


# ---------------------------------------------------------------------------
# DeepSpeed LR schedules (deepspeed/runtime/lr_schedules.py), stateful like
# the originals and driven the way DeepSpeedEngine does: constructed with
# last_batch_iteration=-1 (the constructor applies get_lr() without
# stepping), then optimizer.step() followed by scheduler.step() every step.
# One parameter group's learning rate (dsc has one schedule).
# ---------------------------------------------------------------------------

class _Warmup:
    def __init__(self, warmup_num_steps, warmup_type):
        self.warmup_num_steps = max(2, warmup_num_steps)
        self.warmup_type = warmup_type if warmup_type in ("log", "linear") else "log"
        self.inverse_log_warm_up = 1.0 / math.log(self.warmup_num_steps)
        self.last_batch_iteration = -1

    def _warm(self):
        if self.warmup_type == "log":
            return self.inverse_log_warm_up * math.log(self.last_batch_iteration + 1)
        return self.last_batch_iteration / self.warmup_num_steps

    def step(self):
        self.last_batch_iteration += 1
        self.lr = self.get_lr()


class WarmupLR(_Warmup):
    def __init__(self, warmup_min_lr=0.0, warmup_max_lr=0.001,
                 warmup_num_steps=1000, warmup_type="log"):
        super().__init__(warmup_num_steps, warmup_type)
        self.min_lr, self.delta = warmup_min_lr, warmup_max_lr - warmup_min_lr
        self.lr = self.get_lr()

    def get_lr(self):
        if self.last_batch_iteration < 0:
            return self.min_lr
        return self.min_lr + self.delta * self._gamma()

    def _gamma(self):
        if self.last_batch_iteration < self.warmup_num_steps:
            return self._warm()
        return 1.0


class WarmupDecayLR(WarmupLR):
    def __init__(self, total_num_steps, **kw):
        self.total_num_steps = total_num_steps
        super().__init__(**kw)

    def _gamma(self):
        if self.last_batch_iteration < self.warmup_num_steps:
            return self._warm()
        return max(0.0, float(self.total_num_steps - self.last_batch_iteration)
                   / float(max(1.0, self.total_num_steps - self.warmup_num_steps)))


class WarmupCosineLR(_Warmup):
    def __init__(self, org_lr, total_num_steps, warmup_min_ratio=0.0,
                 warmup_num_steps=1000, cos_min_ratio=0.0001, warmup_type="log"):
        super().__init__(warmup_num_steps, warmup_type)
        self.org_lr, self.total_num_steps = org_lr, total_num_steps
        self.warmup_min_ratio, self.cos_min_ratio = warmup_min_ratio, cos_min_ratio
        self.lr = self.get_lr()

    def get_lr(self):
        if self.last_batch_iteration < 0:
            return 0.0
        if self.last_batch_iteration < self.warmup_num_steps:
            r = self._warm()
            return self.org_lr * (self.warmup_min_ratio + r * (1.0 - self.warmup_min_ratio))
        real_last = self.last_batch_iteration - self.warmup_num_steps + 1
        real_total = self.total_num_steps - self.warmup_num_steps
        r = (1 + math.cos(math.pi * real_last / real_total)) / 2
        return self.org_lr * max(0.0, self.cos_min_ratio + (1.0 - self.cos_min_ratio) * r)


class ConstantLR:
    def __init__(self, lr):
        self.lr = lr

    def step(self):
        pass


def make_scheduler(tc):
    lr = tc.opt.get("params", {}).get("lr", 1e-3)
    s = tc.sched
    if not s:
        return ConstantLR(lr)
    p = dict(s.get("params", {}))
    if s["type"] == "WarmupLR":
        return WarmupLR(**p)
    if s["type"] == "WarmupDecayLR":
        return WarmupDecayLR(**p)
    if s["type"] == "WarmupCosineLR":
        return WarmupCosineLR(lr, **p)
    raise ValueError(s["type"])


# ---------------------------------------------------------------------------
# Optimizers. Adam/AdamW/SGD are torch.optim's own; LAMB is DeepSpeed's
# FusedLamb (csrc/lamb/fused_lamb_cuda_kernel.cu, eps outside the sqrt).
# Weight decay goes to tensors of rank >= 2 only (two param groups).
# ---------------------------------------------------------------------------

def lamb_trust_ratio(p, update, max_coeff, min_coeff):
    """FusedLamb's coefficient: ||p|| / ||update||, `> max -> max` then
    `< min -> min`; 1 when either norm is 0."""
    wn, un = p.norm().item(), update.norm().item()
    if wn == 0 or un == 0:
        return 1.0
    coeff = wn / un
    if coeff > max_coeff:
        coeff = max_coeff
    if coeff < min_coeff:
        coeff = min_coeff
    return coeff


def bnb_dynamic_map(signed):
    """bitsandbytes' create_dynamic_map(signed, max_exponent_bits=7,
    total_bits=8), written out from its published construction: for each
    exponent i = 0..6 the midpoints of torch.linspace(0.1, 1, F) in float32
    (F = 2^i + 1 signed, 2^(i+1) + 1 unsigned) times 10^(i-6), their
    negatives when signed, then 0 and 1, sorted. float32 values, returned as
    float64."""
    data = []
    for i in range(7):
        items = 2 ** i + 1 if signed else 2 ** (i + 1) + 1
        b = torch.linspace(0.1, 1, items, dtype=torch.float32)
        means = (b[:-1] + b[1:]) / 2.0
        data += (10.0 ** (i - 6) * means).tolist()
        if signed:
            data += (-(10.0 ** (i - 6)) * means).tolist()
    data += [0.0, 1.0]
    assert len(data) == 256
    return np.array(sorted(data), dtype=np.float64)


def quantize_nearest(code, x, keep_sign):
    """Codes of the values of `code` nearest to x (ties: the lower); with
    keep_sign a code whose sign bit differs from x's moves one towards x
    (bitsandbytes keeps the momentum's sign)."""
    idx = np.clip(np.searchsorted(code, x, side="left"), 0, 255)
    lower = np.maximum(idx - 1, 0)
    take_lower = (idx > 0) & (x - code[lower] <= code[idx] - x)
    idx = np.where(take_lower, lower, idx)
    if keep_sign:
        flip = np.signbit(code[idx]) != np.signbit(x)
        idx = np.where(flip, idx + np.where(x > 0, 1, -1), idx)
    return idx


# bitsandbytes' 4-bit code books: NF4 (the QLoRA paper's NormalFloat
# quantiles, as bitsandbytes lists them) and FP4 (1 sign, 2 exponent, 1
# mantissa bits; code 8 + c is -value(c)).
NF4_CODE = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
    0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
    0.7229568362236023, 1.0])
_FP4_POS = [0.0, 0.0625 / 12, 8 / 12, 1.0, 4 / 12, 6 / 12, 2 / 12, 3 / 12]
FP4_CODE = np.array(_FP4_POS + [-v for v in _FP4_POS])


def bnb_4bit_quantize(w, fmt, block=64, double_quant=False):
    """bitsandbytes' quantize_4bit of `w` (flattened row-major), from its
    published algorithm: per block of `block` elements the absmax, each
    element the code of the value nearest to w / absmax (computed as
    w * (1 / absmax) in float32, as its kernel does); with double
    quantization the absmaxes less their mean are stored as the nearest
    signed dynamic-map codes of blocks of 256, each block with its own
    absmax. Returns the codes (one per element), the stored absmaxes
    (float32, or uint8 codes with `nested_absmax` and `offset`) and the
    float32 values dequantize_4bit gives back (`values`, shaped like w)."""
    code = (NF4_CODE if fmt == "nf4" else FP4_CODE).astype(np.float32)
    flat = np.asarray(w, dtype=np.float32).reshape(-1)
    n = flat.size
    blocks = -(-n // block)
    padded = np.zeros(blocks * block, dtype=np.float32)
    padded[:n] = flat
    rows = padded.reshape(blocks, block)
    absmax = np.abs(rows).max(axis=1).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = (np.float32(1) / absmax).astype(np.float32)
        x = np.where(absmax[:, None] > 0, rows * inv[:, None], np.float32(0))
    codes = np.abs(x[..., None].astype(np.float64) -
                   code.astype(np.float64)).argmin(axis=-1).reshape(-1)[:n]
    out = {"codes": codes, "absmax": absmax}
    decoded = absmax
    if double_quant:
        offset = np.float32(absmax.astype(np.float64).mean())
        a = (absmax - offset).astype(np.float32)
        dyn = bnb_dynamic_map(True).astype(np.float32)
        q = np.zeros(blocks, dtype=np.uint8)
        nested = np.zeros(-(-blocks // 256), dtype=np.float32)
        decoded = np.empty_like(a)
        for i, s in enumerate(range(0, blocks, 256)):
            part = a[s:s + 256]
            m = np.float32(np.abs(part).max())
            xs = part * (np.float32(1) / m) if m > 0 else np.zeros_like(part)
            q[s:s + 256] = quantize_nearest(dyn.astype(np.float64),
                                            xs.astype(np.float64), False)
            nested[i] = m
            decoded[s:s + 256] = dyn[q[s:s + 256]] * m + offset
        out.update(absmax=q, nested_absmax=nested, offset=offset)
    values = code[codes] * np.repeat(decoded.astype(np.float32), block)[:n]
    out["values"] = values.astype(np.float32).reshape(np.shape(w))
    return out


def dequantized_4bit(w, fmt, block=64, double_quant=False):
    """The float32 values bitsandbytes' quantize_4bit + dequantize_4bit
    give `w` (bnb_4bit_quantize)."""
    return bnb_4bit_quantize(w, fmt, block, double_quant)["values"]


def bnb_4bit_tensors(name, w, fmt, block=64, double_quant=False):
    """The tensors a Hugging Face checkpoint saved with bitsandbytes' 4-bit
    weights holds for the weight `name` (Params4bit and QuantState.as_dict(
    packed=True)): the codes two per byte, high nibble first, as uint8
    [ceil(n / 2), 1]; <name>.absmax, .quant_map and, with double
    quantization, .nested_absmax and .nested_quant_map; and
    <name>.quant_state.bitsandbytes__<fmt>, the rest of the state as JSON
    bytes."""
    q = bnb_4bit_quantize(w, fmt, block, double_quant)
    codes = q["codes"].astype(np.uint8)
    if codes.size % 2:
        codes = np.append(codes, np.uint8(0))
    packed = ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8)
    state = {"quant_type": fmt, "blocksize": block, "dtype": "float32",
             "shape": list(np.shape(w))}
    out = {name: packed.reshape(-1, 1),
           name + ".absmax": q["absmax"],
           name + ".quant_map": (NF4_CODE if fmt == "nf4" else FP4_CODE).astype(np.float32)}
    if double_quant:
        state.update(nested_blocksize=256, nested_dtype="float32",
                     nested_offset=float(q["offset"]))
        out[name + ".nested_absmax"] = q["nested_absmax"]
        out[name + ".nested_quant_map"] = bnb_dynamic_map(True).astype(np.float32)
    out[name + ".quant_state.bitsandbytes__" + fmt] = np.frombuffer(
        json.dumps(state).encode(), dtype=np.uint8).copy()
    return out


class Adam8bitRef:
    """bitsandbytes' Adam8bit / AdamW8bit (block-wise, blocksize 256) in
    float64, from its published algorithm (Dettmers et al., 8-bit
    Optimizers via Block-wise Quantization, and the update of
    kOptimizerStatic8bit2StateBlockwise): per block of 256 elements of the
    flattened parameter the moments are code * absmax; then
        g' = g ;  m = b1 m + (1-b1) g' ;  v = b2 v + (1-b2) g'^2
        c1 = 1 - b1^t ;  c2 = sqrt(1 - b2^t)
        p += -(lr c2 / c1) m / (sqrt(v) + c2 eps) ;  p *= 1 - lr wd
    and each moment is stored as the code nearest to m / max|m| of its
    block (signed map, sign kept) and v / max|v| (unsigned map). Tensors
    with fewer than min_8bit_size elements keep float state; dsc updates
    them with AdamW (decay before the step, eps outside sqrt(v)/sqrt(1-b2^t)),
    as here."""

    BLOCK = 256

    def __init__(self, groups, betas=(0.9, 0.999), eps=1e-8,
                 min_8bit_size=4096):
        self.param_groups = groups
        self.b1, self.b2 = betas
        self.eps, self.min_8bit_size = eps, min_8bit_size
        self.code1, self.code2 = bnb_dynamic_map(True), bnb_dynamic_map(False)
        self.state = {}

    def _init(self, p):
        n = p.numel()
        if n < self.min_8bit_size:
            return {"t": 0, "m": torch.zeros_like(p), "v": torch.zeros_like(p)}
        nb = (n + self.BLOCK - 1) // self.BLOCK
        # bitsandbytes starts from code 0 with absmax 0: the value 0.
        return {"t": 0, "q1": np.zeros(n, np.int64), "q2": np.zeros(n, np.int64),
                "a1": np.zeros(nb), "a2": np.zeros(nb)}

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            lr, wd = g["lr"], g["weight_decay"]
            for p in g["params"]:
                st = self.state.setdefault(id(p), self._init(p))
                st["t"] += 1
                t = st["t"]
                if "m" in st:  # 32-bit state: AdamW
                    m, v, grad = st["m"], st["v"], p.grad
                    p.mul_(1 - lr * wd)
                    m.mul_(self.b1).add_((1 - self.b1) * grad)
                    v.mul_(self.b2).add_((1 - self.b2) * grad * grad)
                    denom = v.sqrt() / math.sqrt(1 - self.b2 ** t) + self.eps
                    p.sub_(lr / (1 - self.b1 ** t) * m / denom)
                    continue
                self._step8bit(p, st, lr, wd, t)

    def _step8bit(self, p, st, lr, wd, t):
        n, B = p.numel(), self.BLOCK
        blk = np.arange(n) // B
        g = p.grad.detach().reshape(-1).cpu().numpy().astype(np.float64)
        w = p.detach().reshape(-1).cpu().numpy().astype(np.float64)
        m = self.code1[st["q1"]] * st["a1"][blk]
        v = self.code2[st["q2"]] * st["a2"][blk]
        v = v * self.b2 + (1 - self.b2) * g * g
        m = m * self.b1 + (1 - self.b1) * g
        c1 = 1 - self.b1 ** t
        c2 = math.sqrt(1 - self.b2 ** t)
        w = w + (-lr * c2 / c1) * (m / (np.sqrt(v) + c2 * self.eps))
        if wd > 0:
            w = w * (1 - lr * wd)
        a1 = np.zeros_like(st["a1"])
        a2 = np.zeros_like(st["a2"])
        np.maximum.at(a1, blk, np.abs(m))
        np.maximum.at(a2, blk, np.abs(v))
        x1 = np.divide(m, a1[blk], out=np.zeros(n), where=a1[blk] > 0)
        x2 = np.divide(v, a2[blk], out=np.zeros(n), where=a2[blk] > 0)
        st["q1"] = np.where(a1[blk] > 0, quantize_nearest(self.code1, x1, True), 127)
        st["q2"] = np.where(a2[blk] > 0, quantize_nearest(self.code2, x2, False), 0)
        st["a1"], st["a2"] = a1, a2
        p.copy_(torch.from_numpy(w.reshape(tuple(p.shape))).to(p.dtype))


class AdafactorRef:
    """transformers.optimization.Adafactor, re-implemented in torch (float64)
    from its published algorithm (Shazeer and Stern, 2018, as Hugging Face
    implements it): per parameter, at step t
        beta2t = 1 - t^decay_rate ;  u = g^2 + eps1
        matrix: row = beta2t row + (1-beta2t) mean_last(u),
                col = beta2t col + (1-beta2t) mean_second_last(u),
                approx = rsqrt(row / mean(row)) outer rsqrt(col)
        vector: v = beta2t v + (1-beta2t) u,  approx = rsqrt(v)
        update = approx g / max(1, RMS(approx g) / clip_threshold)
        lr_t = (relative_step ? min(warmup_init ? 1e-6 t : 1e-2, 1/sqrt(t))
                : lr) * (scale_parameter ? max(eps2, RMS(p)) : 1)
        update *= lr_t ; with beta1: m = beta1 m + (1-beta1) update, update = m
        p -= weight_decay lr_t p ;  p -= update
    RMS(x) = ||x|| / sqrt(numel)."""

    def __init__(self, groups, eps=(1e-30, 1e-3), clip_threshold=1.0,
                 decay_rate=-0.8, beta1=None, scale_parameter=True,
                 relative_step=True, warmup_init=False):
        self.param_groups = groups
        self.eps1, self.eps2 = eps
        self.clip, self.decay, self.beta1 = clip_threshold, decay_rate, beta1
        self.scale_parameter, self.relative_step = scale_parameter, relative_step
        self.warmup_init = warmup_init
        self.state = {}

    @staticmethod
    def _rms(x):
        return x.norm() / math.sqrt(x.numel())

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            lr, wd = g["lr"], g["weight_decay"]
            for p in g["params"]:
                grad = p.grad
                factored = p.dim() >= 2
                st = self.state.get(id(p))
                if st is None:
                    st = {"t": 0}
                    if factored:
                        st["row"] = torch.zeros(p.shape[:-1], dtype=p.dtype)
                        st["col"] = torch.zeros(p.shape[:-2] + p.shape[-1:], dtype=p.dtype)
                    else:
                        st["v"] = torch.zeros_like(p)
                    if self.beta1 is not None:
                        st["m"] = torch.zeros_like(p)
                    self.state[id(p)] = st
                st["t"] += 1
                t = st["t"]
                rel = lr
                if self.relative_step:
                    rel = min(1e-6 * t if self.warmup_init else 1e-2, 1.0 / math.sqrt(t))
                scale = max(self.eps2, self._rms(p).item()) if self.scale_parameter else 1.0
                lr_t = scale * rel
                beta2t = 1.0 - t ** self.decay
                u = grad * grad + self.eps1
                if factored:
                    st["row"] = beta2t * st["row"] + (1 - beta2t) * u.mean(dim=-1)
                    st["col"] = beta2t * st["col"] + (1 - beta2t) * u.mean(dim=-2)
                    r = (st["row"] / st["row"].mean(dim=-1, keepdim=True)).rsqrt()
                    c = st["col"].rsqrt()
                    upd = r.unsqueeze(-1) * c.unsqueeze(-2) * grad
                else:
                    st["v"] = beta2t * st["v"] + (1 - beta2t) * u
                    upd = st["v"].rsqrt() * grad
                upd = upd / max(1.0, (self._rms(upd) / self.clip).item())
                upd = upd * lr_t
                if self.beta1 is not None:
                    st["m"] = self.beta1 * st["m"] + (1 - self.beta1) * upd
                    upd = st["m"]
                if wd != 0:
                    p.add_(p, alpha=-wd * lr_t)
                p.sub_(upd)


class FusedLambRef:
    """DeepSpeed FusedLamb, one tensor at a time:
        m = b1 m + (1-b1) g ;  v = b2 v + (1-b2) g^2     (no bias correction
        update = m / (sqrt(v) + eps) + wd * p             on m, v themselves)
        coeff = clamp(||p|| / ||update||, min_coeff, max_coeff)
                (1 if either norm is 0)
        step_size = lr * sqrt(1 - b2^t) / (1 - b1^t)  (bias_correction)
        p -= step_size * coeff * update"""

    def __init__(self, groups, betas=(0.9, 0.999), eps=1e-8, max_coeff=10.0,
                 min_coeff=0.01, bias_correction=True):
        self.param_groups = groups
        self.b1, self.b2 = betas
        self.eps, self.max_coeff, self.min_coeff = eps, max_coeff, min_coeff
        self.bias_correction = bias_correction
        self.state = {}
        self.coeffs = []

    @torch.no_grad()
    def step(self):
        self.coeffs = []
        for g in self.param_groups:
            lr, wd = g["lr"], g["weight_decay"]
            for p in g["params"]:
                st = self.state.setdefault(id(p), {"t": 0, "m": torch.zeros_like(p),
                                                   "v": torch.zeros_like(p)})
                st["t"] += 1
                t, m, v, grad = st["t"], st["m"], st["v"], p.grad
                m.mul_(self.b1).add_((1 - self.b1) * grad)
                v.mul_(self.b2).add_((1 - self.b2) * grad * grad)
                upd = m / (v.sqrt() + self.eps) + wd * p
                coeff = lamb_trust_ratio(p, upd, self.max_coeff, self.min_coeff)
                if self.bias_correction:
                    ss = lr * math.sqrt(1 - self.b2 ** t) / (1 - self.b1 ** t)
                else:
                    ss = lr
                p.sub_(ss * coeff * upd)
                self.coeffs.append(coeff)


class OneBitAdamRef:
    """DeepSpeed OnebitAdam (deepspeed/runtime/fp16/onebit/adam.py) on one
    rank, where DeepSpeed does not compress (size 1). No bias correction;
    update = m / (sqrt(v) + eps) + wd * p; p -= lr * update. Steps 1 ..
    freeze_step update m and v (warm-up); later steps update m only (v
    frozen), and zero m where v == 0 (dsc derives DeepSpeed's exp_avg_mask
    so). DeepSpeed's first step() call only initialises buffers; dsc has
    no such call, and neither has this reference."""

    def __init__(self, groups, betas=(0.9, 0.999), eps=1e-8,
                 freeze_step=100000):
        self.param_groups = groups
        self.b1, self.b2 = betas
        self.eps, self.freeze_step = eps, freeze_step
        self.state = {}
        self.t = 0

    @torch.no_grad()
    def step(self):
        self.t += 1
        for g in self.param_groups:
            lr, wd = g["lr"], g["weight_decay"]
            for p in g["params"]:
                st = self.state.setdefault(id(p), {"m": torch.zeros_like(p),
                                                   "v": torch.zeros_like(p)})
                m, v = st["m"], st["v"]
                m.mul_(self.b1).add_((1 - self.b1) * p.grad)
                if self.t <= self.freeze_step:
                    v.mul_(self.b2).add_((1 - self.b2) * p.grad * p.grad)
                else:
                    m.mul_((v != 0).to(m.dtype))
                upd = m / (v.sqrt() + self.eps) + wd * p
                p.sub_(lr * upd)


class OneBitLambRef:
    """DeepSpeed OnebitLamb (deepspeed/runtime/fp16/onebit/lamb.py) on one
    rank, where nothing is compressed. Steps 1 .. freeze_step: LAMB without
    bias correction (FusedLambRef's update and trust ratio), and
    coeff_freeze = coeff_beta * coeff_freeze + (1 - coeff_beta) * ratio
    whenever the ratio is not exactly 1. At the first later step: each
    tensor's momentum scale mean(r) / r_i, r_i = ||m_i|| / sqrt(n_i) (1
    where r_i is 0), the fresh variance v_fresh = v, last_factor = 1. Later
    steps: m_last = m; m = (b1 m + (1-b1) g) * scale / scale (the
    compression's round trip, exact on one rank), zeroed where v == 0 (as
    dsc derives exp_avg_mask); g_r = (m - b1 m_last) / (1 - b1); v_fresh =
    b2 v_fresh + (1-b2) g_r^2; denom = sqrt(v) + eps; prelim = m / denom;
    update = prelim + wd p; factor = max(denom / (sqrt(v_fresh) + eps)),
    with weight decay factor * r + (1 - r), r = min(1, ||prelim|| /
    ||update||); clamped to [factor_min, factor_max] and within
    factor_threshold of last_factor; p -= lr * coeff_freeze * factor *
    update. DeepSpeed's first step() call only initialises; dsc has no such
    call, and neither has this reference."""

    def __init__(self, groups, betas=(0.9, 0.999), eps=1e-8, max_coeff=10.0,
                 min_coeff=0.01, freeze_step=100000, coeff_beta=0.9,
                 factor_max=4.0, factor_min=0.5, factor_threshold=0.1):
        self.param_groups = groups
        self.b1, self.b2 = betas
        self.eps, self.max_coeff, self.min_coeff = eps, max_coeff, min_coeff
        self.freeze_step, self.coeff_beta = freeze_step, coeff_beta
        self.fmax, self.fmin, self.fthr = factor_max, factor_min, factor_threshold
        self.state = {}
        self.t = 0

    def _params(self):
        return [(g, p) for g in self.param_groups for p in g["params"]]

    @torch.no_grad()
    def step(self):
        self.t += 1
        for g, p in self._params():
            self.state.setdefault(id(p), {
                "m": torch.zeros_like(p), "v": torch.zeros_like(p),
                "coeff": 0.0})
        if self.t == self.freeze_step + 1:
            self.start_compression()
        for g, p in self._params():
            lr, wd = g["lr"], g["weight_decay"]
            st = self.state[id(p)]
            m, v = st["m"], st["v"]
            if self.t <= self.freeze_step:
                m.mul_(self.b1).add_((1 - self.b1) * p.grad)
                v.mul_(self.b2).add_((1 - self.b2) * p.grad * p.grad)
                upd = m / (v.sqrt() + self.eps) + wd * p
                coeff = lamb_trust_ratio(p, upd, self.max_coeff, self.min_coeff)
                if coeff != 1.0:
                    st["coeff"] = (self.coeff_beta * st["coeff"]
                                   + (1 - self.coeff_beta) * coeff)
                p.sub_(lr * coeff * upd)
                continue
            last = m.clone()
            m.mul_(self.b1).add_((1 - self.b1) * p.grad)
            m.mul_((v != 0).to(m.dtype))
            self.frozen_update(p, st, last, lr, wd)

    def start_compression(self):
        """The switch: per tensor the momentum scale mean(r) / r_i, r_i =
        ||m_i|| / sqrt(n_i) (1 where r_i is 0), the fresh variance v_fresh
        = v, last_factor = 1."""
        r = [self.state[id(p)]["m"].norm().item() / math.sqrt(p.numel())
             for _, p in self._params()]
        mean = sum(r) / len(r)
        for (_, p), ri in zip(self._params(), r):
            st = self.state[id(p)]
            st["scale"] = mean / ri if ri != 0 else 1.0
            st["fresh"] = st["v"].clone()
            st["last_factor"] = 1.0

    def frozen_update(self, p, st, last, lr, wd):
        """The compression stage's update of p from its (exchanged, masked)
        momentum st["m"] and the momentum before this step, `last`."""
        m, v = st["m"], st["v"]
        grad_r = (m - last * self.b1) / (1 - self.b1)
        st["fresh"].mul_(self.b2).add_((1 - self.b2) * grad_r * grad_r)
        denom = v.sqrt() + self.eps
        prelim = m / denom
        upd = prelim + wd * p
        factor = (denom / (st["fresh"].sqrt() + self.eps)).max().item()
        if wd > 0:
            un = upd.norm().item()
            ratio = min(1.0, prelim.norm().item() / un) if un > 0 else 1.0
            factor = factor * ratio + (1.0 - ratio)
        factor = min(max(factor, self.fmin), self.fmax)
        factor = min(factor, st["last_factor"] * (1.0 + self.fthr))
        factor = max(factor, st["last_factor"] * (1.0 - self.fthr))
        st["last_factor"] = factor
        p.sub_(lr * st["coeff"] * factor * upd)


class ZeroOneAdamRef:
    """DeepSpeed ZeroOneAdam (deepspeed/runtime/fp16/onebit/zoadam.py) on
    one rank, where nothing is compressed. No bias correction; update =
    m / (sqrt(v) + eps) + wd * p. DeepSpeed's step count s is this step
    k + 1 (its first step() call only initialises). Until var_freeze_step:
    a full step (m and v from the gradient) when s is a multiple of the
    variance interval (which doubles after var_update_scaler full steps),
    else m from the gradient with v frozen. After it: local steps (m from
    the gradient, the update also subtracted into u, lr summed) and, when s
    is a multiple of the local interval (doubling every local_step_scaler
    steps up to local_step_clipper), a local step followed by the
    synchronisation p -= u; w = u * (sqrt(v) + eps); m = -w / lr_sum;
    p += w / (sqrt(v) + eps); u = 0. Where v is exactly 0 (only zero
    gradients), m is zeroed outside full steps, as dsc derives DeepSpeed's
    exp_avg_mask. Deliberate difference from DeepSpeed on one rank: its
    1-bit-gradient steps leave m unchanged when there is one rank (the
    update sits under `if self.size > 1`); here, as in dsc, m takes the
    local gradient."""

    def __init__(self, groups, betas=(0.9, 0.999), eps=1e-8,
                 var_freeze_step=100000, var_update_scaler=16,
                 local_step_scaler=32678, local_step_clipper=16):
        self.param_groups = groups
        self.b1, self.b2 = betas
        self.eps = eps
        self.var_freeze, self.var_scaler = var_freeze_step, var_update_scaler
        self.local_scaler, self.local_clipper = local_step_scaler, local_step_clipper
        self.var_interval, self.var_counter = 1, 0
        self.local_interval, self.local_counter = 1, 0
        self.lr_sum = 0.0
        self.state = {}
        self.k = 0

    def next_step(self):
        """Advances to the next step: (full, frozen, sync) by DeepSpeed's
        counters (the interval counters move in finish_step)."""
        self.k += 1
        s = self.k + 1
        frozen = self.k > self.var_freeze
        full = not frozen and s % self.var_interval == 0
        sync = frozen and s % self.local_interval == 0
        return full, frozen, sync

    def finish_step(self, full, frozen):
        if full:
            self.var_counter += 1
            if self.var_counter == self.var_scaler:
                self.var_counter = 0
                self.var_interval *= 2
        if frozen:
            self.local_counter += 1
            if self.local_counter == self.local_scaler:
                self.local_counter = 0
                self.local_interval = min(self.local_clipper, self.local_interval * 2)

    @torch.no_grad()
    def step(self):
        full, frozen, sync = self.next_step()
        if frozen:
            self.lr_sum += self.param_groups[0]["lr"]
        for g in self.param_groups:
            lr, wd = g["lr"], g["weight_decay"]
            for p in g["params"]:
                st = self.state.setdefault(id(p), {"m": torch.zeros_like(p),
                                                   "v": torch.zeros_like(p),
                                                   "u": torch.zeros_like(p)})
                m, v, u = st["m"], st["v"], st["u"]
                m.mul_(self.b1).add_((1 - self.b1) * p.grad)
                if full:
                    v.mul_(self.b2).add_((1 - self.b2) * p.grad * p.grad)
                else:
                    m.mul_((v != 0).to(m.dtype))
                upd = m / (v.sqrt() + self.eps) + wd * p
                p.sub_(lr * upd)
                if frozen:
                    u.sub_(lr * upd)
                if sync:
                    p.sub_(u)
                    w = u * (v.sqrt() + self.eps) * (v != 0).to(u.dtype)
                    m.copy_(-w / self.lr_sum)
                    p.add_(w / (v.sqrt() + self.eps))
                    u.zero_()
        if sync:
            self.lr_sum = 0.0
        self.finish_step(full, frozen)


def make_optimizer(tc, named_params):
    o = tc.opt
    t = o["type"].lower()
    p = o.get("params", {})
    wd = p.get("weight_decay", 0.0)
    decay = [v for v in named_params.values() if v.dim() >= 2]
    no_decay = [v for v in named_params.values() if v.dim() < 2]
    lr = p.get("lr", 1e-3)
    groups = [{"params": decay, "weight_decay": wd, "lr": lr},
              {"params": no_decay, "weight_decay": 0.0, "lr": lr}]
    betas = tuple(p.get("betas", (0.9, 0.999)))
    eps = p.get("eps", 1e-8)
    if t in ("adam", "adamw"):
        if not p.get("bias_correction", True):
            raise NotImplementedError("bias_correction false: torch.optim has no such Adam")
        # DeepSpeed: "Adam" is AdamW unless adam_w_mode is false.
        if t == "adam" and p.get("adam_w_mode", True) is False:
            return torch.optim.Adam(groups, lr=lr, betas=betas, eps=eps)
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
    if t == "onebitadam":
        return OneBitAdamRef(groups, betas=betas, eps=eps,
                             freeze_step=p.get("freeze_step", 100000))
    if t == "onebitlamb":
        return OneBitLambRef(groups, betas=betas, eps=eps,
                             max_coeff=p.get("max_coeff", 10.0),
                             min_coeff=p.get("min_coeff", 0.01),
                             freeze_step=p.get("freeze_step", 100000),
                             coeff_beta=p.get("coeff_beta", 0.9),
                             factor_max=p.get("factor_max", 4.0),
                             factor_min=p.get("factor_min", 0.5),
                             factor_threshold=p.get("factor_threshold", 0.1))
    if t == "zerooneadam":
        return ZeroOneAdamRef(groups, betas=betas, eps=eps,
                              var_freeze_step=p.get("var_freeze_step", 100000),
                              var_update_scaler=p.get("var_update_scaler", 16),
                              local_step_scaler=p.get("local_step_scaler", 32678),
                              local_step_clipper=p.get("local_step_clipper", 16))
    if t == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=p.get("momentum", 0.0),
                               dampening=p.get("dampening", 0.0),
                               nesterov=p.get("nesterov", False))
    if t in ("adam8bit", "adamw8bit"):
        # bitsandbytes' classes differ in their default weight decay only.
        wd = p.get("weight_decay", 1e-2 if t == "adamw8bit" else 0.0)
        groups[0]["weight_decay"] = wd
        return Adam8bitRef(groups, betas=betas, eps=eps,
                           min_8bit_size=p.get("min_8bit_size", 4096))
    if t == "adafactor":
        ae = p.get("eps", [1e-30, 1e-3])
        return AdafactorRef(groups, eps=tuple(ae),
                            clip_threshold=p.get("clip_threshold", 1.0),
                            decay_rate=p.get("decay_rate", -0.8),
                            beta1=p.get("beta1"),
                            scale_parameter=p.get("scale_parameter", True),
                            relative_step=p.get("relative_step", True),
                            warmup_init=p.get("warmup_init", False))
    if t == "lamb":
        return FusedLambRef(groups, betas=betas, eps=eps,
                            max_coeff=p.get("max_coeff", 10.0),
                            min_coeff=p.get("min_coeff", 0.01),
                            bias_correction=p.get("bias_correction", True))
    raise ValueError(o["type"])


def clip_gradients(grads, clip):
    """DeepSpeed's clipping of a gradient set by its global norm, in place:
    scaled by clip / (norm + 1e-6) when that is below 1 (clip 0: none).
    Returns (norm before clipping, the coefficient applied)."""
    norm = torch.sqrt(sum((g ** 2).sum() for g in grads)).item()
    coef = 1.0
    if clip > 0:
        coef = clip / (norm + 1e-6)
        if coef < 1:
            for g in grads:
                g.mul_(coef)
        coef = min(coef, 1.0)
    return norm, coef


def reference_train(P0, mcfg, tc, tokens, steps, dtype=torch.float64,
                    frozen=None, weights=None):
    """DeepSpeed-engine semantics: per micro-batch backward of loss/A,
    global-norm clipping (max_norm / (norm + 1e-6) when < 1, the norm taken
    before clipping), optimizer step at the scheduler's current lr, then
    scheduler.step().
    P0 are the trained parameters; `frozen` (name -> array) are constants
    the forward also reads, and `weights` maps the union to the weights the
    forward gets (LoRA's merged effective weights; default: as they are).
    Returns (final params, [per-step dict(loss, lr, grad_norm, clip)],
    {name: elementwise max |grad| over the steps})."""
    if tc.pad_token_id is not None:
        raise NotImplementedError("reference_train: dsc.pad_token_id (only "
                                  "check_model feeds padded batches)")
    P = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in P0.items()}
    F = {k: torch.tensor(v, dtype=dtype) for k, v in (frozen or {}).items()
         if k not in P}
    weights = weights or (lambda W: W)
    opt = make_optimizer(tc, P)
    sched = make_scheduler(tc)
    log, gmax = [], {k: torch.zeros_like(v) for k, v in P.items()}
    for s in range(steps):
        for v in P.values():
            v.grad = None
        total = 0.0
        for m in range(tc.A):
            x, y = micro_batch(tokens, tc, mcfg, s, m)
            _, loss = forward(weights({**F, **P}), mcfg, x, y)
            (loss / tc.A).backward()
            total += loss.item() / tc.A
        for k, v in P.items():
            gmax[k] = torch.maximum(gmax[k], v.grad.abs())
        norm, coef = clip_gradients([v.grad for v in P.values()], tc.clip)
        lr = sched.lr
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        sched.step()
        log.append({"loss": total, "lr": lr, "grad_norm": norm, "clip": coef})
    return {k: v.detach() for k, v in P.items()}, log, gmax


# ---------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------

def is_norm_weight(name):
    """GPT-2's ln_*, BERT's LayerNorm, the LLaMA family's RMSNorm gammas
    (input_layernorm, post_attention_layernorm, model.norm)."""
    return name.endswith(".weight") and ("ln_" in name or "LayerNorm" in name
                                         or name.endswith("norm.weight"))


def perturb(weights, seed=0, matrix_scale=8.0):
    """Make LayerNorm gammas non-unit and every bias nonzero, so the tests
    see them; scale the (std 0.02) matrices up so attention probabilities
    and GELU inputs are far from their near-linear regime."""
    rs = np.random.RandomState(seed)
    out = {}
    for k, v in weights.items():
        v = v.copy()
        if v.ndim >= 2:
            v = (v * matrix_scale).astype(v.dtype)
        elif is_norm_weight(k):
            v = (1.0 + 0.1 * rs.randn(*v.shape)).astype(v.dtype)
        elif k.endswith("bias"):
            v = (0.05 * rs.randn(*v.shape)).astype(v.dtype)
        out[k] = v
    return out


# ---------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------

class Checker:
    """err = max|a - b| / max(max|b|, tiny) per tensor (b = reference)."""

    def __init__(self, tol=1e-4, verbose=True):
        self.tol, self.verbose = tol, verbose
        self.rows, self.failed = [], []

    def check(self, name, got, ref, tol=None, tiny=1e-30):
        """tiny: floor for the denominator, for tensors that are zero in
        exact arithmetic (e.g. BERT's key bias gradient: softmax is
        invariant to the per-query constant q.b_k)."""
        tol = self.tol if tol is None else tol
        a = torch.as_tensor(np.asarray(got) if not isinstance(got, torch.Tensor) else got).double()
        b = torch.as_tensor(np.asarray(ref) if not isinstance(ref, torch.Tensor) else ref).double()
        if tuple(a.shape) != tuple(b.shape):
            self.failed.append(name)
            print(f"FAIL {name}: shape {tuple(a.shape)} vs reference {tuple(b.shape)}")
            return math.inf
        if not torch.isfinite(a).all():
            self.failed.append(name)
            print(f"FAIL {name}: dsc value has non-finite entries")
            return math.inf
        denom = max(b.abs().max().item() if b.numel() else 0.0, tiny)
        err = (a - b).abs().max().item() / denom if b.numel() else 0.0
        self.rows.append((name, err, tol))
        ok = err <= tol
        if not ok:
            self.failed.append(name)
        if self.verbose or not ok:
            print(f"{'ok  ' if ok else 'FAIL'} {name:58s} rel err {err:.3e}"
                  f" (scale {denom:.3e}, tol {tol:.0e})")
        return err

    def check_equal(self, name, got, ref):
        a, b = np.asarray(got), np.asarray(ref)
        ok = a.shape == b.shape and np.array_equal(a, b)
        if not ok:
            self.failed.append(name)
            bad = "shape" if a.shape != b.shape else f"{int((a != b).sum())} mismatching elements"
            print(f"FAIL {name}: not identical to the reference ({bad})")
        elif self.verbose:
            print(f"ok   {name:58s} identical")
        self.rows.append((name, 0.0 if ok else math.inf, 0.0))

    def worst(self):
        if not self.rows:
            return ("-", 0.0)
        r = max(self.rows, key=lambda r: r[1])
        return r[0], r[1]

    def finish(self, what):
        name, err = self.worst()
        if self.failed:
            print(f"{what}: FAILED: {len(self.failed)} tensor(s) out of tolerance: "
                  f"{', '.join(self.failed[:10])}{' ...' if len(self.failed) > 10 else ''}")
            sys.exit(1)
        print(f"{what}: PASS ({len(self.rows)} checks; worst {name} rel err {err:.3e})")


# ---------------------------------------------------------------------------
# Driving dsc-run
# ---------------------------------------------------------------------------

class DscRun:
    def __init__(self, exe, workdir):
        if os.sep in exe:
            exe = os.path.abspath(exe)
        self.exe, self.workdir = exe, os.path.abspath(workdir)
        os.makedirs(workdir, exist_ok=True)

    def path(self, name):
        return os.path.join(self.workdir, name)

    def run(self, *args):
        cmd = [self.exe] + [str(a) for a in args]
        r = subprocess.run(cmd, cwd=self.workdir, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"dsc-run failed ({r.returncode}): {' '.join(cmd)}\n"
                               f"{r.stdout}{r.stderr}")
        return r.stdout

    def initial_weights(self, model, config, data, out):
        self.run("train", "--model", model, "--config", config, "--data", data,
                 "--steps", 0, "--save", out)
        return load_safetensors(out)

    def inspect(self, model, config, data, init_from, out):
        self.run("inspect", "--model", model, "--config", config, "--data", data,
                 "--init-from", init_from, "--out", out)
        return load_safetensors(out)

    def attention_mask(self, config, ds, T, heads):
        """The element mask of the ds_config's sparse_attention layout (as
        `dsc-run layout` prints it), or None without one."""
        if "sparse_attention" not in ds:
            return None
        out = self.run("layout", "--config", os.path.abspath(config),
                       "--seq-len", T, "--heads", heads)
        return block_mask(json.loads(out)["layout"], T)

    def train(self, model, config, data, steps, init_from, save, log_json):
        self.run("train", "--model", model, "--config", config, "--data", data,
                 "--steps", steps, "--init-from", init_from, "--save", save,
                 "--log-json", log_json)
        with open(log_json) as f:
            log = [json.loads(line) for line in f if line.strip()]
        return load_safetensors(save), log


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
    return path


# Model configs the checks know: configs/<name>.json.
MODELS = ["gpt2", "bert", "llama", "llama3_tied", "qwen2", "qwen3", "gemma",
          "gemma2", "mixtral", "qwen2_moe", "qwen3_moe", "phi"]


def common_args(ap):
    ap.add_argument("--dsc-run", default="dsc-run", help="dsc-run binary")
    ap.add_argument("--model", choices=MODELS, default="gpt2",
                    help="configs/<model>.json (+ <model>_fwd.json, <model>_<case>.json)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--quiet", action="store_true")


def setup_threads():
    n = int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    if n > 0:
        torch.set_num_threads(n)
