#!/usr/bin/python3
"""Self-checks of the LLaMA-family reference (dsc_reference.llama_forward)
that need neither dsc nor Hugging Face transformers.

  /usr/bin/python3 check_llama_reference.py

  (a) rotary embeddings: the rotation keeps every vector's norm, turns the
      dimension pair (j, j + head_dim/2) by position * inv_freq[j] (HF's
      rotate_half layout, not interleaved pairs), and rope(q, m) . rope(k, n)
      depends on m - n only; linear rope scaling equals dividing positions
      by the factor;
  (b) attention heads: with num_key_value_heads == num_attention_heads the
      model is plain multi-head attention, and grouped-query attention
      equals multi-head attention whose key/value heads are copies (query
      head i reads key/value head i // (heads / kv_heads));
  (c) the llama3 rope_scaling frequencies for a known case equal values
      worked out from the published formula, element by element;
  (d) the vectorised llama_forward equals a slow loop-per-position,
      per-head implementation written separately below, for every
      LLaMA-family config in configs/ (biases, tying, MQA/GQA, rope
      scaling, Qwen3's per-head q_norm / k_norm), logits and loss, in
      float64;
  (e) Qwen3's per-head norms: scaling one head's rows of q_proj or k_proj
      by a positive factor leaves the logits unchanged (the head is
      RMS-normalised over its own head_dim features; epsilon ~0 for the
      check), while with the norm
      weights doubled for one query head they change.

Prints "check_llama_reference: PASS" or the failed checks and exits 1.
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsc_reference as R  # noqa: E402

FAILED = []


def expect(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    if not ok:
        FAILED.append(name)


def close(name, got, want, tol=1e-12):
    got, want = torch.as_tensor(got).double(), torch.as_tensor(want).double()
    err = (got - want).abs().max().item() / max(want.abs().max().item(), 1e-300)
    expect(name, got.shape == want.shape and err <= tol, f"rel err {err:.2e}")


def config(name, **override):
    cfg = R.load_json(os.path.join(R.CONFIGS, name + ".json"))
    cfg.update(override)
    return cfg


def weights(cfg, seed):
    w = R.perturb(R.llama_init(cfg, seed), seed=seed + 1)
    return {k: torch.tensor(v, dtype=torch.float64) for k, v in w.items()}


# ---------------------------------------------------------------------------
# (a) rotary embeddings
# ---------------------------------------------------------------------------

def check_rope():
    g = torch.Generator().manual_seed(0)
    for name in ("llama", "llama3_tied", "qwen2"):
        cfg = config(name)
        D = R.llama_dims(cfg)[3]
        T = 9
        cos, sin = R.rope_cos_sin(cfg, T)
        x = torch.randn(T, D, dtype=torch.float64, generator=g)
        y = R.apply_rope(x, cos, sin)
        close(f"{name}: rope keeps norms", y.norm(dim=-1), x.norm(dim=-1))
        # Pair layout: a unit vector on dimension j goes to cos on j and sin
        # on j + D/2, at the angle position * inv_freq[j].
        inv = R.rope_inv_freq(cfg)
        for j in (0, D // 2 - 1):
            e = torch.zeros(T, D, dtype=torch.float64)
            e[:, j] = 1.0
            r = R.apply_rope(e, cos, sin)
            ang = torch.arange(T, dtype=torch.float64) * inv[j]
            want = torch.zeros(T, D, dtype=torch.float64)
            want[:, j], want[:, j + D // 2] = ang.cos(), ang.sin()
            close(f"{name}: rope turns dims ({j}, {j + D // 2}) together", r, want)
        # rope(q, m) . rope(k, n) depends on m - n only.
        q = torch.randn(D, dtype=torch.float64, generator=g).expand(T, D)
        k = torch.randn(D, dtype=torch.float64, generator=g).expand(T, D)
        dots = R.apply_rope(q, cos, sin) @ R.apply_rope(k, cos, sin).T  # [m, n]
        worst = 0.0
        for d in range(-(T - 1), T):
            diag = torch.diagonal(dots, offset=d)
            worst = max(worst, (diag - diag[0]).abs().max().item())
        expect(f"{name}: rope(q,m).rope(k,n) depends on m-n only",
               worst <= 1e-12 * dots.abs().max().item(), f"max spread {worst:.2e}")
        spread = torch.diagonal(dots, 0)[0] - torch.diagonal(dots, 3)[0]
        expect(f"{name}: ... and does depend on it", spread.abs().item() > 1e-6)
    # linear scaling: inv_freq / factor == positions / factor.
    base = config("llama")
    lin = config("llama", rope_scaling={"rope_type": "linear", "factor": 4.0})
    cos_l, sin_l = R.rope_cos_sin(lin, 7)
    pos = torch.arange(7, dtype=torch.float64)[:, None] / 4.0
    ang = pos * R.rope_inv_freq(base)[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    close("linear rope_scaling == positions / factor", torch.cat([cos_l, sin_l]),
          torch.cat([ang.cos(), ang.sin()]))
    old = config("llama", rope_scaling={"type": "linear", "factor": 4.0})
    close("rope_scaling key 'type' == 'rope_type'", R.rope_inv_freq(old),
          R.rope_inv_freq(lin), tol=0.0)


# ---------------------------------------------------------------------------
# (b) heads
# ---------------------------------------------------------------------------

def check_heads():
    ids = torch.from_numpy(R.random_tokens(2 * 7, 97, seed=5).reshape(2, 7))
    # kv_heads == heads is plain multi-head attention: compare with the
    # loop implementation, in which each query head reads its own k/v head.
    mha = config("llama", num_key_value_heads=4)
    P = weights(mha, 10)
    close("kv_heads == heads: llama_forward == plain MHA",
          R.llama_forward(P, mha, ids)[0], naive_logits(P, mha, ids))
    # kv_heads absent/null means heads as well.
    none = config("llama", num_key_value_heads=None)
    close("num_key_value_heads null == heads",
          R.llama_forward(P, none, ids)[0], R.llama_forward(P, mha, ids)[0], tol=0.0)
    # GQA == MHA whose k/v head i is GQA's k/v head i // (H / KV).
    gqa = config("llama")
    C, H, KV, D, _ = R.llama_dims(gqa)
    Pg = weights(gqa, 11)
    Pm = dict(Pg)
    for l in range(gqa["num_hidden_layers"]):
        for n in ("k_proj", "v_proj"):
            w = Pg[f"model.layers.{l}.self_attn.{n}.weight"].view(KV, D, C)
            Pm[f"model.layers.{l}.self_attn.{n}.weight"] = \
                w.repeat_interleave(H // KV, dim=0).reshape(H * D, C)
    close("GQA == MHA with k/v heads copied per group",
          R.llama_forward(Pg, gqa, ids)[0], R.llama_forward(Pm, mha, ids)[0])


# ---------------------------------------------------------------------------
# (c) llama3 frequencies
# ---------------------------------------------------------------------------

def check_llama3():
    cfg = {"model_type": "llama", "hidden_size": 48, "num_attention_heads": 3,
           "intermediate_size": 8, "rope_theta": 500000.0,
           "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 64}}
    got = R.rope_inv_freq(cfg)
    # By hand (head_dim 16): f_j = 500000^(-j/8), wavelength 2 pi / f_j.
    # Bands: wavelength < 64/4 = 16 keep f; > 64/1 = 64 use f/8; between,
    # s = (64/wavelength - 1) / (4 - 1), (1 - s) f/8 + s f.
    #   j=0: wavelength 6.28 < 16  -> 1
    #   j=1: f = 0.193922744748686, wavelength 32.400455734691,
    #        s = 0.325093619300293 -> 0.0794030091792082
    #   j=4: f = 1/sqrt(500000) = 0.00141421356237310, wavelength 4443
    #        -> f/8 = 0.000176776695296637
    known = {0: 1.0, 1: 0.0794030091792082, 4: 0.000176776695296637}
    for j, v in known.items():
        close(f"llama3 inv_freq[{j}] == {v}", got[j], torch.tensor(v, dtype=torch.float64),
              tol=1e-14)
    want, bands = [], []
    for j in range(8):
        f = 500000.0 ** (-(2 * j) / 16)
        wl = 2 * math.pi / f
        if wl < 16:
            want.append(f)
            bands.append("keep")
        elif wl > 64:
            want.append(f / 8)
            bands.append("scale")
        else:
            s = (64 / wl - 1) / 3
            want.append((1 - s) * f / 8 + s * f)
            bands.append("blend")
    close("llama3 inv_freq, all 8, scalar formula", got,
          torch.tensor(want, dtype=torch.float64))
    expect("llama3 case covers all three bands", set(bands) == {"keep", "blend", "scale"},
           " ".join(bands))
    # The config used by the dsc tests hits all three bands too.
    t = config("llama3_tied")
    rs = t["rope_scaling"]
    D = R.llama_dims(t)[3]
    wl = [2 * math.pi * t["rope_theta"] ** (2 * j / D) for j in range(D // 2)]
    L = rs["original_max_position_embeddings"]
    n_keep = sum(w < L / rs["high_freq_factor"] for w in wl)
    n_div = sum(w > L / rs["low_freq_factor"] for w in wl)
    expect("configs/llama3_tied.json covers keep, blend and scale bands",
           n_keep >= 1 and n_div >= 1 and n_keep + n_div < len(wl))


# ---------------------------------------------------------------------------
# (d) a slow second implementation
# ---------------------------------------------------------------------------

def naive_inv_freq(cfg, D):
    """Scalar rope frequencies, one at a time."""
    theta = cfg.get("rope_theta", 10000.0)
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    out = []
    for j in range(D // 2):
        f = 1.0 / theta ** (2 * j / D)
        if kind == "linear":
            f = f / rs["factor"]
        elif kind == "llama3":
            L = rs["original_max_position_embeddings"]
            wl = 2 * math.pi / f
            if wl > L / rs["low_freq_factor"]:
                f = f / rs["factor"]
            elif wl >= L / rs["high_freq_factor"]:
                s = (L / wl - rs["low_freq_factor"]) / (
                    rs["high_freq_factor"] - rs["low_freq_factor"])
                f = (1 - s) * f / rs["factor"] + s * f
        out.append(f)
    return out


def naive_logits(P, cfg, ids):
    """One sequence, one position, one head at a time."""
    C, H, KV, D, _ = R.llama_dims(cfg)
    eps = cfg.get("rms_norm_eps", 1e-6)
    freqs = naive_inv_freq(cfg, D)
    B, T = ids.shape
    half = D // 2

    def norm(x, w):
        return x / math.sqrt(float((x * x).sum()) / x.numel() + eps) * w

    def head_norm(x, heads, name):
        """Qwen3: each head's D features RMS-normalised by its own weight."""
        if not R.qk_norm(cfg):
            return x
        return torch.cat([norm(x[i * D:(i + 1) * D], P[name + ".weight"])
                          for i in range(heads)])

    def linear(x, name):
        y = P[name + ".weight"] @ x
        return y + P[name + ".bias"] if name + ".bias" in P else y

    def rotate(x, t):
        y = x.clone()
        for j in range(half):
            c, s = math.cos(t * freqs[j]), math.sin(t * freqs[j])
            y[j] = x[j] * c - x[j + half] * s
            y[j + half] = x[j + half] * c + x[j] * s
        return y

    out = torch.zeros(B, T, cfg["vocab_size"], dtype=torch.float64)
    for b in range(B):
        hs = [P["model.embed_tokens.weight"][ids[b, t]].clone() for t in range(T)]
        for l in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{l}."
            n = [norm(h, P[p + "input_layernorm.weight"]) for h in hs]
            q = [head_norm(linear(x, p + "self_attn.q_proj"), H,
                           p + "self_attn.q_norm") for x in n]
            k = [head_norm(linear(x, p + "self_attn.k_proj"), KV,
                           p + "self_attn.k_norm") for x in n]
            v = [linear(x, p + "self_attn.v_proj") for x in n]
            q = [torch.cat([rotate(q[t][i * D:(i + 1) * D], t) for i in range(H)])
                 for t in range(T)]
            k = [torch.cat([rotate(k[t][g * D:(g + 1) * D], t) for g in range(KV)])
                 for t in range(T)]
            new = []
            for t in range(T):
                heads = []
                for i in range(H):
                    g = i // (H // KV)
                    qi = q[t][i * D:(i + 1) * D]
                    sc = [float(qi @ k[u][g * D:(g + 1) * D]) / math.sqrt(D)
                          for u in range(t + 1)]
                    mx = max(sc)
                    e = [math.exp(x - mx) for x in sc]
                    z = sum(e)
                    heads.append(sum(e[u] / z * v[u][g * D:(g + 1) * D]
                                     for u in range(t + 1)))
                h = hs[t] + linear(torch.cat(heads), p + "self_attn.o_proj")
                m = norm(h, P[p + "post_attention_layernorm.weight"])
                gate = linear(m, p + "mlp.gate_proj")
                gate = gate / (1.0 + torch.exp(-gate))
                h = h + linear(gate * linear(m, p + "mlp.up_proj"), p + "mlp.down_proj")
                new.append(h)
            hs = new
        head = (P["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False)
                else P["lm_head.weight"])
        for t in range(T):
            out[b, t] = head @ norm(hs[t], P["model.norm.weight"])
    return out


def check_against_loops():
    for name, over in (("llama", {}), ("llama3_tied", {}), ("qwen2", {}),
                       ("qwen3", {}),
                       ("llama", {"model_type": "mistral", "sliding_window": None})):
        cfg = config(name, **over)
        P = weights(cfg, 20)
        ids = torch.from_numpy(R.random_tokens(2 * 6, cfg["vocab_size"], seed=6).reshape(2, 6))
        tgt = torch.from_numpy(R.random_tokens(2 * 6, cfg["vocab_size"], seed=7).reshape(2, 6))
        logits, loss = R.llama_forward(P, cfg, ids, tgt)
        want = naive_logits(P, cfg, ids)
        label = f"{name}{' as ' + cfg['model_type'] if over else ''}"
        close(f"{label}: llama_forward logits == loop implementation", logits, want)
        lse = torch.logsumexp(want, dim=-1)
        nll = (lse - want.gather(-1, tgt[..., None])[..., 0]).mean()
        close(f"{label}: loss == mean NLL over all positions (no shift)", loss, nll)
        # The parameter set follows the config's biases and tying.
        qkv_b, o_b, mlp_b = R.llama_biases(cfg)
        names = set(P)
        expect(f"{label}: bias / tying parameter set",
               ("model.layers.0.self_attn.q_proj.bias" in names) == qkv_b
               and ("model.layers.0.self_attn.o_proj.bias" in names) == o_b
               and ("model.layers.1.mlp.down_proj.bias" in names) == mlp_b
               and ("lm_head.weight" in names) != R.llama_tied(cfg))
    # A tied model given an lm_head.weight is refused with a clear message.
    cfg = config("llama3_tied")
    P = weights(cfg, 21)
    P["lm_head.weight"] = P["model.embed_tokens.weight"].clone()
    try:
        R.llama_forward(P, cfg, torch.zeros(1, 2, dtype=torch.long))
        expect("tied config with lm_head.weight is refused", False)
    except ValueError as e:
        expect("tied config with lm_head.weight is refused", "tie_word_embeddings" in str(e))


def check_qk_norm():
    # rms_norm_eps ~0: the scale invariance is exact only without epsilon.
    cfg = config("qwen3", rms_norm_eps=1e-30)
    _, H, KV, D, _ = R.llama_dims(cfg)
    P = weights(cfg, 30)
    ids = torch.from_numpy(R.random_tokens(2 * 7, cfg["vocab_size"], seed=8).reshape(2, 7))
    base, _ = R.llama_forward(P, cfg, ids)
    p = "model.layers.1.self_attn."
    for proj, head in (("q_proj", H - 1), ("k_proj", KV - 1)):
        Q = dict(P)
        w = Q[p + proj + ".weight"].clone()
        w[head * D:(head + 1) * D] *= 3.5
        Q[p + proj + ".weight"] = w
        close(f"qwen3: {proj} head {head} scaled by 3.5 leaves the logits",
              R.llama_forward(Q, cfg, ids)[0], base, tol=1e-10)
    Q = dict(P)
    Q[p + "q_norm.weight"] = 2 * P[p + "q_norm.weight"]
    moved = (R.llama_forward(Q, cfg, ids)[0] - base).abs().max().item()
    expect("qwen3: doubling q_norm.weight changes the logits", moved > 1e-6,
           f"max change {moved:.2e}")


def main():
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "2") or 2)))
    check_rope()
    check_heads()
    check_llama3()
    check_against_loops()
    check_qk_norm()
    if FAILED:
        print(f"check_llama_reference: FAILED: {', '.join(FAILED)}")
        sys.exit(1)
    print("check_llama_reference: PASS")


if __name__ == "__main__":
    main()
