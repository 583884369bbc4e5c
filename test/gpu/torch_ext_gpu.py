"""Checks launchers of dsc-translate --emit-torch-extension against torch ops on a GPU.

usage: torch_ext_gpu.py F32_DIR BF16_DIR BUILD_DIR

F32_DIR: the extension of GPT-2 tiny's fp32 step, dropout 0; BF16_DIR: the
bf16 one (activations stored as bf16). Each is JIT-built under BUILD_DIR
with torch.utils.cpp_extension. Every check prints one line; a mismatch
raises with the largest error (exit 1), as does a status or an error
message other than the expected one.

Tolerances: fp32 kernels compute in f32 with a different reduction order
than torch, so 1e-5 absolute + 1e-5 relative on outputs of size ~1 (1e-4 on
gradients, which sum over 512 rows); bf16 stores round to bf16 (8 bits of
mantissa), so 2^-7 relative plus 1e-2 absolute.
"""
import importlib
import os
import sys

import torch
import torch.nn.functional as F


def load(ext_dir, build_dir):
    sys.path.insert(0, ext_dir)
    sys.modules.pop("dsc_ext", None)
    dsc_ext = importlib.import_module("dsc_ext")
    sys.path.pop(0)
    os.makedirs(build_dir, exist_ok=True)
    dsc_ext.load(build_directory=build_dir)
    return dsc_ext


def launcher(ext, op, x_dtype="float32", **attrs):
    """The first launcher of `op` whose first tensor has dtype x_dtype and
    whose baked-in attributes include `attrs`."""
    for name, info in ext.LAUNCHERS.items():
        first = next((p for p in info["params"] if p["kind"] == "tensor"), None)
        if (info["op"] == op and first and first["dtype"] == x_dtype
                and all(info["attrs"].get(k) == v for k, v in attrs.items())):
            return getattr(ext, name), info
    raise LookupError("no %s launcher on %s with %s" % (op, x_dtype, attrs))


def shape(info, param):
    return next(p["shapes"][0] for p in info["params"] if p["name"] == param)


def close(what, got, want, atol, rtol):
    err = (got.float() - want.float()).abs().max().item()
    if not torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol):
        raise AssertionError("%s: max abs error %.3g (atol %g, rtol %g)" % (what, err, atol, rtol))
    print("%s: ok (max abs error %.1e)" % (what, err))


def expect(what, got, want):
    if got != want:
        raise AssertionError("%s: got %r, want %r" % (what, got, want))
    print("%s: %r" % (what, got))


