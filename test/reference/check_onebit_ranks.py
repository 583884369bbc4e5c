"""1-bit Adam, 1-bit LAMB and 0/1 Adam on W MPI ranks (dsc-run train
under mpirun) against a float64 PyTorch simulation of W DeepSpeed workers:
every parameter after the last step (rank 0's) and the logged loss of
every step.

  /usr/bin/python3 check_onebit_ranks.py --dsc-run build/bin/dsc-run \
      --mpirun "mpirun -np" --ranks 2 --workdir /tmp/ref-onebit \
      [--case onebitadam --case onebitlamb]

The one-rank checks (check_optimizers.py) compare the optimizers where
nothing is compressed; this one compares the compression stage itself. Each
simulated worker w computes its gradient on its rows of the global batch
(rows [w*B, (w+1)*B), as dsc's ranks read them), clipped by its own norm in
the compression stage (DeepSpeed's engine clips local gradients once it
stops all-reducing them) and by the all-reduced gradient's norm in the
warm-up. The compression stage follows deepspeed/runtime/fp16/onebit/
adam.py and lamb.py with deepspeed/runtime/comm/nccl.py's
compressed_allreduce, written out here: every worker's momentum from its
own gradient, worker error feedback (y = m + e, scale ||y||/sqrt(n), sign
with 0 -> +1, e = y - scale*sign), server j averaging chunk j of every
worker, server error feedback, the result gathered; the momentum then
masked where the frozen variance is 0 (exp_avg_mask, after the exchange as
in DeepSpeed). dsc compresses each tensor on its own, padded to a multiple
of W*lcm(W, 8) (README, "1-bit Adam"); so does this simulation. 0/1 Adam's
local steps let each simulated rank keep its own parameters, momentum and
accumulator until a synchronisation (zero_one_ranks_train).

The model is the LLaMA config: it has no parameter whose gradient is zero
up to rounding (GPT-2's attention key bias is one: its momentum's signs are
rounding noise, which no two implementations share).

Tolerance: the loss of every step within --tol relative; per tensor, all
elements within --tol of its largest magnitude except at most
--flip-fraction of them. Those exceptions are inherent to comparing a sign
function across precisions, not slack for errors: an element whose frozen
variance is tiny (an embedding row seen once in the warm-up, v ~ 1e-8 of
the median) moves by lr * scale / sqrt(v) (12.6 in one compressed step
with the whole vocabulary in the data), so fp32 and fp64 differ there by
~0.4% of that move; the models then differ by ~1e-4 and in the next
compressed steps the signs of the elements sitting that close to zero
(~0.1% per tensor) flip. The data therefore uses a quarter of the
vocabulary, each token several times in the warm-up; then at most one
element of a tensor differs. A semantic difference changes most elements
of every tensor (without the server's error feedback, 44 of the 54 checks
fail).
"""

import argparse
import json
import math
import os
import shlex
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsc_reference as R  # noqa: E402

# Steps per case: 1-bit Adam and LAMB 3 warm-up and 3 compressed steps
# (freeze_step 3); 0/1 Adam (var_freeze_step 6, var_update_scaler 2,
# local_step_scaler 2, local_step_clipper 2): full, full, full, 1-bit,
# full, 1-bit, sync, sync, sync, local, sync. Its eps is 1e-4: with a
# variance from a few full steps, m / (sqrt(v) + 1e-7) amplifies the
# rounding of near-zero variances as a late freeze does (see below).
STEPS = {"onebitadam": 6, "onebitlamb": 6, "zerooneadam": 11}


