#!/usr/bin/python3
"""1-bit Adam (optimizer type OneBitAdam, DeepSpeed's OnebitAdam) against
AdamW on CPU ranks under Open MPI: bytes on the wire, speed on a 1 Gbit/s
link, and convergence. Every number is a ratio against a peer measured in
the same run; nothing is asserted.

  unshare -n /usr/bin/python3 bench/bench_onebit.py        # as root
  /usr/bin/python3 bench/bench_onebit.py                   # re-executes itself under unshare -n

The script needs a private network namespace: when the only interface it
sees is not `lo` alone, it re-executes itself under `unshare -n` (root, or a
user allowed to unshare). It brings `lo` up (`ip link set lo up`) and makes
Open MPI use TCP over that loopback only, no shared memory, with the ring
all-reduce, with the flags of test/tools/Inputs/dp/loopback.py
(`--mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include
lo --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm
4`). Every rank runs one thread (OMP_NUM_THREADS=1).

1. Bytes on the wire (loopback unshaped). Model A (GPT-2 shape, default
   L2 C256 H4 V8192 T32, 2 rows per rank; --n-embd etc.). For 2 and 4 ranks
   (--ranks), AdamW with bias_correction false and OneBitAdam with
   freeze_step 1 (every step but the first compressed) each train two runs of
   --bytes-steps lengths (3 and 12); the difference of the loopback's
   transmit counter (/proc/net/dev, lo, tx bytes) over the difference of
   steps is the bytes per step of all ranks together, start-up and the
   launcher's traffic cancelling. Printed beside it: what the ranks
   reported (--log-json comm_bytes, summed over the collectives, times the
   ranks), the wire/reported overhead, and the ratio AdamW / 1-bit
   (target of the compression stage: >= 20x). The unshaped tokens/s of the
   long runs (after --warmup steps) are printed as context.
   Whole-run volume: --volume-steps (50) steps of AdamW and of OneBitAdam
   with freeze_step = --volume-freeze-frac (10%) of the steps: the sum over
   the run of the ranks' comm_bytes (and the loopback's transmit bytes of
   the whole job, start-up included), ratio AdamW / 1-bit.
2. Speed on a slow network: the same, with the loopback shaped by
   `tc qdisc add dev lo root tbf rate 1gbit burst 128kb latency 50ms`
   (--rate; netem is not in this kernel). The TCP goodput of the loopback
   is measured with and without the shaping (a 32 MiB socket transfer) to
   show that it took effect. For 2 and 4 ranks, --speed-steps (12) steps of
   OneBitAdam (freeze_step 1) and of AdamW (bias_correction false):
   tokens/s of the global batch over the steps after --warmup (3), from
   --log-json's tokens_per_s (the whole step: forward, backward,
   communication, optimizer), and the ratio 1-bit / AdamW (target >= 3x).
   Caveat: all ranks share the one shaped loopback, so N ranks share
   1 Gbit/s (a switch would give each node its own link); and on the 2-core
   development machine 4 ranks share 2 cores.
3. Convergence (loopback unshaped), 2 ranks: model B (default L2 C64 H4,
   vocabulary 128 = bytes, T32, 8 rows per rank) on generated text like the
   demo's (lines of 3 to 8 consecutive numbers, `97 98 99 100`), constant
   lr --conv-lr (1e-3), weight decay 0.01, clipping 1.0, --conv-steps
   (2000) steps. Runs: AdamW with bias_correction false (the optimizer of
   1-bit Adam's warm-up) and with the default true, OneBitAdam for each
   --conv-freeze (100, 200 and 400), and, for each, OneBitAdam on 1 rank with
   2 micro-batches (the same global batch; one rank compresses nothing, as
   DeepSpeed, so it separates freezing the variance from compressing);
   LAMB (bias_correction false) and OneBitLamb on 2 ranks and on 1 rank
   for each --conv-lamb-freeze (50 and 100); ZeroOneAdam with
   var_freeze_step --conv-zo-freeze (400) and --conv-zo-policy.
   Final loss: the mean of the last --final-window (50) steps; relative
   difference of each 1-bit run to both AdamW peers (target: within 3%).
   Whole-run bytes of the 2-rank runs from comm_bytes. Loss curves
   (trailing mean of --smooth steps) go to --plot
   (bench/onebit_convergence.png): with matplotlib when /usr/bin/python3
   can import it, else with the small PNG writer below (no dependencies).

4. Seeds (only when asked: --only seeds): model B's 2-rank runs of each
   --seed-runs kind for each of --seeds (dsc.seed sets the initialisation
   and the data order), the final losses and each compressed optimizer's
   mean against its uncompressed peer's mean: one seed says little at this
   size.

Must run under /usr/bin/python3 (Debian's). --only bytes,speed,conv picks
phases; --workdir keeps configs, data and logs; --json writes the numbers.
"""

import argparse
import json
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = "1"

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "reference"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "tools", "Inputs", "dp"))
import dsc_reference as R  # noqa: E402
from loopback import MCA, lo_tx_bytes, shaped_loopback, tc  # noqa: E402

NETNS_FLAG = "DSC_BENCH_ONEBIT_NETNS"
WEIGHT_DECAY = 0.01


def ints(s):
    return [int(x) for x in s.split(",") if x]


