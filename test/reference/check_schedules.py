"""dsc's learning-rate schedules against an independent Python port of
DeepSpeed's deepspeed/runtime/lr_schedules.py (dsc_reference.WarmupLR,
WarmupDecayLR, WarmupCosineLR), driven as DeepSpeedEngine drives them
(optimizer.step() then scheduler.step(); update s uses the lr set after
s-1 scheduler steps). Runs the tiny GPT-2 with SGD for STEPS steps per
schedule variant and compares the logged lr of every step (fp32 -> 1e-6).

  /usr/bin/python3 check_schedules.py --dsc-run build/bin/dsc-run --workdir /tmp/s
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsc_reference as R  # noqa: E402

STEPS = 14

VARIANTS = [
    ("WarmupLR", {"warmup_min_lr": 1e-4, "warmup_max_lr": 1e-2,
                  "warmup_num_steps": 5, "warmup_type": "linear"}),
    # warmup_type defaults to "log" in DeepSpeed
    ("WarmupLR", {"warmup_min_lr": 0.0, "warmup_max_lr": 1e-2, "warmup_num_steps": 6}),
    # warmup_num_steps is clamped to >= 2
    ("WarmupLR", {"warmup_min_lr": 1e-3, "warmup_max_lr": 1e-2, "warmup_num_steps": 0,
                  "warmup_type": "linear"}),
    ("WarmupDecayLR", {"total_num_steps": 10, "warmup_min_lr": 1e-4,
                       "warmup_max_lr": 1e-2, "warmup_num_steps": 4,
                       "warmup_type": "linear"}),
    ("WarmupDecayLR", {"total_num_steps": 9, "warmup_max_lr": 3e-3,
                       "warmup_num_steps": 3, "warmup_type": "log"}),
    ("WarmupDecayLR", {"total_num_steps": 4, "warmup_max_lr": 3e-3,
                       "warmup_num_steps": 4, "warmup_type": "linear"}),
    ("WarmupCosineLR", {"total_num_steps": 10, "warmup_num_steps": 4,
                        "warmup_min_ratio": 0.05, "cos_min_ratio": 0.1,
                        "warmup_type": "linear"}),
    ("WarmupCosineLR", {"total_num_steps": 12, "warmup_num_steps": 3}),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    R.common_args(ap)
    args = ap.parse_args()
    model_json = os.path.join(R.CONFIGS, "gpt2.json")
    mcfg = R.load_json(model_json)
    dsc = R.DscRun(args.dsc_run, args.workdir)
    data = dsc.path("tokens.bin")
    R.write_tokens(data, R.random_tokens(400, mcfg["vocab_size"], seed=5))
    ck = R.Checker(1e-6, verbose=not args.quiet)
    w0 = None
    for i, (kind, params) in enumerate(VARIANTS):
        ds = {"train_micro_batch_size_per_gpu": 1,
              "optimizer": {"type": "SGD", "params": {"lr": 0.02}},
              "scheduler": {"type": kind, "params": params},
              "dsc": {"seq_len": 13}}
        cfg = R.write_json(dsc.path(f"sched{i}.json"), ds)
        if w0 is None:
            w0 = dsc.path("w0.safetensors")
            dsc.initial_weights(model_json, cfg, data, w0)
        _, log = dsc.train(model_json, cfg, data, STEPS, w0,
                           dsc.path(f"w{i}.safetensors"), dsc.path(f"log{i}.jsonl"))
        sched = R.make_scheduler(R.TrainCfg(ds))
        ref = []
        for _ in range(STEPS):
            ref.append(sched.lr)  # lr this update uses
            sched.step()          # engine: after optimizer.step()
        got = [d["lr"] for d in log]
        scale = max(max(abs(x) for x in ref), 1e-12)
        err = max(abs(a - b) for a, b in zip(got, ref)) / scale
        ck.check(f"{kind} {params}", got, ref)
        if err > 1e-6 or not args.quiet:
            print("     dsc: " + " ".join(f"{x:.4g}" for x in got))
            print("     ref: " + " ".join(f"{x:.4g}" for x in ref))
    ck.finish("check_schedules")


if __name__ == "__main__":
    main()