class CompressedAllReduce:
    """DeepSpeed's compressed_allreduce for W simulated ranks, one state
    (worker errors, server errors) per tensor."""

    def __init__(self, W):
        self.W = W
        self.state = {}

    def __call__(self, key, ms):
        W = self.W
        n = ms[0].numel()
        unit = W * (W * 8 // math.gcd(W, 8))
        P = (n + unit - 1) // unit * unit
        chunk = P // W
        st = self.state.setdefault(key, {
            "worker": [torch.zeros(P, dtype=torch.float64) for _ in range(W)],
            "server": [torch.zeros(chunk, dtype=torch.float64) for _ in range(W)]})
        signs, scales = [], []
        for w in range(W):
            y = torch.zeros(P, dtype=torch.float64)
            y[:n] = ms[w].reshape(-1)
            y += st["worker"][w]
            s = y.norm().item() / math.sqrt(P)
            sign = torch.where(y < 0, -1.0, 1.0).to(torch.float64)
            st["worker"][w] = y - s * sign
            signs.append(sign)
            scales.append(s)
        out = []
        for j in range(W):
            acc = sum(signs[w][j * chunk:(j + 1) * chunk] * (scales[w] / W)
                      for w in range(W))
            y = acc + st["server"][j]
            s = y.norm().item() / math.sqrt(chunk)
            sign = torch.where(y < 0, -1.0, 1.0).to(torch.float64)
            st["server"][j] = y - s * sign
            out.append(s * sign)
        return torch.cat(out)[:n].reshape(ms[0].shape)


@torch.no_grad()
def compressed_adam_step(opt, params, worker_grads, car):
    """OnebitAdam after freeze_step on W ranks. `params` maps id(p) to p's
    index in each worker's gradient list."""
    opt.t += 1
    for g in opt.param_groups:
        lr, wd = g["lr"], g["weight_decay"]
        for p in g["params"]:
            k = params[id(p)]
            st = opt.state[id(p)]
            m, v = st["m"], st["v"]
            ms = [m * opt.b1 + (1 - opt.b1) * wg[k] for wg in worker_grads]
            m.copy_(car(k, ms) * (v != 0).to(m.dtype))
            p.sub_(lr * (m / (v.sqrt() + opt.eps) + wd * p))


@torch.no_grad()
def compressed_lamb_step(opt, params, worker_grads, car):
    """OnebitLamb after freeze_step on W ranks (OneBitLambRef's compression
    stage with the momentum exchanged)."""
    opt.t += 1
    if opt.t == opt.freeze_step + 1:
        opt.start_compression()
    for g, p in opt._params():
        lr, wd = g["lr"], g["weight_decay"]
        k = params[id(p)]
        st = opt.state[id(p)]
        m, v, scale = st["m"], st["v"], st["scale"]
        last = m.clone()
        ms = [(m * opt.b1 + (1 - opt.b1) * wg[k]) * scale for wg in worker_grads]
        m.copy_(car(k, ms) / scale * (v != 0).to(m.dtype))
        opt.frozen_update(p, st, last, lr, wd)


@torch.no_grad()
def zero_one_ranks_train(P0, mcfg, tc, tokens, steps, W):
    """ZeroOneAdam on W simulated ranks: [per-step loss], rank 0's final
    parameters and frozen variances. Full steps all-reduce the gradient
    (clipped by the mean's norm) and update m and v; 1-bit gradient steps
    exchange each rank's clipped gradient compressed, m takes the mean;
    after var_freeze_step the compression errors are zeroed once and each
    rank takes local steps with its own parameters, momentum and update
    accumulator u, and at a synchronisation p -= u, w = compressed mean of
    u * (sqrt(v) + eps), p += w / (sqrt(v) + eps), m = -w / sum(lr), u = 0
    (DeepSpeed's zoadam.py; README, "0/1 Adam")."""
    names = list(P0)
    ranks = [{k: torch.tensor(P0[k], dtype=torch.float64) for k in names}
             for _ in range(W)]
    o = tc.opt["params"]
    policy = R.make_optimizer(tc, {k: ranks[0][k] for k in names})
    b1, b2, eps, lr = policy.b1, policy.b2, policy.eps, o["lr"]
    decay = {k: o.get("weight_decay", 0.0) if ranks[0][k].dim() >= 2 else 0.0
             for k in names}
    zeros = lambda: {k: torch.zeros_like(ranks[0][k]) for k in names}
    m, u = [zeros() for _ in range(W)], [zeros() for _ in range(W)]
    v = zeros()
    car = CompressedAllReduce(W)
    lr_sum, errors_reset, losses = 0.0, False, []
    for s in range(steps):
        grads, total = [], 0.0
        for w in range(W):
            with torch.enable_grad():
                P = {k: t.clone().requires_grad_(True) for k, t in ranks[w].items()}
                x, y = R.batch_at(tokens, s, w, tc.B, tc.T, W)
                _, loss = R.forward(P, mcfg, x, y)
                loss.backward()
            total += loss.item() / W
            grads.append([P[k].grad.detach().clone() for k in names])
        losses.append(total)
        full, frozen, sync = policy.next_step()
        mask = {k: (v[k] != 0).to(torch.float64) for k in names}
        if full:
            mean = [sum(g[i] for g in grads) / W for i in range(len(names))]
            R.clip_gradients(mean, tc.clip)
            for i, k in enumerate(names):
                m[0][k] = b1 * m[0][k] + (1 - b1) * mean[i]
                v[k] = b2 * v[k] + (1 - b2) * mean[i] * mean[i]
        else:
            for g in grads:
                R.clip_gradients(g, tc.clip)
        if not frozen:
            for i, k in enumerate(names):
                if not full:
                    gbar = car(i, [g[i] for g in grads])
                    m[0][k] = (b1 * m[0][k] + (1 - b1) * gbar) * mask[k]
                upd = m[0][k] / (v[k].sqrt() + eps) + decay[k] * ranks[0][k]
                ranks[0][k] -= lr * upd
                for w in range(1, W):
                    ranks[w][k].copy_(ranks[0][k])
                    m[w][k].copy_(m[0][k])
            policy.finish_step(full, frozen)
            continue
        if not errors_reset:  # the errors held gradients, not updates
            car.state.clear()
            errors_reset = True
        lr_sum += lr
        for w in range(W):
            for i, k in enumerate(names):
                m[w][k] = (b1 * m[w][k] + (1 - b1) * grads[w][i]) * mask[k]
                upd = m[w][k] / (v[k].sqrt() + eps) + decay[k] * ranks[w][k]
                ranks[w][k] -= lr * upd
                u[w][k] -= lr * upd
        if sync:
            for i, k in enumerate(names):
                denom = v[k].sqrt() + eps
                wbar = car(i, [u[w][k] * denom for w in range(W)]) * mask[k]
                for w in range(W):
                    ranks[w][k] += -u[w][k] + wbar / denom
                    m[w][k] = -wbar / lr_sum
                    u[w][k].zero_()
            lr_sum = 0.0
        policy.finish_step(full, frozen)
    return losses, ranks[0]


def reference_train_ranks(P0, mcfg, tc, tokens, steps, W):
    """[per-step loss], final params of W simulated DeepSpeed workers."""
    names = list(P0)
    P = {k: torch.tensor(P0[k], dtype=torch.float64, requires_grad=True) for k in names}
    params = [P[k] for k in names]
    opt = R.make_optimizer(tc, P)
    kind = tc.opt["type"].lower()
    freeze = tc.opt["params"]["freeze_step"]
    car = CompressedAllReduce(W)
    lr = tc.opt["params"]["lr"]
    for g in opt.param_groups:
        g["lr"] = lr
    losses = []
    for s in range(steps):
        worker_grads, total = [], 0.0
        for w in range(W):
            for v in params:
                v.grad = None
            x, y = R.batch_at(tokens, s, w, tc.B, tc.T, W)
            _, loss = R.forward(P, mcfg, x, y)
            loss.backward()
            total += loss.item() / W
            worker_grads.append([v.grad.detach().clone() for v in params])
        losses.append(total)
        if s + 1 <= freeze:
            mean = [sum(wg[k] for wg in worker_grads) / W for k in range(len(params))]
            R.clip_gradients(mean, tc.clip)
            for v, g in zip(params, mean):
                v.grad = g
            opt.step()
            continue
        for wg in worker_grads:
            R.clip_gradients(wg, tc.clip)
        step = compressed_adam_step if kind == "onebitadam" else compressed_lamb_step
        step(opt, {id(v): k for k, v in enumerate(params)}, worker_grads, car)
    return losses, {k: v.detach() for k, v in P.items()}


def run_case(args, case, ck, steps):
    model = "llama"
    model_json = os.path.join(R.CONFIGS, model + ".json")
    # Not configs/llama_<case>.json: check_optimizers.py runs every one of
    # those on one rank.
    ds_json = os.path.join(R.CONFIGS, "onebit-ranks", case + ".json")
    mcfg, tc = R.load_json(model_json), R.TrainCfg(R.load_json(ds_json))
    if tc.A != 1 or tc.sched:
        raise SystemExit(f"{ds_json}: the simulation covers accumulation 1 "
                         "and a constant learning rate")
    W = args.ranks
    dsc = R.DscRun(args.dsc_run, os.path.join(args.workdir, f"{case}-{W}"))
    data = dsc.path("tokens.bin")
    # Tokens from a quarter of the vocabulary: each appears several times in
    # the warm-up, so no embedding row has a tiny nonzero variance (the
    # unused rows' variance is exactly 0, and their momentum masked).
    tokens = R.random_tokens((steps + 1) * W * tc.B * tc.T + 3,
                             mcfg["vocab_size"] // 4, seed=5)
    R.write_tokens(data, tokens)
    w0 = R.perturb(dsc.initial_weights(model_json, ds_json, data, dsc.path("w0.safetensors")),
                   seed=6)
    init = dsc.path("w0p.safetensors")
    R.save_safetensors(init, w0)
    out, log_json = dsc.path("w.safetensors"), dsc.path("log.jsonl")
    cmd = shlex.split(args.mpirun) + [str(W), dsc.exe, "train", "--model", model_json,
                                      "--config", ds_json, "--data", data,
                                      "--steps", str(steps), "--init-from", init,
                                      "--save", out, "--log-json", log_json]
    r = subprocess.run(cmd, cwd=dsc.workdir, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    got = R.load_safetensors(out)
    with open(log_json) as f:
        log = [json.loads(line) for line in f if line.strip()]
    train = (zero_one_ranks_train if tc.opt["type"].lower() == "zerooneadam"
             else reference_train_ranks)
    rlosses, ref = train(w0, mcfg, tc, tokens, steps, W)
    tag = f"{case} on {W} ranks"
    print(f"--- {tag}: {tc.opt['type']} {tc.opt.get('params', {})}, clip {tc.clip}")
    if len(log) != steps:
        ck.failed.append(f"{tag} log")
        print(f"FAIL {tag}: log has {len(log)} lines, expected {steps}")
        return
    for s, (d, rl) in enumerate(zip(log, rlosses)):
        print(f"     step {s}: loss {d['loss']:.6f} (ref {rl:.6f})")
        ck.check(f"{tag} step {s} loss", d["loss"], rl)
    for k, b in ref.items():
        a = torch.from_numpy(got[k].astype(np.float64))
        flipped = (a - b).abs() > args.tol * b.abs().max()
        budget = max(1, int(args.flip_fraction * b.numel()))
        if int(flipped.sum()) > budget:
            ck.failed.append(f"{tag} {k}")
            print(f"FAIL {tag} {k}: {int(flipped.sum())} of {b.numel()} elements "
                  f"differ, more than the {budget} a rounding-decided sign explains")
            continue
        if flipped.any() and not args.quiet:
            print(f"     {tag} {k}: {int(flipped.sum())} of {b.numel()} elements "
                  "differ (signs decided by rounding; see the docstring)")
        ck.check(f"{tag} {k}", a[~flipped], b[~flipped], tiny=b.abs().max().item())


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dsc-run", default="dsc-run")
    ap.add_argument("--mpirun", required=True,
                    help="the launcher up to its rank count, e.g. 'mpirun -np'")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int,
                    help="steps of every case (default: per case, STEPS)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--flip-fraction", type=float, default=0.005,
                    help="elements per tensor allowed to differ by more than --tol")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--case", action="append",
                    help="configs/onebit-ranks/<case>.json; default all three")
    args = ap.parse_args()
    R.setup_threads()
    cases = args.case or list(STEPS)
    ck = R.Checker(args.tol, verbose=not args.quiet)
    for c in cases:
        run_case(args, c, ck, args.steps or STEPS[c])
    ck.finish(f"check_onebit_ranks {args.ranks} ranks [{', '.join(cases)}]")


if __name__ == "__main__":
    main()
