#!/usr/bin/python3
"""Our PyTorch references against Hugging Face transformers' own model code.

dsc's numerical tests compare dsc with dsc_reference.py (gpt2_forward,
bert_forward, llama_forward), which is written from the models' public
descriptions. This script checks those references themselves against
transformers' GPT2LMHeadModel, BertForMaskedLM, LlamaForCausalLM,
Qwen2ForCausalLM, MistralForCausalLM, GemmaForCausalLM,
Gemma2ForCausalLM (soft-capping, sandwich norms), MixtralForCausalLM
(with its load-balancing loss), Qwen2MoeForCausalLM (unnormalised top-k
weights, the sigmoid-gated shared expert, a dense layer among the sparse
ones) and PhiForCausalLM
(phi_forward; its attention upcasts like the LLaMA family's): the same float64
weights (the model class's own initialisation, then dsc_reference.perturb),
the batch each
configs/<model>_fwd.json gives, and then logits, loss and the gradient of
every parameter. It also checks that the parameter names and shapes are
transformers' own, and that the llama3 rope frequencies are.

  scripts/install-transformers.sh        # pinned transformers into .pydeps
  /usr/bin/python3 check_transformers.py [--pydeps DIR] [--quiet]

Exact comparisons (tolerance --tol, 1e-10): transformers' LLaMA-family
models compute the RMSNorm and the attention softmax in float32 whatever
the model's dtype ("upcast to fp32"), their rotary cos/sin in float32, and
their labels= loss in float32. For the exact comparison those upcasts are
made float64 (the modeling module sees a torch whose float32 is float64;
nothing else of its code changes; GemmaRMSNorm, which upcasts with the
.float() method instead, runs its own formula with float64 for float32, see
gemma_norm_in_float64; Mixtral's and Qwen2-MoE's load-balancing loss
takes the mean of its expert mask with .float(), see
mixtral_balance_in_float64), the
reference computes cos/sin in
float32 as transformers does (llama_forward's rope_dtype), and the loss is
cross-entropy of transformers' float64 logits. A second, "as shipped"
comparison runs transformers unmodified against the float64 reference at
--shipped-tol (1e-5). The labels= loss (which shifts: HF's convention) is
compared with the reference loss on the same window's next-token targets.

BERT: dsc has no padding_idx (see bert_forward), so transformers' BERT is
built with pad_token_id None.

Prints "check_transformers: PASS (...)", or "check_transformers: SKIP
(<reason>)" and exits 0 where transformers cannot be imported, or the
failed tensors and exits 1.
"""

import argparse
import contextlib
import os
import sys
import types

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import dsc_reference as R  # noqa: E402

MIN_VERSION = (4, 45)  # head_dim in LlamaConfig; llama3 rope_scaling is 4.43
CASES = [
    # (name, model config, batch config, config overrides)
    ("gpt2", "gpt2", "gpt2_fwd", {}),
    ("bert", "bert", "bert_fwd", {}),
    ("llama", "llama", "llama_fwd", {}),
    ("llama3_tied", "llama3_tied", "llama3_tied_fwd", {}),
    ("qwen2", "qwen2", "qwen2_fwd", {}),
    ("mistral", "llama", "llama_fwd",  # llama.json run as MistralForCausalLM
     {"model_type": "mistral", "sliding_window": None}),
    ("gemma", "gemma", "gemma_fwd", {}),
    ("gemma2", "gemma2", "gemma2_fwd", {}),
    ("mixtral", "mixtral", "mixtral_fwd", {}),
    ("qwen2_moe", "qwen2_moe", "qwen2_moe_fwd", {}),
    ("phi", "phi", "phi_fwd", {}),
]


def skip(reason):
    print(f"check_transformers: SKIP ({reason})")
    sys.exit(0)


