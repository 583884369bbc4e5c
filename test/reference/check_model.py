"""One micro-step of dsc (dsc-run inspect) against the PyTorch reference:
logits, loss and the gradient of every parameter.

  /usr/bin/python3 check_model.py --dsc-run build/bin/dsc-run --model gpt2 \
      --workdir /tmp/ref-gpt2

--model names configs/<model>.json and its batch config configs/<model>_fwd.json
(dsc_reference.MODELS: gpt2, bert, llama, llama3_tied, qwen2). The weights
dsc saves must carry Hugging Face's parameter names (for the LLaMA family
exactly dsc_reference.llama_param_shapes: no lm_head.weight when tied).

With dsc.pad_token_id in the ds_config, the batch is padded: row 0 on the
left (its first queries see only padding), row 1 on the right, row 2 in
the middle; the reference masks those keys and ignores padding labels.

The reference runs in float64 from the fp32 weights dsc used; dsc runs fp32.
Error per tensor: max|dsc - ref| / max|ref|, must be <= --tol (1e-4).
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsc_reference as R  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    R.common_args(ap)
    ap.add_argument("--model-config", help="override the model config.json")
    ap.add_argument("--ds-config", help="override the ds_config.json")
    args = ap.parse_args()
    R.setup_threads()
    R.philox_selftest()

    model_json = args.model_config or os.path.join(R.CONFIGS, f"{args.model}.json")
    ds_json = args.ds_config or os.path.join(R.CONFIGS, f"{args.model}_fwd.json")
    model_json, ds_json = os.path.abspath(model_json), os.path.abspath(ds_json)
    mcfg, ds = R.load_json(model_json), R.load_json(ds_json)
    tc = R.TrainCfg(ds)
    # Token dropping (the ds_config's moe section): the reference's experts
    # take at most the capacity dsc computes.
    mcfg["_dsc_moe_capacity"] = R.moe_capacity(ds, mcfg, tc.B * tc.T)
    if tc.A != 1:
        sys.exit("check_model: use gradient_accumulation_steps 1 (inspect's "
                 "gradient is d(loss/A)/dparam of micro-batch 0)")
    dsc = R.DscRun(args.dsc_run, args.workdir)
    data = dsc.path("tokens.bin")
    tokens = R.random_tokens(4 * tc.B * tc.T + 7, mcfg["vocab_size"], seed=1)
    pad = tc.pad_token_id
    if pad is not None:
        R.pad_batch(tokens, pad, tc.B, tc.T)
    R.write_tokens(data, tokens)

    w0 = dsc.initial_weights(model_json, ds_json, data, dsc.path("w0.safetensors"))
    w0 = R.perturb(w0, seed=2)
    init = dsc.path("w0p.safetensors")
    R.save_safetensors(init, w0)
    dump = dsc.inspect(model_json, ds_json, data, init, dsc.path("dump.safetensors"))

    ck = R.Checker(args.tol, verbose=not args.quiet)
    # The batch dsc saw: the llm.c window of step 0, micro-batch 0 ...
    x, y = R.batch_at(tokens, 0, 0, tc.B, tc.T, tc.A)
    ck.check_equal("input_ids", dump["input_ids"], x.numpy())
    ck.check_equal("targets", dump["targets"], y.numpy())
    if R.model_type(mcfg) == "bert":
        # ... and BERT's in-graph 80/10/10 masking, reproduced with our Philox.
        ids, labels = R.mlm_mask(x.numpy(), tc.mlm_probability, tc.mask_token_id,
                                 mcfg["vocab_size"], tc.seed, offset=0,
                                 pad_token=pad)
        ck.check_equal("mlm_inputs", dump["mlm_inputs"], ids.numpy())
        ck.check_equal("mlm_labels", dump["mlm_labels"], labels.numpy())
        n = int((labels != -100).sum())
        if n == 0:
            sys.exit("check_model: no masked position in the batch; change the seed")
        print(f"     ({n} of {labels.numel()} positions masked)")
        # Feed the model exactly dsc's inputs so a masking bug cannot hide
        # a model bug (the check above already compared them).
        ids = torch.from_numpy(dump["mlm_inputs"].astype(np.int64))
        labels = torch.from_numpy(dump["mlm_labels"].astype(np.int64))
    else:
        ids, labels = x, y
        if pad is not None:  # padding labels do not count
            labels = labels.masked_fill(labels == pad, -100)
    key_mask = None
    if pad is not None:
        key_mask = x != pad
        print(f"     ({int((~key_mask).sum())} of {key_mask.numel()} "
              "positions are padding)")

    P = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
         for k, v in w0.items()}
    # Block-sparse attention: the dense model with the layout's element mask.
    heads = mcfg.get("n_head", mcfg.get("num_attention_heads"))
    mask = dsc.attention_mask(ds_json, ds, tc.T, heads)
    if mask is not None:
        print(f"     (sparse attention: {int(mask[0].sum())} of {tc.T * tc.T} "
              "scores of head 0 attended)")
    logits, loss = R.forward(P, mcfg, ids, labels, mask, key_mask)
    (loss / tc.A).backward()

    ck.check("logits", dump["logits"], logits.detach())
    ck.check("loss", dump["loss"], loss.detach())
    missing = [k for k in P if "grad." + k not in dump]
    extra = [k for k in dump if k.startswith("grad.") and k[5:] not in P]
    if missing or extra:
        print(f"FAIL parameter set: dump lacks grads for {missing}; "
              f"unexpected {extra}")
        sys.exit(1)
    # Denominator floor ("tiny") for gradients: 1e-3 of the largest gradient
    # entry of the model, so a gradient that is exactly zero in exact
    # arithmetic (BERT's attention key bias) is judged against the model's
    # gradient scale instead of against its own rounding noise.
    tiny = 1e-3 * max(v.grad.abs().max().item() for v in P.values())
    for k, v in P.items():
        ck.check("grad." + k, dump["grad." + k], v.grad, tiny=tiny)
    ck.finish(f"check_model {args.model}")


if __name__ == "__main__":
    main()
