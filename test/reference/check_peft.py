#!/usr/bin/python3
"""dsc's LoRA files against PEFT itself (Hugging Face peft + transformers).

For LLaMA (configs/lora-llama.json) and GPT-2 (configs/lora-gpt2.json: Conv1D
layers, fan_in_fan_out, use_rslora; both with bias "none", see run_model),
on perturbed base weights of configs/<model>.json:

1. dsc -> PEFT: an adapter dsc trained and saved (--save DIR) loads with
   PeftModel.from_pretrained on transformers' model of the base, whose
   logits equal dsc's (dsc-run inspect --adapter DIR); PEFT's
   merge_and_unload gives the weights dsc's --merge-adapter wrote.
2. PEFT -> dsc: an adapter made by get_peft_model (A and B randomised) and
   written by PEFT's save_pretrained loads in dsc (--adapter), which then
   computes PEFT's logits.

Optional: prints "check_peft: SKIP (<reason>)" and exits 0 where
transformers or peft cannot be imported (scripts/install-transformers.sh
installs both into .pydeps).

  /usr/bin/python3 check_peft.py --dsc-run build/bin/dsc-run --workdir W
"""

import argparse
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_transformers as CT  # noqa: E402
import dsc_reference as R  # noqa: E402


def skip(reason):
    print(f"check_peft: SKIP ({reason})")
    sys.exit(0)


def hf_model(tf, cfg, base):
    """transformers' model of `cfg` holding the base weights, float64."""
    model = CT.build(tf, cfg)
    state = {k: torch.from_numpy(v).double() for k, v in base.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k != "lm_head.weight" and not k.endswith("attn.bias")]
    if missing or unexpected:
        raise RuntimeError(f"base weights do not fit transformers' model: "
                           f"missing {missing}, unexpected {unexpected}")
    return model


def logits_of(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def run_model(tf, peft, args, ck, model):
    model_json = os.path.join(R.CONFIGS, f"{model}.json")
    lora_json = os.path.join(R.CONFIGS, f"lora-{model}.json")
    fwd_json = os.path.join(R.CONFIGS, f"{model}_fwd.json")
    cfg, ds = R.load_json(model_json), R.load_json(lora_json)
    dsc = R.DscRun(args.dsc_run, os.path.join(args.workdir, model))
    # PEFT 0.13 keeps a LoRA layer's bias at <module>.base_layer.bias: its
    # save_pretrained drops the biases bias="lora_only" trains and its
    # loader ignores them under <module>.bias, so only bias "none"
    # round-trips through PEFT (dsc's own files keep them; see README).
    ds["lora"]["bias"] = "none"
    lora_json = R.write_json(dsc.path("lora.json"), ds)
    tc, lora = R.TrainCfg(ds), ds["lora"]
    data = dsc.path("tokens.bin")
    tokens = R.random_tokens(6 * tc.B * tc.T + 5, cfg["vocab_size"], seed=9)
    R.write_tokens(data, tokens)
    base = R.perturb(dsc.initial_weights(model_json, fwd_json, data,
                                         dsc.path("w0.safetensors")), seed=10)
    base_path = dsc.path("base.safetensors")
    R.save_safetensors(base_path, base)
    ids, _ = R.batch_at(tokens, 0, 0, tc.B, tc.T, tc.A)

    def dsc_logits(adapter):
        out = dsc.path("inspect.safetensors")
        dsc.run("inspect", "--model", model_json, "--config", lora_json, "--data", data,
                "--init-from", base_path, "--adapter", adapter, "--out", out)
        return R.load_safetensors(out)["logits"]

    # 1. dsc trains and saves; PEFT loads and merges.
    saved, merged = dsc.path("dsc-adapter"), dsc.path("merged.safetensors")
    dsc.run("train", "--model", model_json, "--config", lora_json, "--data", data,
            "--steps", 4, "--init-from", base_path, "--save", saved,
            "--merge-adapter", merged)
    trained = R.load_safetensors(os.path.join(saved, "adapter_model.safetensors"))
    adapted = {k[len("base_model.model."):k.index(".lora_")] + ".weight"
               for k in trained if ".lora_" in k}
    for k, v in sorted(trained.items()):
        if ".lora_" in k and not np.abs(v).max() > 0:  # A initialised, B trained
            ck.failed.append(k)
            print(f"FAIL {model}: {k} is all zero after training from the base")
    pm = peft.PeftModel.from_pretrained(hf_model(tf, cfg, base), saved).double().eval()
    ck.check(f"{model}: PEFT loads dsc's adapter: logits", dsc_logits(saved),
             logits_of(pm, ids))
    unloaded = pm.merge_and_unload()
    got = R.load_safetensors(merged)
    for k, v in unloaded.state_dict().items():
        if k in got and any(k.startswith(m) for m in adapted):
            if np.array_equal(got[k], base[k]):
                ck.failed.append(k)
                print(f"FAIL {model}: merged {k} equals the base weight")
            ck.check(f"{model}: merge_and_unload {k}", got[k], v, tol=1e-6)

    # 2. PEFT creates and saves; dsc loads.
    conf = peft.LoraConfig(r=lora["r"], lora_alpha=lora["lora_alpha"], lora_dropout=0.0,
                           target_modules=lora["target_modules"], bias=lora["bias"],
                           use_rslora=lora.get("use_rslora", False),
                           fan_in_fan_out=model == "gpt2")
    pm = peft.get_peft_model(hf_model(tf, cfg, base), conf).double().eval()
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    theirs = dsc.path("peft-adapter")
    pm.float().save_pretrained(theirs)  # as trained models are saved: F32
    pm.double()
    ck.check(f"{model}: dsc loads PEFT's adapter: logits", dsc_logits(theirs),
             logits_of(pm, ids))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dsc-run", default="dsc-run")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--pydeps", default=os.path.join(CT.ROOT, ".pydeps"))
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    R.setup_threads()
    CT.skip = skip  # import_transformers says why it cannot, in our name
    tf = CT.import_transformers(args.pydeps)
    try:
        import peft
    except Exception as e:
        skip(f"cannot import peft from {args.pydeps}: {type(e).__name__}: "
             f"{str(e).splitlines()[0] if str(e) else ''}")
    ck = R.Checker(args.tol, verbose=not args.quiet)
    for model in ("llama", "gpt2"):
        run_model(tf, peft, args, ck, model)
    ck.finish(f"check_peft (peft {peft.__version__})")


if __name__ == "__main__":
    main()