def import_transformers(pydeps):
    """The transformers module, from pydeps when it is there (else from the
    interpreter's own paths), or SKIP with the reason."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    have_dir = os.path.isdir(pydeps)
    if have_dir:
        sys.path.insert(0, pydeps)
    try:
        import transformers
        for n in ("AutoConfig", "AutoModelForCausalLM", "AutoModelForMaskedLM"):
            getattr(transformers, n)  # the lazy module imports them here
    except Exception as e:  # ImportError, or a version that breaks on import
        where = (f"from {pydeps}" if have_dir else
                 f"{pydeps} does not exist; run scripts/install-transformers.sh")
        skip(f"cannot import transformers ({where}): {type(e).__name__}: "
             f"{str(e).splitlines()[0] if str(e) else ''}")
    v = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    if v < MIN_VERSION:
        skip(f"transformers {transformers.__version__} is older than "
             f"{'.'.join(map(str, MIN_VERSION))} (no head_dim in LlamaConfig)")
    return transformers


@contextlib.contextmanager
def float32_is_float64(module):
    """Within the block, `torch.float32` (and its alias `torch.float`, which
    Mixtral's router softmax names) inside `module` (a transformers modeling
    file) means float64, so its "upcast to fp32" steps keep the float64
    model in float64. Method calls such as .float() are unchanged."""
    real = module.torch

    class _Torch(types.ModuleType):
        float32 = torch.float64
        float = torch.float64

        def __getattr__(self, name):
            return getattr(real, name)

    module.torch = _Torch("torch")
    try:
        yield
    finally:
        module.torch = real


@contextlib.contextmanager
def gemma_norm_in_float64(module, name="GemmaRMSNorm"):
    """GemmaRMSNorm (and Gemma2RMSNorm) upcast with .float() (a method, which
    float32_is_float64 leaves alone): within the block its forward is the
    same computation, _norm(x) * (1 + weight), with those two upcasts made
    float64."""
    cls = getattr(module, name)
    real = cls.forward

    def forward(self, x):
        return (self._norm(x.double()) * (1.0 + self.weight.double())).type_as(x)

    cls.forward = forward
    try:
        yield
    finally:
        cls.forward = real


@contextlib.contextmanager
def mixtral_balance_in_float64(module):
    """load_balancing_loss_func takes the mean of its one-hot expert mask
    with .float() (a method): within the block, without an attention mask,
    it is the same formula with that mean in float64."""
    real = module.load_balancing_loss_func

    def balance(gate_logits, num_experts=None, top_k=2, attention_mask=None):
        if attention_mask is not None:
            return real(gate_logits, num_experts, top_k, attention_mask)
        logits = torch.cat(list(gate_logits), dim=0)
        probs = F.softmax(logits, dim=-1)
        chosen = torch.topk(probs, top_k, dim=-1).indices
        tokens_per_expert = F.one_hot(chosen, num_experts).double().mean(0)
        return (tokens_per_expert * probs.mean(0)[None]).sum() * num_experts

    module.load_balancing_loss_func = balance
    try:
        yield
    finally:
        module.load_balancing_loss_func = real


def build(tf, cfg):
    mt = cfg["model_type"]
    kw = {k: v for k, v in cfg.items() if k != "model_type"}
    if mt == "bert":
        kw["pad_token_id"] = None
    conf = tf.AutoConfig.for_model(mt, **kw)
    cls = tf.AutoModelForMaskedLM if mt == "bert" else tf.AutoModelForCausalLM
    torch.manual_seed(0)
    model = cls.from_config(conf, attn_implementation="eager")
    return model.double().eval()


def next_token_targets(ids):
    """The targets HF's labels=ids stands for: each position's next token in
    the window, none (-100) for the last."""
    t = torch.full_like(ids, -100)
    t[:, :-1] = ids[:, 1:]
    return t


def run_case(tf, args, ck, groups, name, model_cfg, batch_cfg, over):
    cfg = R.load_json(os.path.join(R.CONFIGS, model_cfg + ".json"))
    cfg.update(over)
    tc = R.TrainCfg(R.load_json(os.path.join(R.CONFIGS, batch_cfg + ".json")))
    mt = cfg["model_type"]
    llama = mt in R.LLAMA_FAMILY
    phi = mt == "phi"
    rotary = llama or phi  # float32 upcasts and rotary tables as LLaMA's
    model = build(tf, cfg)
    hf_params = dict(model.named_parameters())  # tied aliases listed once

    # Parameter names and shapes: transformers' own are the convention.
    if llama:
        want = R.llama_param_shapes(cfg)
        got = {k: tuple(v.shape) for k, v in hf_params.items()}
        if got != want:
            ck.failed.append(f"{name} parameter set")
            print(f"FAIL {name}: transformers' parameters differ from llama_param_shapes: "
                  f"only in transformers {sorted(set(got) - set(want))}, only in the "
                  f"reference {sorted(set(want) - set(got))}, shapes "
                  f"{[(k, got[k], want[k]) for k in set(got) & set(want) if got[k] != want[k]]}")
            return
        start = len(ck.rows)
        for mod_name, mod in model.named_modules():
            if isinstance(getattr(mod, "inv_freq", None), torch.Tensor):
                ck.check(f"{name} rope inv_freq ({mod_name})", mod.inv_freq,
                         R.rope_inv_freq(cfg), tol=1e-6)
        if len(ck.rows) == start:
            ck.failed.append(f"{name} rope inv_freq")
            print(f"FAIL {name}: no rotary module with inv_freq in transformers' model")
        groups.append((f"{name} rope inv_freq (fp32 there)", start, len(ck.rows)))
    if phi:
        start = len(ck.rows)
        for mod_name, mod in model.named_modules():
            if isinstance(getattr(mod, "inv_freq", None), torch.Tensor):
                ck.check(f"{name} rope inv_freq ({mod_name})", mod.inv_freq,
                         R.rope_inv_freq(cfg, dim=R.phi_dims(cfg)[4]), tol=1e-6)
        if len(ck.rows) == start:
            ck.failed.append(f"{name} rope inv_freq")
            print(f"FAIL {name}: no rotary module with inv_freq in transformers' model")
        groups.append((f"{name} rope inv_freq (fp32 there)", start, len(ck.rows)))

    w0 = {k: v.detach().float().numpy() for k, v in hf_params.items()}
    w0 = R.perturb(w0, seed=2)
    with torch.no_grad():
        for k, v in hf_params.items():
            v.copy_(torch.from_numpy(w0[k]).double())

    tokens = R.random_tokens(4 * tc.B * tc.T + 7, cfg["vocab_size"], seed=1)
    x, y = R.batch_at(tokens, 0, 0, tc.B, tc.T, tc.A)
    if mt == "bert":
        ids, targets = R.mlm_mask(x.numpy(), tc.mlm_probability, tc.mask_token_id,
                                  cfg["vocab_size"], tc.seed, offset=0)
    else:
        ids, targets = x, y

    modes = [("fp64", args.tol)]
    if rotary:
        modes.append(("as shipped", args.shipped_tol))
    module = sys.modules[type(model).__module__]
    for mode, tol in modes:
        exact = mode == "fp64"
        tag = f"{name} [{mode}]"
        start = len(ck.rows)
        # transformers
        model.zero_grad(set_to_none=True)
        kw = {} if mt == "bert" else {"use_cache": False}
        ctx = contextlib.ExitStack()
        if rotary and exact:
            ctx.enter_context(float32_is_float64(module))
            if mt == "gemma":
                ctx.enter_context(gemma_norm_in_float64(module))
            if mt == "gemma2":
                ctx.enter_context(gemma_norm_in_float64(module, "Gemma2RMSNorm"))
            if mt in ("mixtral", "qwen2_moe"):
                ctx.enter_context(mixtral_balance_in_float64(module))
        with ctx:
            out = model(input_ids=ids, **kw)
            logits = out.logits
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1),
                                   ignore_index=-100)
            # MixtralForCausalLM with output_router_logits: the objective
            # its labels= loss returns adds the load-balancing loss.
            if getattr(out, "aux_loss", None) is not None:
                loss = loss + model.config.router_aux_loss_coef * out.aux_loss
            loss.backward()
            with torch.no_grad():
                labels = targets if mt == "bert" else ids
                hf_label_loss = model(input_ids=ids, labels=labels, **kw).loss
        # reference
        P = {k: torch.tensor(w0[k], dtype=torch.float64, requires_grad=True) for k in w0}
        rope_dtype = torch.float32 if exact else torch.float64
        if llama:
            rl, rloss = R.llama_forward(P, cfg, ids, targets, rope_dtype=rope_dtype)
        elif phi:
            rl, rloss = R.phi_forward(P, cfg, ids, targets, rope_dtype=rope_dtype)
        else:
            rl, rloss = R.forward(P, cfg, ids, targets)
        rloss.backward()
        with torch.no_grad():
            if mt == "bert":
                shifted = rloss
            elif llama:
                shifted = R.llama_forward(P, cfg, ids, next_token_targets(ids),
                                          rope_dtype=rope_dtype)[1]
            elif phi:
                shifted = R.phi_forward(P, cfg, ids, next_token_targets(ids),
                                        rope_dtype=rope_dtype)[1]
            else:
                shifted = R.forward(P, cfg, ids, next_token_targets(ids))[1]

        # transformers' labels= loss: ForCausalLMLoss takes logits.float()
        # (float32), for the LLaMA family and, from 4.48 on, for GPT-2 too.
        ck.check(f"{tag} HF labels= loss (shifted)", hf_label_loss, shifted,
                 tol=max(tol, 1e-6))
        groups.append((f"{tag} HF labels= loss", start, len(ck.rows)))
        start = len(ck.rows)
        ck.check(f"{tag} logits", logits.detach(), rl.detach(), tol=tol)
        ck.check(f"{tag} loss", loss.detach(), rloss.detach(), tol=tol)
        unused = [k for k, v in P.items() if v.grad is None]
        no_hf = [k for k, v in hf_params.items() if v.grad is None]
        if unused or no_hf:
            ck.failed.append(f"{tag} gradients")
            print(f"FAIL {tag}: no gradient in the reference for {unused}, "
                  f"in transformers for {no_hf}")
            continue
        tiny = 1e-3 * max(v.grad.abs().max().item() for v in P.values())
        for k in P:
            ck.check(f"{tag} grad.{k}", hf_params[k].grad, P[k].grad, tol=tol, tiny=tiny)
        groups.append((f"{tag} logits, loss, {len(P)} grads", start, len(ck.rows)))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pydeps", default=os.environ.get("DSC_PYDEPS", os.path.join(ROOT, ".pydeps")),
                    help="where scripts/install-transformers.sh installed transformers")
    ap.add_argument("--tol", type=float, default=1e-10)
    ap.add_argument("--shipped-tol", type=float, default=1e-5)
    ap.add_argument("--case", action="append", choices=[c[0] for c in CASES],
                    help="repeatable; default all")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    R.setup_threads()
    tf = import_transformers(args.pydeps)
    print(f"transformers {tf.__version__} ({os.path.dirname(tf.__file__)}), "
          f"torch {torch.__version__}")
    ck = R.Checker(args.tol, verbose=not args.quiet)
    groups = []
    for c in CASES:
        if args.case and c[0] not in args.case:
            continue
        run_case(tf, args, ck, groups, *c)
    for label, a, b in groups:
        rows = ck.rows[a:b]
        if rows:
            worst = max(rows, key=lambda r: r[1])
            print(f"     {label:52s} worst rel err {worst[1]:.2e} (tol {worst[2]:.0e}, {worst[0]})")
    ck.finish("check_transformers")


if __name__ == "__main__":
    main()