def parse():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsc-run", default=os.path.join(HERE, "..", "build", "bin", "dsc-run"))
    ap.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    ap.add_argument("--only", default="bytes,speed,conv,zeroone,lamb",
                    help="comma-separated phases: bytes, speed, conv, zeroone, lamb, "
                         "seeds")
    ap.add_argument("--ranks", type=ints, default=[2, 4], help="world sizes of phases 1-2")
    # Model A (bytes and speed): gradient exchange dominates on a slow link.
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2, help="rows per rank (model A)")
    ap.add_argument("--lr", type=float, default=1e-3, help="lr of model A's runs")
    ap.add_argument("--bytes-steps", type=ints, default=[3, 12],
                    help="short,long run lengths whose loopback bytes are subtracted")
    ap.add_argument("--volume-steps", type=int, default=50)
    ap.add_argument("--volume-freeze-frac", type=float, default=0.1)
    ap.add_argument("--speed-steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3, help="steps excluded from tokens/s")
    ap.add_argument("--rate", default="1gbit", help="tc tbf rate of the shaped loopback")
    # 0/1 Adam (phase zeroone, and one convergence run).
    ap.add_argument("--zo-steps", type=int, default=60)
    ap.add_argument("--zo-freeze", type=int, default=6, help="var_freeze_step")
    ap.add_argument("--zo-policy", type=ints, default=[2, 8, 8],
                    help="var_update_scaler,local_step_scaler,local_step_clipper")
    ap.add_argument("--conv-zo-freeze", type=int, default=400,
                    help="var_freeze_step of the 0/1 Adam convergence run (0: none)")
    # The variance is updated every step until it freezes (var_update_scaler
    # = var_freeze_step): with DeepSpeed's doubling intervals (16) model B
    # stalls (README, "1-bit Adam").
    ap.add_argument("--conv-zo-policy", type=ints, default=[400, 400, 16])
    # 1-bit LAMB (phase lamb, and one convergence run against LAMB).
    ap.add_argument("--lamb-steps", type=int, default=40)
    ap.add_argument("--lamb-freeze", type=int, default=6, help="freeze_step of phase lamb")
    ap.add_argument("--conv-lamb-freeze", type=ints, default=[50, 100],
                    help="freeze_steps of the 1-bit LAMB convergence runs (0: none)")
    # Model B (convergence).
    ap.add_argument("--conv-steps", type=int, default=2000)
    ap.add_argument("--conv-freeze", type=ints, default=[100, 200, 400])
    ap.add_argument("--conv-lr", type=float, default=1e-3)
    ap.add_argument("--conv-n-embd", type=int, default=64)
    ap.add_argument("--conv-n-layer", type=int, default=2)
    ap.add_argument("--conv-n-head", type=int, default=4)
    ap.add_argument("--conv-seq-len", type=int, default=32)
    ap.add_argument("--conv-batch", type=int, default=8, help="rows per rank (model B)")
    # Phase seeds: the convergence runs over several seeds (dsc.seed).
    ap.add_argument("--seeds", type=ints, default=[1, 2, 3, 42])
    ap.add_argument("--seed-runs", default="adamw-nobc,onebit,zeroone,lamb-nobc,onebitlamb",
                    help="optimizer kinds of phase seeds (freeze steps: the largest "
                         "--conv-freeze, --conv-zo-freeze, the first --conv-lamb-freeze)")
    ap.add_argument("--final-window", type=int, default=50)
    ap.add_argument("--smooth", type=int, default=25, help="plot: trailing mean over steps")
    ap.add_argument("--plot", default=os.path.join(HERE, "onebit_convergence.png"),
                    help="PNG of the loss curves ('' for none)")
    ap.add_argument("--workdir")
    ap.add_argument("--json", help="also write the results as JSON here")
    a = ap.parse_args()
    a.only = set(a.only.split(","))
    phases = {"bytes", "speed", "conv", "zeroone", "lamb", "seeds"}
    if a.only - phases:
        ap.error(f"unknown phase in --only: {sorted(a.only - phases)}")
    if len(a.bytes_steps) != 2 or a.bytes_steps[0] >= a.bytes_steps[1]:
        ap.error("--bytes-steps takes SHORT,LONG with SHORT < LONG")
    if a.speed_steps <= a.warmup:
        ap.error("--speed-steps must exceed --warmup")
    if a.conv_steps < a.final_window or a.conv_batch % 2:
        ap.error("--conv-steps must be >= --final-window and --conv-batch even")
    a.dsc_run = os.path.abspath(a.dsc_run)
    if a.json:
        a.json = os.path.abspath(a.json)
    if a.plot:
        a.plot = os.path.abspath(a.plot)
    return a


# ---------------------------------------------------------------------------
# Network namespace, loopback counter, shaping
# ---------------------------------------------------------------------------

def interfaces():
    return [line.partition(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:]]


def enter_private_netns():
    """Re-execute under `unshare -n` unless only the loopback is visible."""
    if interfaces() == ["lo"]:
        return
    if os.environ.get(NETNS_FLAG):
        sys.exit(f"still not isolated after unshare -n (interfaces: {interfaces()})")
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare, "-n", "true"], capture_output=True, text=True) \
        if unshare else None
    if not probe or probe.returncode:
        sys.exit("bench_onebit.py needs a private network namespace: run it as root as "
                 "`unshare -n /usr/bin/python3 bench/bench_onebit.py` "
                 f"({probe.stderr.strip() if probe else 'no unshare'})")
    os.environ[NETNS_FLAG] = "1"
    sys.stdout.flush()
    os.execv(unshare, [unshare, "-n", sys.executable, os.path.abspath(__file__)] + sys.argv[1:])


