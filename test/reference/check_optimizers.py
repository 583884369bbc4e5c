"""Five optimizer steps of dsc (dsc-run train) against PyTorch: every
parameter after the last step, and per step the logged loss, learning rate
and gradient norm.

  /usr/bin/python3 check_optimizers.py --dsc-run build/bin/dsc-run \
      --model gpt2 --workdir /tmp/ref-opt [--case adamw --case lamb ...]

Cases are ds_configs in configs/<model>_<case>.json. The reference
(dsc_reference.reference_train) runs in float64 with torch.optim.AdamW /
Adam / SGD, an independent FusedLamb, DeepSpeed's LR schedules and
DeepSpeed's clipping; BERT's per-step masks come from our own Philox.

--peer transformers|bitsandbytes swaps the reference optimizer for the
peer's own class (transformers.optimization.Adafactor in float64;
bitsandbytes.optim.Adam8bit/AdamW8bit on CPU tensors, float32, its only
precision) for the cases of that optimizer, from <repo>/.pydeps (see
scripts/install-transformers.sh) or <repo>/.pydeps-bitsandbytes
(scripts/install-bitsandbytes.sh); where the peer cannot be imported or run,
the check prints "check_optimizers <peer>: SKIP (<reason>)" and passes.

--model-peer transformers trains the reference with transformers' own model
class (from .pydeps, as shipped, in float64) instead of dsc_reference's
forward: dsc trained for 5 steps against, say, MixtralForCausalLM itself.

Tolerance: max|dsc - ref| / max|ref| <= --tol per tensor. Elements whose
gradient is zero in exact arithmetic (the attention key bias: softmax is
invariant to the per-query constant q.b_k) get an update from rounding noise
alone in Adam-like optimizers, which normalise it to O(lr); those elements
are only checked to have moved no more than the optimizer's step bound.
"""

import argparse
import glob
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsc_reference as R  # noqa: E402

STEPS = 5


def cases_for(model):
    """The ds_configs configs/<model>_<case>.json, less the forward check's
    (_fwd) and another model's files sharing the prefix (qwen3_moe.json,
    qwen3_moe_fwd.json for qwen3)."""
    pre = os.path.join(R.CONFIGS, model + "_")
    out = []
    for p in sorted(glob.glob(pre + "*.json")):
        c = p[len(pre):-5]
        if c == "fwd" or c.endswith("_fwd") or "model_type" in R.load_json(p):
            continue
        out.append(c)
    return out


PYDEPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      ".pydeps")


def skip(peer, reason):
    print(f"check_optimizers {peer}: SKIP ({reason})")
    sys.exit(0)


def peer_optimizer(peer):
    """make_optimizer(tc, named_params) with the peer's own class, or SKIP."""
    base = R.make_optimizer  # the parameter groups (decay on rank >= 2 only)
    deps = PYDEPS + ("-bitsandbytes" if peer == "bitsandbytes" else "")
    if os.path.isdir(deps):
        sys.path.insert(0, os.path.abspath(deps))
    if peer == "transformers":
        try:
            from transformers.optimization import Adafactor
        except Exception as e:  # noqa: BLE001 - any import failure skips
            skip(peer, f"cannot import transformers: {str(e).splitlines()[0]}")

        def make(tc, named):
            p = tc.opt.get("params", {})
            groups = base(tc, named).param_groups
            return Adafactor(groups, lr=p.get("lr"),
                             eps=tuple(p.get("eps", (1e-30, 1e-3))),
                             clip_threshold=p.get("clip_threshold", 1.0),
                             decay_rate=p.get("decay_rate", -0.8),
                             beta1=p.get("beta1"),
                             scale_parameter=p.get("scale_parameter", True),
                             relative_step=p.get("relative_step", True),
                             warmup_init=p.get("warmup_init", False))
        return make, ("adafactor",), torch.float64
    if tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) < (2, 4):
        skip(peer, "bitsandbytes' 8-bit optimizers run on CPU tensors only "
             f"from 0.47 on, which needs torch >= 2.4; this is torch {torch.__version__}")
    try:
        import bitsandbytes as bnb
    except Exception as e:  # noqa: BLE001
        skip(peer, f"cannot import bitsandbytes: {str(e).splitlines()[0]}")

    def make(tc, named):
        p = tc.opt.get("params", {})
        t = tc.opt["type"].lower()
        cls = bnb.optim.AdamW8bit if t == "adamw8bit" else bnb.optim.Adam8bit
        groups = base(tc, named).param_groups
        return cls(groups, lr=p.get("lr", 1e-3),
                   betas=tuple(p.get("betas", (0.9, 0.999))),
                   eps=p.get("eps", 1e-8),
                   min_8bit_size=p.get("min_8bit_size", 4096))
    return make, ("adam8bit", "adamw8bit"), torch.float32


