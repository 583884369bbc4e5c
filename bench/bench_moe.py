#!/usr/bin/env python3
"""Mixture of experts on CPU ranks: a small Mixtral against a dense LLaMA of
the same active parameters per token, and expert parallelism's all-to-all.

The Mixtral (--layers x --width, --experts experts of MLP width --ffn, top
--top-k) and the dense model (the same attention, one MLP of width top-k x
--ffn: the same multiply-adds per token) train on byte-level text.
Reported:
- one rank (the machine's threads): tokens/s of each, Mixtral / dense;
- 4 ranks (Open MPI, one OpenMP thread each): Mixtral with its experts
  sharded 4 ways (moe.ep_size 4) against Mixtral data-parallel (every rank
  all experts), tokens/s and rank 0's bytes per step by kind;
- the all-to-all bytes rank 0 sent per step against the formula with even
  routing (`dsc-run plan`'s "expert all-to-all (even)": 4 exchanges per
  layer and micro-batch, B*T*K*(G-1)/G rows of width x 4 bytes, plus the
  counts), measured / formula.
Step times are medians over the steps after the first two. With
--backend cuda (one GPU, no MPI) only the one-rank comparison runs, on the
CUDA backend.

    /usr/bin/python3 bench/bench_moe.py
    python3 bench/bench_moe.py --backend cuda --dsc-run bin/dsc-run
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DSC_RUN = os.path.join(ROOT, "build", "bin", "dsc-run")


def model_config(args, moe):
    cfg = {"architectures": ["MixtralForCausalLM" if moe else "LlamaForCausalLM"],
           "model_type": "mixtral" if moe else "llama",
           "hidden_size": args.width, "num_hidden_layers": args.layers,
           "num_attention_heads": 4, "num_key_value_heads": 4,
           "intermediate_size": args.ffn if moe else args.ffn * args.top_k,
           "max_position_embeddings": args.seq, "vocab_size": 256,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
           "initializer_range": 0.02, "tie_word_embeddings": False}
    if moe:
        cfg.update({"num_local_experts": args.experts,
                    "num_experts_per_tok": args.top_k,
                    "output_router_logits": True,
                    "router_aux_loss_coef": 0.02, "router_jitter_noise": 0.0})
    return cfg


def train(wd, dsc_run, model, cfg, ranks, tag, steps, threads=None,
          backend="cpu"):
    """--log-json records of `steps` steps on `ranks` ranks."""
    cfg_path = os.path.join(wd, f"{tag}.json")
    json.dump(cfg, open(cfg_path, "w"))
    log = os.path.join(wd, f"{tag}.jsonl")
    cmd = [dsc_run, "train", "--backend", backend, "--model", model,
           "--config", cfg_path, "--data", os.path.join(wd, "data.txt"),
           "--steps", str(steps), "--log-json", log]
    env = dict(os.environ)
    if ranks > 1:
        cmd = [shutil.which("mpirun"), "-np", str(ranks), "--oversubscribe",
               "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1", *cmd]
    elif threads:
        env["OMP_NUM_THREADS"] = str(threads)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return [json.loads(line) for line in open(log)]


def tokens_per_s(records):
    return statistics.median(r["tokens_per_s"] for r in records[2:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsc-run", default=DSC_RUN)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--ffn", type=int, default=256)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args()

    wd = tempfile.mkdtemp(prefix="dsc-bench-moe-")
    open(os.path.join(wd, "data.txt"), "w").write(
        " ".join(str(i) for i in range(20000)))
    models = {}
    for name, moe in (("mixtral", True), ("dense", False)):
        models[name] = os.path.join(wd, f"{name}.json")
        json.dump(model_config(args, moe), open(models[name], "w"))
    B, T = args.micro_batch, args.seq

    def step_config(ranks, ep=1):
        cfg = {"train_batch_size": B * ranks,
               "train_micro_batch_size_per_gpu": B,
               "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
               "dsc": {"seq_len": T}}
        if ep > 1:
            cfg["moe"] = {"ep_size": ep}
        return cfg

    print(f"Mixtral {args.layers} x {args.width}, {args.experts} experts of "
          f"width {args.ffn}, top-{args.top_k}; dense LLaMA MLP width "
          f"{args.ffn * args.top_k}; micro-batch {B} x {T}")
    one = {name: tokens_per_s(train(wd, args.dsc_run, models[name],
                                    step_config(1), 1, f"{name}-1", args.steps,
                                    backend=args.backend))
           for name in models}
    print(f"\none rank ({args.backend}): Mixtral {one['mixtral']:.0f} "
          f"tokens/s, dense {one['dense']:.0f} tokens/s: Mixtral / dense "
          f"{one['mixtral'] / one['dense']:.2f}")
    if args.backend == "cuda":
        shutil.rmtree(wd)
        return

    G = 4
    runs = {"data-parallel": train(wd, args.dsc_run, models["mixtral"],
                                   step_config(G), G, "dp4", args.steps),
            f"expert-parallel {G}": train(wd, args.dsc_run, models["mixtral"],
                                          step_config(G, G), G, "ep4",
                                          args.steps)}
    print(f"\n{G} ranks (Mixtral):")
    print(f"  {'run':20s} {'tokens/s':>9s} {'all_reduce B':>13s} "
          f"{'all_to_all B':>13s}")
    for name, rec in runs.items():
        last = rec[-1]["comm_bytes"]
        print(f"  {name:20s} {tokens_per_s(rec):9.0f} "
              f"{last['all_reduce']:13d} {last['all_to_all']:13d}")
    dp, ep = (tokens_per_s(r) for r in runs.values())
    print(f"  expert-parallel / data-parallel tokens/s: {ep / dp:.2f}")

    # Even routing: each exchange sends (G-1)/G of the B*T*K rows away;
    # the counts' exchange sends E/G i32 counts to each of G-1 peers.
    rows = B * T * args.top_k * (G - 1) / G
    formula = args.layers * (4 * rows * args.width * 4 +
                             args.experts // G * 4 * (G - 1))
    sent = [r["comm_bytes"]["all_to_all"] for r in runs[f"expert-parallel {G}"]]
    print(f"\nall-to-all bytes per step (rank 0): measured median "
          f"{statistics.median(sent):.0f} (min {min(sent)}, max {max(sent)}), "
          f"formula with even routing {formula:.0f}: measured / formula "
          f"{statistics.median(sent) / formula:.3f}")
    shutil.rmtree(wd)


if __name__ == "__main__":
    main()