def tcp_goodput_gbit(nbytes=32 << 20):
    """One TCP stream over 127.0.0.1: bits of payload per second."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def sink():
        c, _ = srv.accept()
        got = 0
        while got < nbytes:
            b = c.recv(1 << 20)
            if not b:
                break
            got += len(b)
        c.sendall(b"k")
        c.close()

    t = threading.Thread(target=sink)
    t.start()
    s = socket.create_connection(srv.getsockname())
    buf = b"\0" * (1 << 20)
    t0 = time.perf_counter()
    for _ in range(nbytes >> 20):
        s.sendall(buf)
    s.recv(1)
    dt = time.perf_counter() - t0
    t.join()
    s.close()
    srv.close()
    return nbytes * 8 / dt / 1e9


# ---------------------------------------------------------------------------
# Configs and runs
# ---------------------------------------------------------------------------

def model_cfg(vocab, n_embd, n_layer, n_head, seq_len):
    return {"model_type": "gpt2", "vocab_size": vocab, "n_positions": seq_len,
            "n_embd": n_embd, "n_layer": n_layer, "n_head": n_head,
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}


def optimizer(kind, lr, freeze=None, zo=None):
    """kind: 'adamw-nobc' (AdamW, bias_correction false), 'adamw' (default
    bias correction), 'onebit' (OneBitAdam with freeze_step) or 'zeroone'
    (ZeroOneAdam with var_freeze_step = freeze and `zo` = (var_update_scaler,
    local_step_scaler, local_step_clipper)), 'lamb-nobc' (Lamb, bias_correction
    false) or 'onebitlamb' (OneBitLamb with freeze_step, DeepSpeed's other
    defaults)."""
    if kind == "onebitlamb":
        return {"type": "OneBitLamb",
                "params": {"lr": lr, "weight_decay": WEIGHT_DECAY, "freeze_step": freeze,
                           "comm_backend_name": "mpi"}}
    if kind == "lamb-nobc":
        return {"type": "Lamb", "params": {"lr": lr, "weight_decay": WEIGHT_DECAY,
                                           "bias_correction": False}}
    if kind == "onebit":
        return {"type": "OneBitAdam",
                "params": {"lr": lr, "weight_decay": WEIGHT_DECAY, "freeze_step": freeze,
                           "comm_backend_name": "mpi"}}
    if kind == "zeroone":
        return {"type": "ZeroOneAdam",
                "params": {"lr": lr, "weight_decay": WEIGHT_DECAY, "var_freeze_step": freeze,
                           "var_update_scaler": zo[0], "local_step_scaler": zo[1],
                           "local_step_clipper": zo[2], "comm_backend_name": "mpi"}}
    p = {"lr": lr, "weight_decay": WEIGHT_DECAY}
    if kind == "adamw-nobc":
        p["bias_correction"] = False
    return {"type": "AdamW", "params": p}


def ds_cfg(opt, global_rows, accum, seq_len, seed=42):
    return {"train_batch_size": global_rows, "gradient_accumulation_steps": accum,
            "gradient_clipping": 1.0, "optimizer": opt,
            "dsc": {"seed": seed, "seq_len": seq_len}}


def train(a, wd, tag, ranks, model_json, ds, data, steps):
    """One mpirun job; returns its --log-json records, the loopback's
    transmit bytes over the job and its wall time."""
    cfg = R.write_json(os.path.join(wd, f"{tag}.json"), ds)
    log = os.path.join(wd, f"{tag}.jsonl")
    cmd = ([a.mpirun, "-np", str(ranks), "--oversubscribe", "--allow-run-as-root",
            "-x", "OMP_NUM_THREADS=1"] + MCA +
           [a.dsc_run, "train", "--model", model_json, "--config", cfg, "--data", data,
            "--steps", str(steps), "--log-json", log])
    before, t0 = lo_tx_bytes(), time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall, tx = time.perf_counter() - t0, lo_tx_bytes() - before
    if p.returncode:
        sys.exit(f"{tag}: mpirun failed ({p.returncode}):\n{p.stderr[-3000:]}")
    records = [json.loads(line) for line in open(log)]
    if len(records) != steps:
        sys.exit(f"{tag}: {len(records)} log records, expected {steps}")
    return {"records": records, "tx": tx, "wall_s": wall}


def step_bytes(rec):
    return sum(rec["comm_bytes"].values())


def tokens_per_s(records, warmup, tokens_per_step):
    timed = records[warmup:]
    secs = sum(tokens_per_step / r["tokens_per_s"] for r in timed)
    return tokens_per_step * len(timed) / secs


# ---------------------------------------------------------------------------
# Phases
# ---------------------------------------------------------------------------

def model_a(a, wd):
    model = R.write_json(os.path.join(wd, "model-a.json"),
                         model_cfg(a.vocab, a.n_embd, a.n_layer, a.n_head, a.seq_len))
    need = (max(a.bytes_steps + [a.volume_steps, a.speed_steps]) + 1) * \
        max(a.ranks) * a.batch * a.seq_len + 1
    data = os.path.join(wd, "tokens-a.bin")
    R.write_tokens(data, R.random_tokens(need, a.vocab, seed=0))
    return model, data


def phase_bytes(a, wd, model, data):
    short, long_ = a.bytes_steps
    per_step, volume = [], []
    for n in a.ranks:
        tok = a.batch * n * a.seq_len
        row = {"ranks": n}
        for kind, freeze in (("adamw-nobc", None), ("onebit", 1)):
            ds = ds_cfg(optimizer(kind, a.lr, freeze), a.batch * n, 1, a.seq_len)
            rs = train(a, wd, f"bytes-{kind}-np{n}-s{short}", n, model, ds, data, short)
            rl = train(a, wd, f"bytes-{kind}-np{n}-s{long_}", n, model, ds, data, long_)
            # The compression stage's steps (after the one full step).
            per_rank = {step_bytes(r) for r in rl["records"][freeze or 0:]}
            if len(per_rank) != 1:
                sys.exit(f"bytes {kind} np{n}: per-step comm_bytes not constant: {per_rank}")
            row[kind] = {"wire": (rl["tx"] - rs["tx"]) / (long_ - short),
                         "reported": n * per_rank.pop(),
                         "tokens_per_s": tokens_per_s(rl["records"], min(a.warmup, long_ - 1),
                                                      tok)}
        per_step.append(row)
        freeze = max(1, round(a.volume_steps * a.volume_freeze_frac))
        vol = {"ranks": n, "steps": a.volume_steps, "freeze_step": freeze}
        for kind, fr in (("adamw-nobc", None), ("onebit", freeze)):
            ds = ds_cfg(optimizer(kind, a.lr, fr), a.batch * n, 1, a.seq_len)
            r = train(a, wd, f"volume-{kind}-np{n}", n, model, ds, data, a.volume_steps)
            vol[kind] = {"reported": n * sum(step_bytes(x) for x in r["records"]),
                         "wire": r["tx"]}
        volume.append(vol)
    return {"per_step": per_step, "volume": volume}


def phase_speed(a, wd, model, data):
    out = {"goodput_unshaped_gbit": tcp_goodput_gbit()}
    with shaped_loopback(a.rate):
        out["qdisc"] = tc("qdisc", "show", "dev", "lo").stdout.strip()
        out["goodput_shaped_gbit"] = tcp_goodput_gbit()
        rows = []
        for n in a.ranks:
            tok = a.batch * n * a.seq_len
            row = {"ranks": n}
            for kind, freeze in (("adamw-nobc", None), ("onebit", 1)):
                ds = ds_cfg(optimizer(kind, a.lr, freeze), a.batch * n, 1, a.seq_len)
                r = train(a, wd, f"speed-{kind}-np{n}", n, model, ds, data, a.speed_steps)
                row[kind] = {"tokens_per_s": tokens_per_s(r["records"], a.warmup, tok),
                             "wall_s": r["wall_s"], "wire": r["tx"]}
            rows.append(row)
        out["rows"] = rows
    return out


def phase_zeroone(a, wd, model, data):
    """0/1 Adam against AdamW over whole runs on the shaped loopback: its
    steps differ (full, 1-bit, local, sync), so the ratios are of whole runs:
    the bytes the ranks reported, the loopback's transmit bytes, tokens/s."""
    rows = []
    with shaped_loopback(a.rate):
        for n in a.ranks:
            tok = a.batch * n * a.seq_len
            row = {"ranks": n, "steps": a.zo_steps}
            for kind in ("adamw-nobc", "zeroone"):
                ds = ds_cfg(optimizer(kind, a.lr, a.zo_freeze, a.zo_policy), a.batch * n, 1,
                            a.seq_len)
                r = train(a, wd, f"zeroone-{kind}-np{n}", n, model, ds, data, a.zo_steps)
                row[kind] = {"reported": n * sum(step_bytes(x) for x in r["records"]),
                             "wire": r["tx"],
                             "tokens_per_s": tokens_per_s(r["records"], a.warmup, tok),
                             # Nothing but the logged loss's all-reduce.
                             "local_steps": sum(1 for x in r["records"]
                                                if step_bytes(x) ==
                                                x["comm_bytes"]["all_reduce"] <= 8)}
            rows.append(row)
    return rows


