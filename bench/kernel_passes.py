#!/usr/bin/python3
"""Step time and memory of the kernel passes on a model actually trained on
the CPU backend: baseline (no fusion) / +fusion (the five elementwise
fusions) / +fused attention / +invertible / +per-layer checkpointing /
+budget remat at 50% of the baseline activations. Each variant is
cumulative, as in issue 3's table.

  python3 bench/kernel_passes.py [--dsc-run build/bin/dsc-run] [--steps 12]
      [--threads N] [--repeats 3]

Tokens/s is the median over steps (the first 2 excluded) of dsc-run's
--log-json, then the best of --repeats runs (the machine is shared; repeats
go round-robin over the variants); peak is
the measured arena peak of --memory-report; recompute FLOPs come from
`dsc-run estimate`. Prints a markdown table.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "reference"))
import dsc_reference as R  # noqa: E402

MODEL = {"model_type": "gpt2", "vocab_size": 512, "n_positions": 128,
         "n_embd": 256, "n_layer": 4, "n_head": 8, "resid_pdrop": 0.1,
         "embd_pdrop": 0.1, "attn_pdrop": 0.1}
BASE = {"train_micro_batch_size_per_gpu": 8, "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
        "dsc": {"seq_len": 128}}
NO_FUSION = {"qkv": False, "bias_gelu": False, "bias_dropout_add": False,
             "softmax_dropout": False, "residual_layer_norm": False,
             "attention": False}


def variants(budget):
    def cfg(**extra):
        c = json.loads(json.dumps(BASE))
        for key, value in extra.items():
            if key == "fusion":
                c["dsc"]["fusion"] = value
            elif key == "remat":
                c["dsc"]["remat"] = value
            else:
                c[key] = value
        return c
    inv = {"normalize_invertible": True}
    return [
        ("baseline", cfg(fusion=NO_FUSION)),
        ("+fusion", cfg(fusion={"attention": False})),
        ("+fused attention", cfg()),
        ("+invertible", cfg(transformer_kernel=inv)),
        ("+per-layer checkpointing",
         cfg(transformer_kernel=inv, activation_checkpointing={})),
        ("+budget remat (50% of baseline activations)",
         cfg(transformer_kernel=inv, remat={"memory_budget_bytes": budget})),
    ]


def run(cmd, env):
    return subprocess.run(cmd, check=True, env=env, capture_output=True,
                          text=True).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsc-run", default=os.path.join(HERE, "..", "build", "bin", "dsc-run"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    wd = tempfile.mkdtemp(prefix="dsc-kernel-passes-")
    model = R.write_json(os.path.join(wd, "model.json"), MODEL)
    data = os.path.join(wd, "tokens.bin")
    R.write_tokens(data, R.random_tokens((a.steps + 1) * 8 * 128 + 1, 512, seed=0))

    def estimate(cfg_path):
        mem = cfg_path + ".mem.json"
        out = run([a.dsc_run, "estimate", "--model", model, "--config", cfg_path,
                   "--memory-report", mem], env)
        m = re.search(r"remat.: (\d+)", out)
        return json.load(open(mem)), int(m.group(1)) if m else 0

    base_cfg = R.write_json(os.path.join(wd, "base.json"), variants(0)[0][1])
    base_mem, _ = estimate(base_cfg)
    budget = base_mem["peak_bytes"] - base_mem["activations"] // 2

    # Repeats go round-robin over the variants, so a slow spell of the
    # shared machine hits every variant alike rather than one of them.
    runs = []
    for name, cfg in variants(budget):
        path = R.write_json(os.path.join(wd, re.sub(r"\W+", "_", name) + ".json"), cfg)
        plan, flops = estimate(path)
        runs.append([name, path, plan, flops, 0.0, 0])
    for _ in range(a.repeats):
        for r in runs:
            path = r[1]
            log, mem = path + ".jsonl", path + ".run-mem.json"
            run([a.dsc_run, "train", "--model", model, "--config", path, "--data", data,
                 "--steps", str(a.steps), "--log-json", log, "--memory-report", mem], env)
            tps = [json.loads(l)["tokens_per_s"] for l in open(log)][2:]
            r[4] = max(r[4], statistics.median(tps))
            r[5] = json.load(open(mem))["measured_peak_bytes"]
    rows = [(name, plan["peak_bytes"], measured, plan["activations"], flops, best)
            for name, _, plan, flops, best, measured in runs]

    base_tps = rows[0][5]
    print(f"GPT-2 L4 C256 H8 V512, B8 T128, dropout 0.1, AdamW, {a.threads} thread(s), "
          f"{a.steps} steps, best of {a.repeats}")
    print()
    print("| variant | planned peak MiB | measured peak MiB | saved activations MiB "
          "| recompute MFLOP/step | tokens/s | vs baseline |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, peak, measured, act, flops, tps in rows:
        print(f"| {name} | {peak / 2**20:.1f} | {measured / 2**20:.1f} | {act / 2**20:.1f} "
              f"| {flops / 1e6:.0f} | {tps:,.0f} | {tps / base_tps:.2f}x |")


if __name__ == "__main__":
    main()