def transformers_model_forward(mcfg):
    """A drop-in for dsc_reference.forward that runs transformers' own model
    class (AutoModelForCausalLM.from_config, float64, eager attention) on
    the reference's parameter tensors (torch's stateless functional_call, so
    the gradients reach them): the objective is the cross-entropy of its
    logits against dsc's next-token targets, plus router_aux_loss_coef times
    the model's aux_loss where it returns one (Mixtral with
    output_router_logits). transformers as shipped: its float32 islands
    (RMSNorm, softmaxes) stay float32. SKIPs where it cannot be imported."""
    if os.path.isdir(PYDEPS):
        sys.path.insert(0, os.path.abspath(PYDEPS))
    for k, v in (("TRANSFORMERS_VERBOSITY", "error"), ("HF_HUB_OFFLINE", "1"),
                 ("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")):
        os.environ.setdefault(k, v)
    try:
        import transformers
        from torch.nn.utils import stateless
        transformers.AutoModelForCausalLM  # the lazy module imports it here
    except Exception as e:  # noqa: BLE001 - any import failure skips
        skip("transformers", f"cannot import transformers: {str(e).splitlines()[0]}")
    conf = transformers.AutoConfig.for_model(
        mcfg["model_type"], **{k: v for k, v in mcfg.items() if k != "model_type"})
    model = transformers.AutoModelForCausalLM.from_config(
        conf, attn_implementation="eager").double().train()
    names = [k for k, _ in model.named_parameters()]

    def forward(P, cfg, ids, targets, attn_mask=None, key_mask=None):
        if attn_mask is not None or key_mask is not None:
            raise NotImplementedError("masks with --model-peer")
        out = stateless.functional_call(model, {k: P[k] for k in names}, (ids,),
                                        {"use_cache": False})
        logits = out.logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
            ignore_index=-100)
        if getattr(out, "aux_loss", None) is not None:
            loss = loss + model.config.router_aux_loss_coef * out.aux_loss
        return logits, loss
    return forward