def phase_lamb(a, wd, model, data):
    """1-bit LAMB against LAMB (bias_correction false, 1-bit LAMB's warm-up)
    on the shaped loopback: bytes per step of the compression stage against
    LAMB's, whole-run bytes, and tokens/s over the compression stage."""
    rows = []
    with shaped_loopback(a.rate):
        for n in a.ranks:
            tok = a.batch * n * a.seq_len
            row = {"ranks": n, "steps": a.lamb_steps, "freeze_step": a.lamb_freeze}
            for kind in ("lamb-nobc", "onebitlamb"):
                ds = ds_cfg(optimizer(kind, a.lr, a.lamb_freeze), a.batch * n, 1, a.seq_len)
                r = train(a, wd, f"lamb-{kind}-np{n}", n, model, ds, data, a.lamb_steps)
                after = r["records"][a.lamb_freeze + 1:]  # past the switch's step
                row[kind] = {"reported": n * sum(step_bytes(x) for x in r["records"]),
                             "wire": r["tx"],
                             "stage_step_bytes": n * max(step_bytes(x) for x in after),
                             "tokens_per_s": tokens_per_s(after, 0, tok)}
            rows.append(row)
    return rows


def counting_text(path, nbytes, seed=0):
    """Lines of 3 to 8 consecutive numbers, as the demo's: `97 98 99 100`."""
    r = random.Random(seed)
    out, n = [], 0
    while n < nbytes:
        s, k = r.randrange(1000), r.randint(3, 8)
        line = " ".join(str(s + i) for i in range(k)) + "\n"
        out.append(line)
        n += len(line)
    with open(path, "w") as f:
        f.write("".join(out))
    return path


def model_b(a, wd):
    """Model B's config, its global batch rows and its counting text."""
    model = R.write_json(os.path.join(wd, "model-b.json"),
                         model_cfg(128, a.conv_n_embd, a.conv_n_layer, a.conv_n_head,
                                   a.conv_seq_len))
    rows = 2 * a.conv_batch
    data = counting_text(os.path.join(wd, "counting.txt"),
                         min(a.conv_steps * rows * a.conv_seq_len + 1024, 4 << 20))
    return model, rows, data


