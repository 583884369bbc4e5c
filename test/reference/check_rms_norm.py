#!/usr/bin/python3
"""dsc.rms_norm forward and backward against PyTorch, through training.

Trains test/Numerics/Inputs/rms-norm-lm.mlir (embedding, RMSNorm, tied
logits, cross-entropy) with dsc for a few SGD steps from perturbed weights
(the RMSNorm weight is not all ones), and the same model written in PyTorch
(float64, Hugging Face's LlamaRMSNorm formula) from the same weights on the
same batches. The losses of every step and the final weights must agree:
each step's update is lr times the gradient, so a wrong forward or backward
shows in both.

  check_rms_norm.py --dsc-run dsc-run --dsc-opt dsc-opt --model IR --workdir W
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsc_reference as R  # noqa: E402

B, T, VOCAB, EPS, LR, STEPS = 2, 4, 32, 1e-5, 0.5, 4


def torch_loss(P, x, y):
    h = P["wte"][x]
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * P["norm"]
    logits = h @ P["wte"].T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                             y.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dsc-run", required=True)
    ap.add_argument("--dsc-opt", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    path = lambda name: os.path.join(a.workdir, name)  # noqa: E731

    step = path("step.mlir")
    subprocess.run([a.dsc_opt, a.model,
                    f"--dsc-train-pipeline=build-train-step={{optimizer=sgd lr={LR}}}", "-o", step],
                   check=True)
    tokens = R.random_tokens(50, VOCAB, seed=11)
    R.write_tokens(path("tokens.bin"), tokens)
    subprocess.run([a.dsc_run, "train", step, "--data", path("tokens.bin"),
                    "--steps", "0", "--save", path("w0.safetensors")],
                   check=True, stdout=subprocess.DEVNULL)
    w0 = R.load_safetensors(path("w0.safetensors"))
    rng = np.random.RandomState(5)
    w0["norm"] = rng.uniform(0.5, 1.5, size=w0["norm"].shape).astype(np.float32)
    w0["wte"] = (w0["wte"] * 20).astype(np.float32)
    R.save_safetensors(path("w0p.safetensors"), w0)
    subprocess.run([a.dsc_run, "train", step, "--data", path("tokens.bin"),
                    "--init-from", path("w0p.safetensors"), "--steps",
                    str(STEPS), "--log-json", path("log.json"), "--save",
                    path("w1.safetensors")],
                   check=True, stdout=subprocess.DEVNULL)
    losses = [json.loads(line)["loss"] for line in open(path("log.json"))]
    w1 = R.load_safetensors(path("w1.safetensors"))

    P = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
         for k, v in w0.items()}
    worst = 0.0
    for s in range(STEPS):
        x, y = R.batch_at(tokens, s, 0, B, T, 1)
        loss = torch_loss(P, x, y)
        for p in P.values():
            p.grad = None
        loss.backward()
        err = abs(losses[s] - loss.item()) / abs(loss.item())
        worst = max(worst, err)
        print(f"step {s}: dsc {losses[s]:.7f} torch {loss.item():.7f} "
              f"rel err {err:.2e}")
        if err > 1e-5:
            sys.exit(f"step {s}: loss differs by {err:.2e} (tol 1e-5)")
        with torch.no_grad():
            for p in P.values():
                p -= LR * p.grad
    for name, p in P.items():
        want = p.detach().numpy()
        err = float(np.max(np.abs(w1[name] - want)) / np.max(np.abs(want)))
        worst = max(worst, err)
        print(f"{name}: final weights rel err {err:.2e}")
        if err > 1e-5:
            sys.exit(f"{name}: final weights differ by {err:.2e} (tol 1e-5)")
    print(f"check_rms_norm: PASS (worst {worst:.2e})")


if __name__ == "__main__":
    main()
