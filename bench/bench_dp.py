#!/usr/bin/python3
"""Data parallelism on 2 CPU ranks: dsc (mpirun, ZeRO stages 0-3) against
PyTorch DDP and DDP + ZeroRedundancyOptimizer (ZeRO-1) over gloo, on the
same GPT-2-shaped model, data, AdamW + clipping, one thread per rank.

  /usr/bin/python3 bench/bench_dp.py [--dsc-run build/bin/dsc-run] [--steps 12]

Tokens/s: the global batch (train_batch_size * seq_len tokens) over the mean
step time after --warmup steps (dsc: its --log-json tokens_per_s; PyTorch:
perf_counter on rank 0 around forward, backward with DDP's all-reduce,
clipping and the optimizer step). Peak memory: the largest peak RSS of the
job's ranks (getrusage of the waited-for processes), which includes each
runtime's own footprint.

PyTorch FSDP, the peer of ZeRO-2 (SHARD_GRAD_OP) and ZeRO-3 (FULL_SHARD),
needs a newer torch than Debian's 1.13 (whose FSDP fails to import under
Python 3.11 and refuses CPU-only execution): scripts/install-bench-torch.sh
puts torch 2.4.1 into .venv-bench-torch, and this script runs its FSDP
ranks under that environment's python (--fsdp-python), the model wrapped as
one FSDP unit (the reference model is one module); without it FSDP is
reported as n/a with the reason. Must run under /usr/bin/python3 (Debian's
torch).
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = "1"

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "reference"))
import dsc_reference as R  # noqa: E402

RANKS = 2


def parse():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsc-run", default=os.path.join(HERE, "..", "build", "bin", "dsc-run"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8, help="rows per rank")
    ap.add_argument("--json", help="also write the results as JSON here")
    ap.add_argument("--fsdp-python",
                    default=os.path.join(HERE, "..", ".venv-bench-torch", "bin", "python"),
                    help="a python whose torch runs FSDP on CPU "
                         "(scripts/install-bench-torch.sh)")
    # Internal: run one PyTorch peer with the inputs in this directory and
    # print its results as JSON (how the FSDP ranks run under --fsdp-python).
    ap.add_argument("--peer", help=argparse.SUPPRESS)
    ap.add_argument("--peer-inputs", help=argparse.SUPPRESS)
    ap.add_argument("--peer-port", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.steps <= a.warmup:
        ap.error("--steps must exceed --warmup")
    return a


def configs(a, stage):
    model = {"model_type": "gpt2", "vocab_size": a.vocab, "n_positions": a.seq_len,
             "n_embd": a.n_embd, "n_layer": a.n_layer, "n_head": a.n_head,
             "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    ds = {"train_batch_size": a.batch * RANKS, "gradient_accumulation_steps": 1,
          "gradient_clipping": 1.0,
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.1}},
          "zero_optimization": {"stage": stage},
          "dsc": {"seed": 42, "seq_len": a.seq_len}}
    return model, ds


def children_peak_mib():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def bench_dsc(a, wd, data, stage):
    model, ds = configs(a, stage)
    model_json = R.write_json(os.path.join(wd, "model.json"), model)
    ds_json = R.write_json(os.path.join(wd, f"ds{stage}.json"), ds)
    log = os.path.join(wd, f"dsc{stage}.jsonl")
    # A fresh child per run, so that RUSAGE_CHILDREN's peak is this run's.
    code = ("import resource, subprocess, sys; "
            "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run(
        [sys.executable, "-c", code, shutil.which("mpirun"), "-np", str(RANKS),
         "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1",
         os.path.abspath(a.dsc_run), "train", "--model", model_json, "--config", ds_json,
         "--data", data, "--steps", str(a.steps), "--log-json", log],
        check=True, stdout=subprocess.PIPE, text=True).stdout
    rows = [json.loads(l) for l in open(log)]
    timed = rows[a.warmup:]
    tok = a.batch * RANKS * a.seq_len
    secs = sum(tok / r["tokens_per_s"] for r in timed)
    return {"tokens_per_s": tok * len(timed) / secs, "peak_rss_mib": int(out) / 1024,
            "loss0": rows[0]["loss"], "comm_bytes": rows[-1]["comm_bytes"]}


# The PyTorch peers: DDP, DDP with ZeroRedundancyOptimizer (ZeRO-1), and FSDP
# with ZeRO-2's and ZeRO-3's sharding.
PEERS = {"ddp": "PyTorch DDP", "zero1": "PyTorch DDP + ZeroRedundancyOptimizer",
         "fsdp-grad": "PyTorch FSDP SHARD_GRAD_OP", "fsdp-full": "PyTorch FSDP FULL_SHARD"}


def torch_worker(rank, a, w0, tokens, peer, port, results):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    mcfg, ds = configs(a, 0)
    tc = R.TrainCfg(dict(ds, train_micro_batch_size_per_gpu=a.batch))

    class Gpt2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.names = list(w0)
            self.p = torch.nn.ParameterList(
                torch.nn.Parameter(torch.tensor(w0[k], dtype=torch.float32))
                for k in self.names)

        def forward(self, x, y):
            return R.gpt2_forward(dict(zip(self.names, self.p)), mcfg, x, y)[1]

    module = Gpt2()
    # The parameters' ranks before FSDP flattens them (use_orig_params keeps
    # the same tensors for the optimizer).
    decayed = [v.dim() >= 2 for v in module.p]
    if peer.startswith("fsdp"):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import ShardingStrategy
        model = FSDP(module, device_id=torch.device("cpu"), use_orig_params=True,
                     sharding_strategy=ShardingStrategy.FULL_SHARD if peer == "fsdp-full"
                     else ShardingStrategy.SHARD_GRAD_OP)
        params = list(module.p)
        clip = lambda: model.clip_grad_norm_(1.0)  # noqa: E731
    else:
        model = DDP(module)
        params = list(model.module.p)
        clip = lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # noqa: E731
    groups = [{"params": [v for v, d in zip(params, decayed) if d], "weight_decay": 0.1},
              {"params": [v for v, d in zip(params, decayed) if not d], "weight_decay": 0.0}]
    if peer == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(groups[0]["params"], optimizer_class=torch.optim.AdamW,
                                      lr=3e-4, weight_decay=0.1)
        opt.add_param_group(groups[1])
    else:
        opt = torch.optim.AdamW(groups, lr=3e-4)
    times, loss0 = [], None
    for s in range(a.steps):
        x, y = R.batch_at(tokens, s, 0, a.batch * RANKS, a.seq_len, 1)
        rows = slice(rank * a.batch, (rank + 1) * a.batch)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x[rows], y[rows])
        loss.backward()
        clip()
        opt.step()
        times.append(time.perf_counter() - t0)
        if s == 0:
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            loss0 = mean.item() / RANKS
    dist.barrier()
    results.put((rank, times, loss0,
                 resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
    dist.destroy_process_group()


def bench_torch(a, w0, tokens, peer, port):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=torch_worker, args=(r, a, w0, tokens, peer, port, results))
             for r in range(RANKS)]
    for p in procs:
        p.start()
    got = sorted(results.get() for _ in procs)
    for p in procs:
        p.join()
        if p.exitcode:
            sys.exit(f"a PyTorch rank failed ({p.exitcode})")
    times = got[0][1][a.warmup:]
    tok = a.batch * RANKS * a.seq_len
    return {"tokens_per_s": tok * len(times) / sum(times),
            "peak_rss_mib": max(g[3] for g in got), "loss0": got[0][2]}


def bench_newer_torch(a, wd, peer, port):
    """A peer's ranks under --fsdp-python; its results, or why there are
    none."""
    if not os.access(a.fsdp_python, os.X_OK):
        return None, (f"no {os.path.relpath(a.fsdp_python)}: run "
                      f"scripts/install-bench-torch.sh for a torch whose FSDP runs on CPU")
    cmd = [a.fsdp_python, os.path.abspath(__file__), "--peer", peer, "--peer-inputs", wd,
           "--steps", str(a.steps), "--warmup", str(a.warmup), "--n-embd", str(a.n_embd),
           "--n-layer", str(a.n_layer), "--n-head", str(a.n_head), "--vocab", str(a.vocab),
           "--seq-len", str(a.seq_len), "--batch", str(a.batch), "--peer-port", str(port)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        return None, f"FSDP run failed: {p.stderr.strip().splitlines()[-1][:120]}"
    return json.loads(p.stdout.strip().splitlines()[-1]), None


def run_peer(a):
    """--peer: one PyTorch peer on the inputs main() wrote; prints its
    results and the torch version as JSON."""
    import torch
    w0 = R.load_safetensors(os.path.join(a.peer_inputs, "w0.safetensors"))
    tokens = R.read_tokens(os.path.join(a.peer_inputs, "tokens.bin"))
    res = bench_torch(a, w0, tokens, a.peer, a.peer_port)
    print(json.dumps(dict(res, torch=torch.__version__)))


def main():
    a = parse()
    if a.peer:
        return run_peer(a)
    wd = tempfile.mkdtemp(prefix="dsc-bench-dp-")
    tokens = R.random_tokens((a.steps + 1) * a.batch * RANKS * a.seq_len + 1, a.vocab, seed=0)
    data = os.path.join(wd, "tokens.bin")
    R.write_tokens(data, tokens)
    model, ds = configs(a, 0)
    w0_path = os.path.join(wd, "w0.safetensors")
    subprocess.run([os.path.abspath(a.dsc_run), "train", "--model",
                    R.write_json(os.path.join(wd, "model.json"), model), "--config",
                    R.write_json(os.path.join(wd, "ds1.json"), dict(ds, train_batch_size=a.batch)),
                    "--data", data, "--steps", "0", "--save", w0_path],
                   check=True, stdout=subprocess.DEVNULL)
    w0 = R.load_safetensors(w0_path)
    nparams = sum(v.size for v in w0.values())
    res = {f"dsc ZeRO-{s}": bench_dsc(a, wd, data, s) for s in range(4)}
    res[PEERS["ddp"]] = bench_torch(a, w0, tokens, "ddp", 29511)
    res[PEERS["zero1"]] = bench_torch(a, w0, tokens, "zero1", 29512)
    # FSDP, and DDP again for a peer of FSDP's own torch.
    missing = {}
    for peer, port in (("ddp", 29513), ("fsdp-grad", 29514), ("fsdp-full", 29515)):
        got, why = bench_newer_torch(a, wd, peer, port)
        if got:
            res[f"{PEERS[peer]} (torch {got['torch'].split('+')[0]})"] = got
        elif peer != "ddp":
            missing[PEERS[peer]] = why
    import torch
    print(f"\n{RANKS} CPU ranks x 1 thread, GPT-2 L{a.n_layer} C{a.n_embd} H{a.n_head} "
          f"V{a.vocab} T{a.seq_len}, {a.batch} rows per rank, {nparams / 1e6:.2f}M "
          f"parameters, AdamW + clip 1.0, fp32, {a.steps} steps ({a.warmup} warm-up "
          f"excluded), torch {torch.__version__}"
          + "".join(f"; FSDP and its DDP peer: torch {v['torch']}"
                    for k, v in res.items() if "FULL_SHARD" in k) + "\n")
    ddp = res["PyTorch DDP"]["tokens_per_s"]
    print("| run | tokens/s | vs PyTorch DDP | peak RSS per rank (MiB) | step-0 loss |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for k, v in res.items():
        print(f"| {k} | {v['tokens_per_s']:,.0f} | {v['tokens_per_s'] / ddp:.2f}x | "
              f"{v['peak_rss_mib']:,.0f} | {v['loss0']:.4f} |")
    for name, why in missing.items():
        print(f"| {name} | n/a | | | ({why}) |")
    if a.json:
        R.write_json(a.json, {"nparams": int(nparams), "results": res, "missing": missing})


if __name__ == "__main__":
    main()
