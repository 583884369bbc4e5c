#!/usr/bin/python3
"""CPU training throughput: dsc (dsc-run train) vs PyTorch eager, same
GPT-2-shaped model, same AdamW + clipping, same data, same thread count.

  /usr/bin/python3 bench/bench_cpu.py --dsc-run build/bin/dsc-run [--steps 10]

dsc's tokens/s come from its --log-json (tokens_per_s of each step, which
times the whole step); PyTorch's from perf_counter around forward, backward,
clipping and optimizer step. The first --warmup steps (default 2) are
excluded from both. Threads: OMP_NUM_THREADS for dsc and
torch.set_num_threads for PyTorch, both --threads (default
$OMP_NUM_THREADS, else os.cpu_count()).
Must run under /usr/bin/python3 (Debian's torch).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time


def _threads_from_argv():
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return os.environ.get("OMP_NUM_THREADS") or str(os.cpu_count())


# OpenBLAS (under numpy and Debian's torch) sizes its thread pool when it is
# loaded, so the thread count must be in the environment before numpy is
# imported; setting it later leaves PyTorch's GEMMs on every core.
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = _threads_from_argv()

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "reference"))


def parse():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsc-run", default=os.path.join(HERE, "..", "build", "bin", "dsc-run"))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int,
                    default=int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or os.cpu_count())
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--only", choices=["dsc", "torch"], help="run one side only")
    ap.add_argument("--workdir", help="keep configs/data/logs here (default: temp dir)")
    ap.add_argument("--json", help="also write the results as JSON here")
    a = ap.parse_args()
    if a.steps <= a.warmup:
        ap.error("--steps must exceed --warmup")
    return a


def configs(a):
    model = {"model_type": "gpt2", "vocab_size": a.vocab, "n_positions": a.seq_len,
             "n_embd": a.n_embd, "n_layer": a.n_layer, "n_head": a.n_head,
             "activation_function": "gelu_new", "resid_pdrop": 0.0,
             "embd_pdrop": 0.0, "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-5,
             "initializer_range": 0.02, "tie_word_embeddings": True}
    ds = {"train_micro_batch_size_per_gpu": a.batch, "gradient_accumulation_steps": 1,
          "gradient_clipping": 1.0,
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95],
                                                    "eps": 1e-8, "weight_decay": 0.1}},
          "dsc": {"seed": 42, "seq_len": a.seq_len}}
    return model, ds


def bench_dsc(a, R, wd, model_json, ds_json, data):
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    log = os.path.join(wd, "dsc-log.jsonl")
    cmd = [os.path.abspath(a.dsc_run), "train", "--model", model_json, "--config", ds_json,
           "--data", data, "--steps", str(a.steps), "--log-json", log]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=wd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"dsc-run failed:\n{r.stdout}{r.stderr}")
    with open(log) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    tok = a.batch * a.seq_len
    timed = rows[a.warmup:]
    secs = sum(tok / r["tokens_per_s"] for r in timed)
    return {"tokens_per_s": tok * len(timed) / secs, "s_per_step": secs / len(timed),
            "losses": [r["loss"] for r in rows], "wall_s": wall}


def bench_torch(a, R, tokens, w0):
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    mcfg, ds = configs(a)
    tc = R.TrainCfg(ds)
    P = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True) for k, v in w0.items()}
    opt = R.make_optimizer(tc, P)  # torch.optim.AdamW, decay on rank >= 2
    params = list(P.values())
    times, losses = [], []
    for s in range(a.steps):
        x, y = R.batch_at(tokens, s, 0, a.batch, a.seq_len, 1)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        _, loss = R.gpt2_forward(P, mcfg, x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, tc.clip)
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    timed = times[a.warmup:]
    tok = a.batch * a.seq_len
    return {"tokens_per_s": tok * len(timed) / sum(timed),
            "s_per_step": sum(timed) / len(timed), "losses": losses}


def main():
    a = parse()
    # Same thread count for both sides (see the top of this file).
    assert os.environ["OMP_NUM_THREADS"] == str(a.threads)
    import dsc_reference as R
    wd = a.workdir or tempfile.mkdtemp(prefix="dsc-bench-")
    os.makedirs(wd, exist_ok=True)
    model, ds = configs(a)
    model_json = R.write_json(os.path.join(wd, "model.json"), model)
    ds_json = R.write_json(os.path.join(wd, "ds_config.json"), ds)
    tokens = R.random_tokens((a.steps + 1) * a.batch * a.seq_len + 1, a.vocab, seed=0)
    data = os.path.join(wd, "tokens.bin")
    R.write_tokens(data, tokens)
    # Both sides start from dsc's seeded initial weights.
    w0_path = os.path.join(wd, "w0.safetensors")
    subprocess.run([os.path.abspath(a.dsc_run), "train", "--model", model_json, "--config",
                    ds_json, "--data", data, "--steps", "0", "--save", w0_path],
                   check=True, stdout=subprocess.DEVNULL)
    w0 = R.load_safetensors(w0_path)
    nparams = sum(v.size for v in w0.values())

    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"warning: load average {load:.2f} before the run; other processes "
              f"share the cores and OpenMP/OpenBLAS spin-waiting makes multi-thread "
              f"numbers unreliable (compare with --threads 1)", file=sys.stderr)
    res = {}
    if a.only != "torch":
        res["dsc"] = bench_dsc(a, R, wd, model_json, ds_json, data)
    if a.only != "dsc":
        res["torch"] = bench_torch(a, R, tokens, w0)
    import torch
    shape = (f"GPT-2 L{a.n_layer} C{a.n_embd} H{a.n_head} V{a.vocab}, "
             f"B{a.batch} T{a.seq_len}, {nparams / 1e6:.2f}M params")
    print(f"\nCPU: {platform.processor() or platform.machine()}, {a.threads} thread(s), "
          f"{a.steps} steps ({a.warmup} warm-up excluded), AdamW + clip 1.0, fp32, "
          f"torch {torch.__version__}, OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}\n")
    print("| model | dsc tokens/s | PyTorch tokens/s | dsc / PyTorch |")
    print("| --- | ---: | ---: | ---: |")
    d = res.get("dsc", {}).get("tokens_per_s")
    t = res.get("torch", {}).get("tokens_per_s")
    fmt = lambda v: f"{v:,.0f}" if v else "-"
    ratio = f"{d / t:.2f}x" if d and t else "-"
    print(f"| {shape} | {fmt(d)} | {fmt(t)} | {ratio} |")
    for k, v in res.items():
        print(f"\n{k}: {v['s_per_step'] * 1e3:.0f} ms/step; losses "
              + " ".join(f"{x:.4f}" for x in v["losses"]))
    if a.json:
        R.write_json(a.json, {"shape": shape, "threads": a.threads, "steps": a.steps,
                              "loadavg_before": load,
                              "warmup": a.warmup, **res})


if __name__ == "__main__":
    main()