def phase_conv(a, wd):
    model, rows, data = model_b(a, wd)
    runs = {}

    def go(label, kind, ranks, freeze=None, zo=None):
        ds = ds_cfg(optimizer(kind, a.conv_lr, freeze, zo), rows, 2 // ranks, a.conv_seq_len)
        r = train(a, wd, "conv-" + re.sub(r"[^0-9A-Za-z.-]+", "_", label), ranks, model, ds,
                  data, a.conv_steps)
        losses = [x["loss"] for x in r["records"]]
        runs[label] = {"kind": kind, "ranks": ranks, "freeze_step": freeze, "losses": losses,
                       "final": sum(losses[-a.final_window:]) / a.final_window,
                       "bytes": ranks * sum(step_bytes(x) for x in r["records"]),
                       "wall_s": r["wall_s"]}

    go("AdamW bc=false", "adamw-nobc", 2)
    go("AdamW bc=true", "adamw", 2)
    for f in a.conv_freeze:
        go(f"1-bit f={f}", "onebit", 2, f)
        go(f"1-bit f={f} 1 rank", "onebit", 1, f)
    lamb_freezes = [f for f in a.conv_lamb_freeze if f > 0]
    if lamb_freezes:
        go("LAMB bc=false", "lamb-nobc", 2)
    for f in lamb_freezes:
        go(f"1-bit LAMB f={f}", "onebitlamb", 2, f)
        # One rank compresses nothing: the frozen stage's own cost.
        go(f"1-bit LAMB f={f} 1 rank", "onebitlamb", 1, f)
    if a.conv_zo_freeze > 0:
        go(f"0/1 Adam f={a.conv_zo_freeze}", "zeroone", 2, a.conv_zo_freeze, a.conv_zo_policy)
    return runs


# Each compressed optimizer against its uncompressed peer.
SEED_PEERS = {"onebit": "adamw-nobc", "zeroone": "adamw-nobc", "onebitlamb": "lamb-nobc"}


def phase_seeds(a, wd):
    """Model B's 2-rank convergence runs for each of --seeds (the model's
    initialisation and the data order follow dsc.seed): final losses per
    kind and seed."""
    model, rows, data = model_b(a, wd)
    freeze = {"onebit": max(a.conv_freeze), "zeroone": a.conv_zo_freeze,
              "onebitlamb": a.conv_lamb_freeze[0]}
    finals = {}
    for kind in a.seed_runs.split(","):
        for seed in a.seeds:
            opt = optimizer(kind, a.conv_lr, freeze.get(kind), a.conv_zo_policy)
            r = train(a, wd, f"seed-{kind}-{seed}", 2, model,
                      ds_cfg(opt, rows, 1, a.conv_seq_len, seed), data, a.conv_steps)
            losses = [x["loss"] for x in r["records"]]
            finals.setdefault(kind, {})[seed] = sum(losses[-a.final_window:]) / a.final_window
            print(f"  {kind} seed {seed}: {finals[kind][seed]:.4f} ({r['wall_s']:.0f} s)")
            sys.stdout.flush()
    return {"freeze": freeze, "finals": finals}


def report_seeds(a, res):
    finals = res["finals"]
    print(f"\n### Final loss over seeds (mean of the last {a.final_window} of "
          f"{a.conv_steps} steps, 2 ranks)\n")
    print("| run | " + " | ".join(f"seed {s}" for s in a.seeds) +
          " | mean | vs its uncompressed peer's mean |")
    print("| --- |" + " ---: |" * (len(a.seeds) + 2))
    mean = {k: sum(v.values()) / len(v) for k, v in finals.items()}
    for kind, per_seed in finals.items():
        peer = SEED_PEERS.get(kind)
        rel = (f"{100 * (mean[kind] / mean[peer] - 1):+.1f}%" if peer in mean else "")
        label = kind + (f" (freeze {res['freeze'][kind]})" if kind in res["freeze"] else "")
        print(f"| {label} | " + " | ".join(f"{per_seed[s]:.4f}" for s in a.seeds) +
              f" | {mean[kind]:.4f} | {rel} |")


# ---------------------------------------------------------------------------
# Plot: matplotlib when importable, else a dependency-free PNG
# ---------------------------------------------------------------------------

def smooth(xs, w):
    out, acc = [], 0.0
    for i, x in enumerate(xs):
        acc += x
        if i >= w:
            acc -= xs[i - w]
        out.append(acc / min(i + 1, w))
    return out


# Tableau's 10 and 6 darker ones: every curve of phase conv its own colour.
COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
          (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207),
          (0, 0, 0), (0, 70, 140), (160, 60, 0), (0, 100, 0), (120, 0, 60), (90, 90, 0)]