def run_case(args, model, case, ck):
    model_json = os.path.join(R.CONFIGS, model + ".json")
    ds_json = os.path.join(R.CONFIGS, f"{model}_{case}.json")
    mcfg, tc = R.load_json(model_json), R.TrainCfg(R.load_json(ds_json))
    dsc = R.DscRun(args.dsc_run, os.path.join(args.workdir, f"{model}_{case}"))
    data = dsc.path("tokens.bin")
    # Fewer tokens than STEPS*A windows, so the batch start wraps modulo
    # N - B*T - 1 at non-multiples of B*T.
    tokens = R.random_tokens((2 * tc.A + 1) * tc.B * tc.T + 3,
                             mcfg["vocab_size"], seed=3)
    R.write_tokens(data, tokens)
    w0 = dsc.initial_weights(model_json, ds_json, data, dsc.path("w0.safetensors"))
    w0 = R.perturb(w0, seed=4)
    init = dsc.path("w0p.safetensors")
    R.save_safetensors(init, w0)

    got, log = dsc.train(model_json, ds_json, data, STEPS, init,
                         dsc.path("w5.safetensors"), dsc.path("log.jsonl"))
    if args.peer:
        make, types, dtype = args.peer_optimizer
        if tc.opt["type"].lower() not in types:
            return None
        saved = R.make_optimizer
        R.make_optimizer = make
        try:
            ref, rlog, gmax = R.reference_train(w0, mcfg, tc, tokens, STEPS,
                                                dtype=dtype)
        except Exception as e:  # noqa: BLE001 - e.g. no CPU kernel
            skip(args.peer, f"{args.peer} cannot run {tc.opt['type']}: "
                 f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        finally:
            R.make_optimizer = saved
        ref = {k: v.double() for k, v in ref.items()}
    elif args.model_peer:
        saved = R.forward
        R.forward = transformers_model_forward(mcfg)
        try:
            ref, rlog, gmax = R.reference_train(w0, mcfg, tc, tokens, STEPS)
        finally:
            R.forward = saved
    else:
        ref, rlog, gmax = R.reference_train(w0, mcfg, tc, tokens, STEPS)

    tag = f"{model}/{case}"
    print(f"--- {tag}: {tc.opt['type']} {tc.opt.get('params', {})}, "
          f"scheduler {tc.sched['type'] if tc.sched else 'none'}, "
          f"clip {tc.clip}, accumulation {tc.A}")
    if len(log) != STEPS:
        ck.failed.append(f"{tag} log")
        print(f"FAIL {tag}: log has {len(log)} lines, expected {STEPS}")
        return
    for s, (d, r) in enumerate(zip(log, rlog)):
        if d["step"] != s:
            ck.failed.append(f"{tag} log step")
            print(f"FAIL {tag}: log line {s} has step {d['step']}")
        print(f"     step {s}: loss {d['loss']:.6f} (ref {r['loss']:.6f}) "
              f"lr {d['lr']:.6e} (ref {r['lr']:.6e}) grad_norm "
              f"{d['grad_norm']:.5f} (ref {r['grad_norm']:.5f}) clip coef {r['clip']:.4f}")
        ck.check(f"{tag} step {s} loss", d["loss"], r["loss"])
        ck.check(f"{tag} step {s} grad_norm", d["grad_norm"], r["grad_norm"])
        # lr is logged as fp32
        ck.check(f"{tag} step {s} lr", d["lr"], r["lr"], tol=1e-6, tiny=1e-12)

    t = tc.opt["type"].lower()
    p = tc.opt.get("params", {})
    lr_sum = sum(r["lr"] for r in rlog)
    bound = 10.0 * lr_sum * (p.get("max_coeff", 10.0) if t == "lamb" else 1.0)
    gscale = max(g.max().item() for g in gmax.values())
    for k in ref:
        a = torch.from_numpy(got[k].astype(np.float64))
        b = ref[k]
        # Exactly-zero gradients (unused position rows, token type 1) are
        # deterministic and compared like everything else.
        dead = (gmax[k] > 0) & (gmax[k] <= 1e-9 * gscale)
        live = ~dead
        name = f"{tag} {k}"
        if dead.any() and t != "sgd":
            moved = (a[dead] - torch.from_numpy(w0[k].astype(np.float64))[dead]).abs().max().item()
            if moved > bound:
                ck.failed.append(name + " (zero-gradient elements)")
                print(f"FAIL {name}: {int(dead.sum())} zero-gradient elements moved "
                      f"{moved:.3e} > bound {bound:.3e}")
            elif not args.quiet:
                print(f"     {name}: {int(dead.sum())} zero-gradient elements moved "
                      f"{moved:.2e} <= {bound:.2e} (noise-driven, bound only)")
            ck.check(name, a[live], b[live], tiny=b.abs().max().item())
        elif t in ("adam8bit", "adamw8bit"):
            check_quantized(ck, name, a, b, args.tol)
        else:
            ck.check(name, a, b)
        if args.delta_tol:
            # Diagnostic: the 5-step update W5 - W0 itself. Adam-like
            # optimizers normalise small gradients, so expect ~1e-4..1e-3.
            w = torch.from_numpy(w0[k].astype(np.float64))
            ck.check(name + " delta", (a - w)[live], (b - w)[live], tol=args.delta_tol)
    return log, rlog


# 8-bit Adam stores each moment as the code nearest to its value; where
# float32 and float64 arithmetic put a value on either side of the midpoint
# between two codes the two runs store neighbouring codes, and that element
# moves differently from then on. FLIP_SHARE of a tensor's elements may
# exceed the tolerance, each by at most FLIP_TOL (a neighbouring code moves a
# step by a few percent of lr); the rest must meet the tolerance.
FLIP_SHARE, FLIP_TOL = 0.005, 1e-2


def check_quantized(ck, name, a, b, tol):
    denom = max(b.abs().max().item(), 1e-30)
    err = (a - b).abs() / denom
    over = int((err > tol).sum())
    share = over / max(1, err.numel())
    if over and share <= FLIP_SHARE and err.max().item() <= FLIP_TOL:
        ok = err <= tol
        ck.check(name + f" ({over} code-flip elements left out)", a[ok], b[ok],
                 tiny=denom)
        ck.check(name + " (code-flip elements)", a[~ok], b[~ok], tol=FLIP_TOL,
                 tiny=denom)
    else:
        ck.check(name, a, b, tol=tol)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    R.common_args(ap)
    ap.add_argument("--case", action="append",
                    help="configs/<model>_<case>.json; repeatable; default all")
    ap.add_argument("--delta-tol", type=float, default=0.0,
                    help="also compare W5 - W0 per tensor with this tolerance")
    ap.add_argument("--peer", choices=("transformers", "bitsandbytes"),
                    help="compare with the peer's own optimizer class")
    ap.add_argument("--model-peer", choices=("transformers",),
                    help="train the reference with transformers' own model "
                         "class instead of dsc_reference's forward")
    args = ap.parse_args()
    if args.peer:
        args.peer_optimizer = peer_optimizer(args.peer)
    R.setup_threads()
    R.philox_selftest()
    cases = args.case or cases_for(args.model)
    ck = R.Checker(args.tol, verbose=not args.quiet)
    clipped = False
    for c in cases:
        out = run_case(args, args.model, c, ck)
        if out:
            clipped |= any(r["clip"] < 1.0 for r in out[1])
    if not args.case and not args.peer and not args.model_peer and not clipped:
        print("FAIL: no case exercised gradient clipping (adjust the configs)")
        ck.failed.append("clipping coverage")
    what = (f" against {args.peer}" if args.peer else
            " against transformers' model" if args.model_peer else "")
    ck.finish(f"check_optimizers {args.model}{what} [{', '.join(cases)}]")


if __name__ == "__main__":
    main()
