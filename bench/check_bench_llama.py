#!/usr/bin/env python3
"""The GPU benchmark's PyTorch LLaMA (gpu_gpt2.make_llama) against Hugging
Face transformers' LlamaForCausalLM: the same weights give the same loss in
float64 on the CPU, for examples/llama-tiny.json (llama3 rope scaling,
grouped-query heads) with untied and tied embeddings. A benchmark against a
model that computes something else would compare nothing.

  /usr/bin/python3 bench/check_bench_llama.py [--pydeps DIR]

transformers comes from DIR (default <source>/.pydeps, where
scripts/install-transformers.sh puts it); without it the check prints
SKIP and the reason. Where the installed torch has no
F.scaled_dot_product_attention (before 2.0), a plain causal softmax
attention stands in for it, here only.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pydeps", default=os.path.join(ROOT, ".pydeps"))
    a = ap.parse_args()
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if os.path.isdir(a.pydeps):
        sys.path.insert(0, a.pydeps)
    import torch
    import torch.nn.functional as F
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except Exception as e:
        print("check_bench_llama: SKIP (cannot import transformers from %s: %s)"
              % (a.pydeps, str(e).splitlines()[0] if str(e) else type(e).__name__))
        return
    if not hasattr(F, "scaled_dot_product_attention"):
        def causal_attention(q, k, v, is_causal=True, enable_gqa=False):
            assert is_causal and not enable_gqa
            T = q.shape[-2]
            s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
            return s.softmax(-1) @ v
        F.scaled_dot_product_attention = causal_attention
    sys.path.insert(0, HERE)
    import gpu_gpt2

    worst = 0.0
    for tied in (False, True):
        cfg = json.load(open(os.path.join(ROOT, "examples", "llama-tiny.json")))
        cfg["tie_word_embeddings"] = tied
        T = cfg["max_position_embeddings"]
        torch.manual_seed(0)
        mine = gpu_gpt2.make_llama(cfg, T).double()
        ref = LlamaForCausalLM(LlamaConfig(**cfg, attn_implementation="eager")).double()
        mlp = ("gate_proj", "up_proj", "down_proj")
        names = {}
        for k in mine.state_dict():
            if k.startswith("layers."):
                _, i, rest = k.split(".", 2)
                group = ("mlp." if rest.startswith(mlp) else
                         "self_attn." if rest[1:].startswith("_proj") else "")
                names[k] = "model.layers.%s.%s%s" % (i, group, rest)
            else:
                names[k] = k if k == "lm_head.weight" else "model." + k
        missing, unexpected = ref.load_state_dict(
            {names[k]: v for k, v in mine.state_dict().items()}, strict=False)
        assert not unexpected and missing == (["lm_head.weight"] if tied else []), \
            (missing, unexpected)
        g = torch.Generator().manual_seed(1)
        V = cfg["vocab_size"]
        idx = torch.randint(0, V, (2, T), generator=g)
        targets = torch.randint(0, V, (2, T), generator=g)
        with torch.no_grad():
            loss = mine(idx, targets).item()
            logits = ref(idx).logits
            want = F.cross_entropy(logits.view(-1, V), targets.view(-1)).item()
        diff = abs(loss - want) / abs(want)
        worst = max(worst, diff)
        # The rotary tables are f32 on both sides (transformers computes its
        # inv_freq in f32 too), so float64 agrees to about 1e-7, not 1e-15;
        # dropping the llama3 scaling alone moves the loss by 6.5e-6.
        if diff > 1e-6:
            sys.exit("check_bench_llama: FAIL (tied %s: loss %.10f, transformers %.10f)"
                     % (tied, loss, want))
    print("check_bench_llama: PASS (largest relative loss difference %.1e)" % worst)


if __name__ == "__main__":
    main()