def main(f32_dir, bf16_dir, build_dir):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    ext = load(f32_dir, os.path.join(build_dir, "f32"))

    fn, info = launcher(ext, "LayerNorm")
    eps = info["attrs"]["epsilon"]
    x = torch.randn(shape(info, "x"), device=dev)
    C = x.shape[-1]
    gamma, beta = torch.randn(C, device=dev), torch.randn(C, device=dev)
    y = torch.empty_like(x)
    fn(x, gamma, beta, y)
    close("LayerNorm f32", y, F.layer_norm(x, (C,), gamma, beta, eps), 1e-5, 1e-5)

    fn, info = launcher(ext, "LayerNormGrad")
    dy = torch.randn(shape(info, "dy"), device=dev)
    x = torch.randn_like(dy).requires_grad_()
    g = torch.randn(C, device=dev).requires_grad_()
    b = torch.zeros(C, device=dev).requires_grad_()
    F.layer_norm(x, (C,), g, b, eps).backward(dy)
    args = {"dy": dy, "x": x.detach(), "gamma": g.detach()}
    if any(p["name"] == "dres" for p in info["params"]):
        args["dres"] = torch.zeros_like(dy)
    outs = {"dx": torch.empty_like(dy), "dgamma": torch.empty(C, device=dev),
            "dbeta": torch.empty(C, device=dev)}
    fn(*[args.get(p["name"], outs.get(p["name"])) for p in info["params"]])
    close("LayerNormGrad dx", outs["dx"], x.grad, 1e-4, 1e-4)
    close("LayerNormGrad dgamma", outs["dgamma"], g.grad, 1e-4, 1e-4)
    close("LayerNormGrad dbeta", outs["dbeta"], b.grad, 1e-4, 1e-4)

    # The fused attention (dropout rate 0: the Philox arguments are unused).
    fn, info = launcher(ext, "Attention", rate=0.0)
    scale, causal = info["attrs"]["scale"], bool(info["attrs"]["causal"])
    q, k, v = (torch.randn(shape(info, n), device=dev) for n in ("q", "k", "v"))
    out, lse = torch.empty_like(q), torch.empty(shape(info, "lse"), device=dev)
    fn(0, 0, 0, q, k, v, out, lse)
    s = scale * q @ k.transpose(-1, -2)
    if causal:
        T = s.shape[-1]
        s = s.masked_fill(torch.ones(T, T, device=dev, dtype=torch.bool).triu(1),
                          float("-inf"))
    close("Attention f32 (causal=%d) out" % causal, out,
          F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale),
          1e-5, 1e-5)
    close("Attention f32 log-sum-exp", lse, torch.logsumexp(s, -1), 1e-5, 1e-5)

    fn, info = launcher(ext, "BiasGelu", approximation="tanh")
    x = torch.randn(shape(info, "x"), device=dev)
    bias = torch.randn(x.shape[-1], device=dev)
    y = torch.empty_like(x)
    fn(x, bias, y)
    close("BiasGelu f32", y, F.gelu(x + bias, approximate="tanh"), 1e-5, 1e-5)

    fn, info = launcher(ext, "CrossEntropy")
    logits = torch.randn(shape(info, "logits"), device=dev)
    V = logits.shape[-1]
    labels = torch.randint(0, V, shape(info, "labels"), device=dev, dtype=torch.int32)
    loss = torch.empty((), device=dev)
    fn(logits, labels, loss)
    want = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1).long())
    close("CrossEntropy f32", loss, want, 1e-5, 1e-5)
    expect("status after the f32 kernels", ext.take_status(), (0, "ok"))
    labels.view(-1)[3] = V  # out of range: recorded, not a trap
    fn(logits, labels, loss)
    code, message = ext.take_status()
    expect("status after a bad label", message.split(": ", 1)[1],
           "cross_entropy: a label is out of range [0,%d) and not ignore_index -100" % V)
    expect("status after take_status", ext.take_status(), (0, "ok"))

    fn, info = launcher(ext, "LayerNorm")
    try:
        fn(torch.zeros(1, device=dev), gamma, beta, y)
        raise AssertionError("wrong shape: the launcher accepted x of shape [1]")
    except ValueError as e:
        expect("wrong shape", str(e).split(": ", 1)[1],
               "argument 'x' must have shape %s, got [1]" % shape(info, "x"))

    ext = load(bf16_dir, os.path.join(build_dir, "bf16"))
    fn, info = launcher(ext, "LayerNorm", x_dtype="bfloat16")
    dtype = {p["name"]: getattr(torch, p["dtype"]) for p in info["params"]}
    x = torch.randn(shape(info, "x"), device=dev).to(dtype["x"])
    gamma, beta = torch.randn(C, device=dev), torch.randn(C, device=dev)
    y = torch.empty(x.shape, device=dev, dtype=dtype["y"])
    fn(x, gamma, beta, y)
    want = F.layer_norm(x.float(), (C,), gamma, beta, info["attrs"]["epsilon"])
    close("LayerNorm %s" % x.dtype, y, want, 1e-2, 2 ** -7)
    torch.cuda.synchronize()
    print("PASS: the torch extension's launchers match torch")


if __name__ == "__main__":
    main(*sys.argv[1:4])