def plot(a, runs, title):
    curves = [(k, smooth(v["losses"], a.smooth)) for k, v in runs.items()]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # not installed for /usr/bin/python3
        write_png_plot(a.plot, curves, title, "STEP", f"LOSS (MEAN OF {a.smooth} STEPS)")
        return f"matplotlib not importable ({type(e).__name__}: {e}); drawn by the built-in PNG writer"
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for i, (k, ys) in enumerate(curves):
        ax.plot(range(len(ys)), ys, color=[c / 255 for c in COLORS[i % len(COLORS)]],
                lw=1.2, ls="--" if "1 rank" in k else "-", label=k)
    ax.set_xlabel("step")
    ax.set_ylabel(f"loss (trailing mean of {a.smooth} steps)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(a.plot, dpi=100)
    return f"matplotlib {matplotlib.__version__}"


# 3x5 glyphs, five rows of three cells ("#" = ink), for the PNG fallback.
_FONT = """
A .#. #.# ### #.# #.#   B ##. #.# ##. #.# ##.   C .## #.. #.. #.. .##
D ##. #.# #.# #.# ##.   E ### #.. ##. #.. ###   F ### #.. ##. #.. #..
G .## #.. #.# #.# .##   H #.# #.# ### #.# #.#   I ### .#. .#. .#. ###
J ..# ..# ..# #.# .#.   K #.# #.# ##. #.# #.#   L #.. #.. #.. #.. ###
M #.# ### ### #.# #.#   N ##. #.# #.# #.# #.#   O .#. #.# #.# #.# .#.
P ##. #.# ##. #.. #..   Q .#. #.# #.# ##. .##   R ##. #.# ##. #.# #.#
S .## #.. .#. ..# ##.   T ### .#. .#. .#. .#.   U #.# #.# #.# #.# ###
V #.# #.# #.# #.# .#.   W #.# #.# ### ### #.#   X #.# #.# .#. #.# #.#
Y #.# #.# .#. .#. .#.   Z ### ..# .#. #.. ###   0 ### #.# #.# #.# ###
1 .#. ##. .#. .#. ###   2 ##. ..# .#. #.. ###   3 ##. ..# .#. ..# ##.
4 #.# #.# ### ..# ..#   5 ### #.. ##. ..# ##.   6 .## #.. ### #.# ###
7 ### ..# .#. .#. .#.   8 ### #.# ### #.# ###   9 ### #.# ### ..# ##.
. ... ... ... ... .#.   - ... ... ### ... ...   = ... ### ... ### ...
( .#. #.. #.. #.. .#.   ) .#. ..# ..# ..# .#.   , ... ... ... .#. #..
: ... .#. ... .#. ...   / ..# ..# .#. #.. #..   _ ... ... ... ... ...
"""
_F = _FONT.split()
GLYPHS = {_F[i]: "".join(_F[i + 1:i + 6]) for i in range(0, len(_F), 6)}
GLYPHS[" "] = GLYPHS["_"]


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray([255]) * (w * h * 3)

    def dot(self, x, y, c):
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i:i + 3] = bytes(c)

    def line(self, x0, y0, x1, y1, c, thick=1):
        x0, y0, x1, y1 = (int(round(v)) for v in (x0, y0, x1, y1))
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            for ox in range(thick):
                for oy in range(thick):
                    self.dot(x0 + ox, y0 + oy, c)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x, y, s, c=(0, 0, 0), scale=2):
        for ch in s.upper():
            g = GLYPHS.get(ch, GLYPHS[" "])
            for i, bit in enumerate(g):
                if bit == "#":
                    for ox in range(scale):
                        for oy in range(scale):
                            self.dot(x + (i % 3) * scale + ox, y + (i // 3) * scale + oy, c)
            x += 4 * scale

    def save(self, path):
        raw = b"".join(b"\0" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3])
                       for y in range(self.h))

        def chunk(kind, body):
            return (struct.pack(">I", len(body)) + kind + body +
                    struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" +
                    chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)) +
                    chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def write_png_plot(path, curves, title, xlabel, ylabel):
    W, H, L, Rm, T, B = 960, 600, 80, 20, 50, 60
    cv = Canvas(W, H)
    n = max(len(ys) for _, ys in curves)
    lo = min(min(ys) for _, ys in curves)
    hi = max(max(ys) for _, ys in curves)
    pad = (hi - lo) * 0.05 or 0.1
    lo, hi = lo - pad, hi + pad
    px = lambda i: L + (W - L - Rm) * i / max(n - 1, 1)  # noqa: E731
    py = lambda v: H - B - (H - T - B) * (v - lo) / (hi - lo)  # noqa: E731
    grey, black = (220, 220, 220), (0, 0, 0)
    ystep = 0.1 if hi - lo < 1.5 else 0.25 if hi - lo < 4 else 0.5 if hi - lo < 8 else 1.0
    v = (int(lo / ystep) + 1) * ystep
    while v < hi:
        cv.line(L, py(v), W - Rm, py(v), grey)
        label = f"{v:.2f}"
        cv.text(L - 8 - 8 * len(label), int(py(v)) - 5, label)
        v += ystep
    xstep = max(1, [s for s in (10, 20, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10 ** 9)
                    if n / s <= 10][0])
    for s in range(0, n, xstep):
        cv.line(px(s), T, px(s), H - B, grey)
        cv.text(int(px(s)) - 4 * len(str(s)), H - B + 8, str(s))
    cv.line(L, T, L, H - B, black)
    cv.line(L, H - B, W - Rm, H - B, black)
    for i, (label, ys) in enumerate(curves):
        c = COLORS[i % len(COLORS)]
        dashed = "1 RANK" in label.upper()
        for j in range(1, len(ys)):
            if dashed and (j // 12) % 2:
                continue
            cv.line(px(j - 1), py(ys[j - 1]), px(j), py(ys[j]), c, thick=2)
        ly = T + 10 + 18 * i
        cv.line(W - Rm - 330, ly + 4, W - Rm - 300, ly + 4, c, thick=3)
        cv.text(W - Rm - 290, ly, label, c)
    cv.text(L, 10, title)
    cv.text((W - 8 * len(xlabel)) // 2, H - 26, xlabel)
    cv.text(8, T - 18, ylabel)
    cv.save(path)


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

def mb(x):
    return f"{x / 1e6:,.3f}"


def report_bytes(a, res):
    print(f"\n## 1. Bytes on the wire (loopback, TCP, ring all-reduce): bytes per step of all "
          f"ranks, steps {a.bytes_steps[1]} - {a.bytes_steps[0]} subtracted\n")
    print("| ranks | optimizer | wire MB/step | reported MB/step | wire / reported | "
          "unshaped tokens/s |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for row in res["per_step"]:
        for kind, name in (("adamw-nobc", "AdamW (bias_correction false)"),
                           ("onebit", "OneBitAdam freeze_step 1")):
            r = row[kind]
            print(f"| {row['ranks']} | {name} | {mb(r['wire'])} | {mb(r['reported'])} | "
                  f"{r['wire'] / r['reported']:.3f} | {r['tokens_per_s']:,.0f} |")
    print("\n| ranks | AdamW / 1-bit bytes per step, wire | same, reported | "
          "1-bit / AdamW unshaped tokens/s |")
    print("| ---: | ---: | ---: | ---: |")
    for row in res["per_step"]:
        ad, ob = row["adamw-nobc"], row["onebit"]
        print(f"| {row['ranks']} | {ad['wire'] / ob['wire']:.1f}x | "
              f"{ad['reported'] / ob['reported']:.1f}x | "
              f"{ob['tokens_per_s'] / ad['tokens_per_s']:.2f}x |")
    print("\nWhole run (reported: sum of every rank's comm_bytes over the run; wire: the "
          "loopback's transmit bytes of the whole job, start-up included)\n")
    print("| ranks | steps | freeze_step | AdamW MB (reported / wire) | "
          "1-bit MB (reported / wire) | AdamW / 1-bit (reported / wire) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for v in res["volume"]:
        ad, ob = v["adamw-nobc"], v["onebit"]
        print(f"| {v['ranks']} | {v['steps']} | {v['freeze_step']} | {mb(ad['reported'])} / "
              f"{mb(ad['wire'])} | {mb(ob['reported'])} / {mb(ob['wire'])} | "
              f"{ad['reported'] / ob['reported']:.1f}x / {ad['wire'] / ob['wire']:.1f}x |")


def report_speed(a, res):
    print(f"\n## 2. Speed with the loopback shaped to {a.rate} (all ranks share it)\n")
    print(f"qdisc: {res['qdisc']}")
    print(f"TCP goodput over lo, one stream: {res['goodput_unshaped_gbit']:.2f} Gbit/s "
          f"unshaped, {res['goodput_shaped_gbit']:.3f} Gbit/s shaped\n")
    print("| ranks | AdamW tokens/s | 1-bit tokens/s | AdamW steps/s | 1-bit steps/s | "
          "1-bit / AdamW |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in res["rows"]:
        tok = a.batch * row["ranks"] * a.seq_len
        ad, ob = row["adamw-nobc"]["tokens_per_s"], row["onebit"]["tokens_per_s"]
        print(f"| {row['ranks']} | {ad:,.0f} | {ob:,.0f} | {ad / tok:.2f} | {ob / tok:.2f} | "
              f"{ob / ad:.2f}x |")


def report_conv(a, runs):
    print(f"\n## 3. Convergence: {a.conv_steps} steps, final loss = mean of the last "
          f"{a.final_window} steps\n")
    base_f = runs["AdamW bc=false"]["final"]
    base_t = runs["AdamW bc=true"]["final"]
    adam_bytes = runs["AdamW bc=false"]["bytes"]
    print("| run | ranks | final loss | vs AdamW bc=false | vs AdamW bc=true | "
          "whole-run MB (all ranks) | AdamW / this bytes | wall s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for k, v in runs.items():
        ratio = f"{adam_bytes / v['bytes']:.1f}x" if v["bytes"] else "(no comm)"
        print(f"| {k} | {v['ranks']} | {v['final']:.4f} | "
              f"{(v['final'] / base_f - 1) * 100:+.2f}% | {(v['final'] / base_t - 1) * 100:+.2f}% | "
              f"{mb(v['bytes'])} | {ratio} | {v['wall_s']:.1f} |")


def main():
    enter_private_netns()
    a = parse()
    t_start = time.perf_counter()
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    wd = a.workdir or tempfile.mkdtemp(prefix="dsc-bench-onebit-")
    os.makedirs(wd, exist_ok=True)
    ranks_line = ", ".join(map(str, a.ranks))
    print(f"dsc 1-bit Adam benchmark, private network namespace, Open MPI over TCP on lo, "
          f"1 thread per rank, {os.cpu_count()} CPUs; work dir {wd}")
    print(f"model A: GPT-2 L{a.n_layer} C{a.n_embd} H{a.n_head} V{a.vocab} T{a.seq_len}, "
          f"{a.batch} rows per rank, ranks {ranks_line}, lr {a.lr}, fp32")
    print(f"model B: GPT-2 L{a.conv_n_layer} C{a.conv_n_embd} H{a.conv_n_head} V128 "
          f"T{a.conv_seq_len}, {a.conv_batch} rows per rank, 2 ranks, lr {a.conv_lr}")
    results = {}
    if a.only & {"bytes", "speed", "zeroone", "lamb"}:
        model, data = model_a(a, wd)
    if "bytes" in a.only:
        results["bytes"] = phase_bytes(a, wd, model, data)
        report_bytes(a, results["bytes"])
        sys.stdout.flush()
    if "speed" in a.only:
        results["speed"] = phase_speed(a, wd, model, data)
        report_speed(a, results["speed"])
        sys.stdout.flush()
    if "zeroone" in a.only:
        results["zeroone"] = phase_zeroone(a, wd, model, data)
        for row in results["zeroone"]:
            print(f"0/1 Adam, {row['ranks']} ranks, {row['steps']} steps at {a.rate} "
                  f"(var_freeze_step {a.zo_freeze}, policy {a.zo_policy}): "
                  f"{row['zeroone']['local_steps']} local steps; bytes reported "
                  f"{row['adamw-nobc']['reported']} / {row['zeroone']['reported']}, wire "
                  f"{row['adamw-nobc']['wire']} / {row['zeroone']['wire']}, tokens/s "
                  f"{row['adamw-nobc']['tokens_per_s']:.0f} / "
                  f"{row['zeroone']['tokens_per_s']:.0f} (AdamW / 0/1 Adam)")
        sys.stdout.flush()
    if "lamb" in a.only:
        results["lamb"] = phase_lamb(a, wd, model, data)
        sys.stdout.flush()
    if "conv" in a.only:
        runs = phase_conv(a, wd)
        results["conv"] = runs
        report_conv(a, runs)
        if a.plot:
            title = (f"DSC 1-BIT ADAM, 0/1 ADAM, 1-BIT LAMB VS ADAMW, LAMB, 2 RANKS, "
                     f"GPT-2 L{a.conv_n_layer} "
                     f"C{a.conv_n_embd}, LR {a.conv_lr:g}")
            how = plot(a, runs, title)
            print(f"\nplot: {a.plot} ({how}; trailing mean of {a.smooth} steps, "
                  f"dashed = 1 rank)")
        sys.stdout.flush()
    if "seeds" in a.only:
        results["seeds"] = phase_seeds(a, wd)
        report_seeds(a, results["seeds"])
        sys.stdout.flush()
    elapsed = time.perf_counter() - t_start
    print("\n## Summary (ratios against the peer of the same run)\n")
    print("| measure | measured | target |")
    print("| --- | --- | --- |")
    if "bytes" in results:
        for row in results["bytes"]["per_step"]:
            print(f"| bytes per step, AdamW / 1-bit (wire), {row['ranks']} ranks | "
                  f"{row['adamw-nobc']['wire'] / row['onebit']['wire']:.1f}x | >= 20x |")
        for v in results["bytes"]["volume"]:
            print(f"| whole run {v['steps']} steps, freeze_step {v['freeze_step']}, "
                  f"AdamW / 1-bit (reported), {v['ranks']} ranks | "
                  f"{v['adamw-nobc']['reported'] / v['onebit']['reported']:.1f}x | |")
    if "speed" in results:
        for row in results["speed"]["rows"]:
            print(f"| tokens/s at {a.rate}, 1-bit / AdamW, {row['ranks']} ranks | "
                  f"{row['onebit']['tokens_per_s'] / row['adamw-nobc']['tokens_per_s']:.2f}x "
                  f"| >= 3x |")
    if "zeroone" in results:
        for row in results["zeroone"]:
            zo, ad = row["zeroone"], row["adamw-nobc"]
            print(f"| whole run {row['steps']} steps at {a.rate}, AdamW / 0/1 Adam bytes "
                  f"(wire), {row['ranks']} ranks | {ad['wire'] / zo['wire']:.1f}x | |")
            print(f"| tokens/s at {a.rate}, 0/1 Adam / AdamW, {row['ranks']} ranks | "
                  f"{zo['tokens_per_s'] / ad['tokens_per_s']:.2f}x | >= 3x |")
    if "lamb" in results:
        for row in results["lamb"]:
            ob, lb = row["onebitlamb"], row["lamb-nobc"]
            print(f"| bytes per compression-stage step, LAMB / 1-bit LAMB (reported), "
                  f"{row['ranks']} ranks | "
                  f"{lb['stage_step_bytes'] / ob['stage_step_bytes']:.1f}x | >= 20x |")
            print(f"| whole run {row['steps']} steps, freeze_step {row['freeze_step']}, "
                  f"LAMB / 1-bit LAMB bytes (wire), {row['ranks']} ranks | "
                  f"{lb['wire'] / ob['wire']:.1f}x | |")
            print(f"| tokens/s at {a.rate} after the switch, 1-bit LAMB / LAMB, "
                  f"{row['ranks']} ranks | {ob['tokens_per_s'] / lb['tokens_per_s']:.2f}x "
                  f"| >= 3x |")
    if "conv" in results:
        runs = results["conv"]
        for k, v in runs.items():
            if v["kind"] == "onebitlamb" and v["ranks"] == 1:
                two = runs[k[:-len(" 1 rank")]]
                print(f"| final loss {k[:-len(' 1 rank')]}, 2 ranks vs 1 rank "
                      f"(the compression's own cost) | "
                      f"{(two['final'] / v['final'] - 1) * 100:+.2f}% | |")
            elif v["kind"] == "onebitlamb":
                print(f"| final loss {k} vs LAMB bc=false | "
                      f"{(v['final'] / runs['LAMB bc=false']['final'] - 1) * 100:+.2f}% "
                      f"| within 3% |")
                print(f"| whole run {a.conv_steps} steps, {k}, LAMB / 1-bit LAMB bytes "
                      f"(reported), 2 ranks, model B | "
                      f"{runs['LAMB bc=false']['bytes'] / v['bytes']:.1f}x | |")
            if v["kind"] in ("onebit", "zeroone") and v["ranks"] == 2:
                print(f"| final loss {k} vs AdamW bc=false / bc=true | "
                      f"{(v['final'] / runs['AdamW bc=false']['final'] - 1) * 100:+.2f}% / "
                      f"{(v['final'] / runs['AdamW bc=true']['final'] - 1) * 100:+.2f}% | "
                      f"within 3% |")
                print(f"| whole run {a.conv_steps} steps, {k}, AdamW / compressed bytes "
                      f"(reported), 2 ranks, model B | "
                      f"{runs['AdamW bc=false']['bytes'] / v['bytes']:.1f}x | |")
    print(f"\ntotal time {elapsed:.0f} s")
    if a.json:
        R.write_json(a.json, {"args": {k: (sorted(v) if isinstance(v, set) else v)
                                       for k, v in vars(a).items()},
                              "results": results, "elapsed_s": elapsed})


if __name__ == "__main__":
    main()
