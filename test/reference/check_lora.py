"""LoRA fine-tuning in dsc against a PyTorch reference (float64).

  /usr/bin/python3 check_lora.py --dsc-run build/bin/dsc-run --model llama \
      --workdir /tmp/ref-lora

--model names configs/<model>.json (the frozen base) and the LoRA training
config configs/lora-<model>.json (PEFT's keys in its "lora" section).

1. Base weights (dsc's initialisation, perturbed) and a starting adapter
   with nonzero A and B, written the way PEFT writes one
   (adapter_config.json, adapter_model.safetensors with
   base_model.model.<module>.lora_A.weight names), loaded with --adapter.
2. One micro-step (dsc-run inspect): logits, loss and the gradient of every
   trainable parameter against the reference; no frozen parameter may have
   a gradient.
3. STEPS optimizer steps (dsc-run train --save DIR --merge-adapter M): the
   logged loss and gradient norm per step, every adapter weight after the
   last step, the saved adapter_config.json, and the merged export, which
   must equal the untouched base plus scale * B A of dsc's own saved
   adapter (and the reference's).
4. The saved adapter loaded back with the base reproduces the reference's
   logits, and the merged weights alone (no LoRA) give the same logits.

With --four-bit nf4|fp4 (QLoRA; --bnb-file: the base file holds those
weights as bitsandbytes saves them, codes and quant state) the model config gains a
quantization_config (load_in_4bit, that bnb_4bit_quant_type,
--double-quant's bnb_4bit_use_double_quant): dsc stores every frozen linear
weight but the output head in 4 bits, and the reference's base holds those
weights as bitsandbytes' quantize/dequantize round trip gives them
(dsc_reference.dequantized_4bit, written from its published algorithm);
the merged export holds them dequantized, and the merged weights' logits
are computed with the unquantized model config.

The reference is independent of dsc's two-GEMM form: it merges the adapter
into an effective weight W + scale * B A (transposed for GPT-2's Conv1D) and
lets autograd carry the gradient to A and B; dsc_reference.reference_train
trains the trainable parameters only (PyTorch's AdamW, DeepSpeed's clipping
and schedules), the base a constant.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsc_reference as R  # noqa: E402

STEPS = 4
PEFT = "base_model.model."


def lora_settings(ds):
    lo = ds["lora"]
    r, alpha = lo["r"], lo["lora_alpha"]
    scale = alpha / (math.sqrt(r) if lo.get("use_rslora") else r)
    return lo, r, scale


def adapted_modules(weights, targets, model):
    """PEFT's matching: the module name equals a target or ends in
    "." + target; only linear layers (GPT-2's wte is an embedding)."""
    out = []
    for k, v in sorted(weights.items()):
        if not k.endswith(".weight") or v.ndim != 2:
            continue
        m = k[: -len(".weight")]
        if m.endswith("wte") or m.endswith("embed_tokens") or m.endswith("wpe"):
            continue
        if any(m == t or m.endswith("." + t) for t in targets):
            out.append(m)
    return out


def conv1d(model):
    return model == "gpt2"  # Conv1D weights are [in, out]


def effective_weights(P, L, modules, scale, model):
    """The base with every adapter merged: autograd reaches A and B."""
    W = {k: v for k, v in P.items() if ".lora_" not in k}
    for m in modules:
        delta = scale * (L[m + ".lora_B.weight"] @ L[m + ".lora_A.weight"])
        W[m + ".weight"] = P[m + ".weight"] + (delta.T if conv1d(model) else delta)
    return W


def four_bit_weights(base, model):
    """The weights -dsc-quantize-frozen stores in 4 bits: every 2-D linear
    weight; not the embeddings, not the output head (bitsandbytes' default
    llm_int8_skip_modules)."""
    out = []
    for k, v in sorted(base.items()):
        m = k[: -len(".weight")]
        if not k.endswith(".weight") or v.ndim != 2 or m.endswith("lm_head") \
                or m.endswith(("wte", "wpe", "embed_tokens")):
            continue
        out.append(k)
    return out


def trainable_biases(base, modules, bias):
    if bias == "all":
        return [k for k in base if "bias" in k]
    if bias == "lora_only":
        return [m + ".bias" for m in modules if m + ".bias" in base]
    return []


def write_adapter(dirname, lora, tensors, fan_in_fan_out):
    """An adapter directory as PEFT's save_pretrained writes it."""
    os.makedirs(dirname, exist_ok=True)
    cfg = {"peft_type": "LORA", "task_type": "CAUSAL_LM",
           "base_model_name_or_path": None, "revision": None,
           "inference_mode": True, "r": lora["r"],
           "lora_alpha": lora["lora_alpha"], "lora_dropout": 0.0,
           "target_modules": lora["target_modules"], "bias": lora["bias"],
           "use_rslora": lora.get("use_rslora", False),
           "fan_in_fan_out": fan_in_fan_out, "init_lora_weights": True,
           "modules_to_save": None, "layers_to_transform": None,
           "layers_pattern": None, "rank_pattern": {}, "alpha_pattern": {},
           "use_dora": False, "megatron_config": None, "megatron_core": "megatron.core",
           "loftq_config": {}}
    R.write_json(os.path.join(dirname, "adapter_config.json"), cfg)
    R.save_safetensors(os.path.join(dirname, "adapter_model.safetensors"),
                       {PEFT + k: v for k, v in tensors.items()},
                       metadata={"format": "pt"})


def check_trained(ck, name, got, ref, start, gmax, lr_sum):
    """As check_optimizers: elements whose gradient is zero in exact
    arithmetic (GPT-2's key bias: softmax ignores q.b_k) move by Adam's
    normalised rounding noise alone; they are only bounded."""
    a = torch.from_numpy(np.asarray(got, dtype=np.float64))
    dead = (gmax > 0) & (gmax <= 1e-9 * gmax.max())
    if a.shape == ref.shape and dead.any():
        moved = (a[dead] - torch.from_numpy(start.astype(np.float64))[dead]).abs().max().item()
        if moved > 10 * lr_sum:
            ck.failed.append(name + " (zero-gradient elements)")
            print(f"FAIL {name}: zero-gradient elements moved {moved:.3e}")
        ck.check(name, a[~dead], ref[~dead], tiny=ref.abs().max().item())
    else:
        ck.check(name, a, ref)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    R.common_args(ap)
    ap.add_argument("--four-bit", choices=["nf4", "fp4"],
                    help="QLoRA: the frozen linear weights in 4 bits")
    ap.add_argument("--double-quant", action="store_true",
                    help="with --four-bit: bnb_4bit_use_double_quant")
    ap.add_argument("--bnb-file", action="store_true",
                    help="with --four-bit: the base file holds the 4-bit "
                         "weights as bitsandbytes saves them")
    args = ap.parse_args()
    R.setup_threads()
    model = args.model
    model_json = os.path.join(R.CONFIGS, f"{model}.json")
    lora_json = os.path.join(R.CONFIGS, f"lora-{model}.json")
    fwd_json = os.path.join(R.CONFIGS, f"{model}_fwd.json")
    mcfg, ds = R.load_json(model_json), R.load_json(lora_json)
    tc = R.TrainCfg(ds)
    lora, r, scale = lora_settings(ds)
    dsc = R.DscRun(args.dsc_run, args.workdir)
    ck = R.Checker(args.tol, verbose=not args.quiet)
    data = dsc.path("tokens.bin")
    tokens = R.random_tokens((2 * tc.A + 1) * tc.B * tc.T + 5, mcfg["vocab_size"], seed=5)
    R.write_tokens(data, tokens)

    # 1. The base (no LoRA) and a starting adapter with nonzero A and B.
    base = R.perturb(dsc.initial_weights(model_json, fwd_json, data,
                                         dsc.path("w0.safetensors")), seed=6)
    base_path = dsc.path("base.safetensors")
    R.save_safetensors(base_path, base)
    # What the frozen base is to the step: the file's weights, or with
    # --four-bit their 4-bit round trip.
    ref_base, quantized, full_model_json = dict(base), [], model_json
    if args.four_bit:
        model_json = R.write_json(dsc.path("model-4bit.json"), dict(
            mcfg, quantization_config={
                "quant_method": "bitsandbytes", "load_in_4bit": True,
                "bnb_4bit_quant_type": args.four_bit,
                "bnb_4bit_use_double_quant": args.double_quant,
                "bnb_4bit_compute_dtype": "float32"}))
        quantized = four_bit_weights(base, model)
        # Quantized as [out, in], bitsandbytes' Linear4bit layout: GPT-2's
        # Conv1D weights [in, out] transposed.
        out_in = (lambda w: w.T) if conv1d(model) else (lambda w: w)
        for k in quantized:
            ref_base[k] = out_in(R.dequantized_4bit(out_in(base[k]), args.four_bit,
                                                    64, args.double_quant))
        if args.bnb_file:
            saved = {k: v for k, v in base.items() if k not in quantized}
            for k in quantized:
                saved.update(R.bnb_4bit_tensors(k, out_in(base[k]), args.four_bit,
                                                64, args.double_quant))
            R.save_safetensors(base_path, saved)
        print(f"--- {args.four_bit}{' double-quant' if args.double_quant else ''}"
              f"{' (bitsandbytes file)' if args.bnb_file else ''}: "
              f"{len(quantized)} weights in 4 bits, worst round-trip error "
              f"{max(np.abs(ref_base[k] - base[k]).max() for k in quantized):.3e}")
    modules = adapted_modules(base, lora["target_modules"], model)
    rs = np.random.RandomState(8)
    start = {}
    for m in modules:
        w = base[m + ".weight"]
        n_in, n_out = (w.shape[0], w.shape[1]) if conv1d(model) else (w.shape[1], w.shape[0])
        start[m + ".lora_A.weight"] = (0.3 * rs.randn(r, n_in)).astype(np.float32)
        start[m + ".lora_B.weight"] = (0.3 * rs.randn(n_out, r)).astype(np.float32)
    for b in trainable_biases(base, modules, lora["bias"]):
        start[b] = base[b]
    adapter0 = dsc.path("adapter0")
    write_adapter(adapter0, lora, start, conv1d(model))
    print(f"--- {model}: r={r} alpha={lora['lora_alpha']} scale={scale:.4f} "
          f"bias={lora['bias']}, {len(modules)} adapted modules, "
          f"{len(start)} trainable tensors")

    # 2. One micro-step.
    dump_path = dsc.path("dump.safetensors")
    dsc.run("inspect", "--model", model_json, "--config", lora_json, "--data", data,
            "--init-from", base_path, "--adapter", adapter0, "--out", dump_path)
    dump = R.load_safetensors(dump_path)
    x, y = R.batch_at(tokens, 0, 0, tc.B, tc.T, tc.A)
    P = {k: torch.tensor(v, dtype=torch.float64) for k, v in ref_base.items()}
    T = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in start.items()}
    logits, loss = R.forward(effective_weights({**P, **T}, T, modules, scale, model), mcfg, x, y)
    (loss / tc.A).backward()
    ck.check("logits", dump["logits"], logits.detach())
    ck.check("loss", dump["loss"], loss.detach())
    grads = sorted(k[5:] for k in dump if k.startswith("grad."))
    if grads != sorted(T):
        print(f"FAIL trainable set: dsc has gradients for {grads}, expected {sorted(T)}")
        ck.failed.append("trainable set")
    tiny = 1e-3 * max(v.grad.abs().max().item() for v in T.values())
    for k, v in T.items():
        if "grad." + k in dump:
            ck.check("grad." + k, dump["grad." + k], v.grad, tiny=tiny)

    # 3. Training: adapters, log, saved files, merged export.
    saved, merged_path, log_path = dsc.path("adapter"), dsc.path("merged.safetensors"), \
        dsc.path("log.jsonl")
    dsc.run("train", "--model", model_json, "--config", lora_json, "--data", data,
            "--steps", STEPS, "--init-from", base_path, "--adapter", adapter0,
            "--save", saved, "--merge-adapter", merged_path, "--log-json", log_path)
    with open(log_path) as f:
        log = [json.loads(line) for line in f if line.strip()]
    ref, rlog, gmax = R.reference_train(
        start, mcfg, tc, tokens, STEPS, frozen=ref_base,
        weights=lambda W: effective_weights(W, W, modules, scale, model))
    lr_sum = sum(e["lr"] for e in rlog)
    for s, (d, e) in enumerate(zip(log, rlog)):
        print(f"     step {s}: loss {d['loss']:.6f} (ref {e['loss']:.6f}) "
              f"grad_norm {d['grad_norm']:.5f} (ref {e['grad_norm']:.5f})")
        ck.check(f"step {s} loss", d["loss"], e["loss"])
        ck.check(f"step {s} grad_norm", d["grad_norm"], e["grad_norm"])
    got = R.load_safetensors(os.path.join(saved, "adapter_model.safetensors"))
    if sorted(got) != sorted(PEFT + k for k in ref):
        print(f"FAIL adapter file names: {sorted(got)}")
        ck.failed.append("adapter names")
    for k, v in ref.items():
        check_trained(ck, "trained " + k, got.get(PEFT + k, np.zeros(0)), v,
                      start[k], gmax[k], lr_sum)
    with open(os.path.join(saved, "adapter_config.json")) as f:
        cfg = json.load(f)
    for key, want in [("peft_type", "LORA"), ("r", r), ("lora_alpha", lora["lora_alpha"]),
                      ("target_modules", lora["target_modules"]), ("bias", lora["bias"]),
                      ("use_rslora", lora.get("use_rslora", False)),
                      ("fan_in_fan_out", conv1d(model))]:
        if cfg.get(key) != want:
            print(f"FAIL adapter_config.json: {key} is {cfg.get(key)!r}, expected {want!r}")
            ck.failed.append("adapter_config " + key)
    merged = R.load_safetensors(merged_path)
    if sorted(merged) != sorted(base):
        print(f"FAIL merged export: names {sorted(set(merged) ^ set(base))} differ from the base's")
        ck.failed.append("merged names")
    # Frozen means bit-identical: everything not adapted or trained.
    trained_biases = set(trainable_biases(base, modules, lora["bias"]))
    untouched = [k for k in base if k[: -len(".weight")] not in modules
                 and k not in trained_biases]
    for k in untouched:
        if k in quantized:  # exported dequantized
            ck.check("frozen 4-bit " + k, merged[k], ref_base[k], tol=1e-6)
        else:
            ck.check_equal("frozen " + k, merged[k], base[k])
    dsc_adapters = {k[len(PEFT):]: torch.tensor(v, dtype=torch.float64) for k, v in got.items()}
    want_dsc = effective_weights(
        {k: torch.tensor(v, dtype=torch.float64) for k, v in ref_base.items()},
        dsc_adapters, modules, scale, model)
    want_ref = effective_weights(
        {k: torch.tensor(v, dtype=torch.float64) for k, v in ref_base.items()},
        ref, modules, scale, model)
    for m in modules:
        k = m + ".weight"
        ck.check("merged " + k + " = base + scale*BA", merged[k], want_dsc[k], tol=1e-6)
        ck.check("merged " + k + " vs reference", merged[k], want_ref[k])
    for b in trained_biases:
        check_trained(ck, "merged " + b, merged[b], ref[b], start[b], gmax[b], lr_sum)

    # 4. Reload: the saved adapter with the base, and the merged weights alone.
    x, y = R.batch_at(tokens, 0, 0, tc.B, tc.T, tc.A)
    Pm = {k: torch.tensor(v, dtype=torch.float64) for k, v in ref_base.items()}
    ref_logits, _ = R.forward(effective_weights({**Pm, **ref}, ref, modules, scale, model),
                              mcfg, x, y)
    reload_path = dsc.path("reload.safetensors")
    dsc.run("inspect", "--model", model_json, "--config", lora_json, "--data", data,
            "--init-from", base_path, "--adapter", saved, "--out", reload_path)
    ck.check("reloaded adapter logits", R.load_safetensors(reload_path)["logits"],
             ref_logits.detach())
    # The base config with the LoRA config's batch shape, no lora section.
    plain = {k: v for k, v in ds.items() if k != "lora"}
    plain_json = R.write_json(dsc.path("plain.json"), plain)
    merged_dump = dsc.inspect(full_model_json, plain_json, data, merged_path,
                              dsc.path("merged-dump.safetensors"))
    ck.check("merged weights logits", merged_dump["logits"], ref_logits.detach())

    # 5. From the base alone (no --adapter): A starts as PEFT's
    # U(+-1/sqrt(in)) and B at zero, so one step moves B and not A.
    fresh = dsc.path("fresh")
    one = dict(ds, scheduler=None, gradient_clipping=0.0)
    one.pop("scheduler")
    one_json = R.write_json(dsc.path("one-step.json"), one)
    dsc.run("train", "--model", model_json, "--config", one_json, "--data", data,
            "--steps", 1, "--init-from", base_path, "--save", fresh)
    f = R.load_safetensors(os.path.join(fresh, "adapter_model.safetensors"))
    for m in modules:
        a, b = f[PEFT + m + ".lora_A.weight"], f[PEFT + m + ".lora_B.weight"]
        bound = 1 / math.sqrt(a.shape[1])
        if not (0.5 * bound < np.abs(a).max() <= bound * (1 + 1e-6)) or not np.abs(b).max() > 0:
            ck.failed.append("fresh " + m)
            print(f"FAIL fresh adapter {m}: max|A| {np.abs(a).max():.4f} (bound {bound:.4f}), "
                  f"max|B| {np.abs(b).max():.2e} after one step from the base")
    ck.finish(f"check_lora {model}" + (f" {args.four_bit}" if args.four_bit else ""))


if __name__ == "__main__":
    main()
