#!/usr/bin/env python3
"""The compatibility suite's driver: real DeepSpeed and Hugging Face configs
(test/compat/ds, test/compat/models; sources in SOURCES.md) run through
`dsc-run estimate` (and `dsc-run plan`), one expected outcome per line.

Table lines (expected.txt, wrongly-refused.txt), whitespace-separated:

    COMMAND  CONFIG  MODEL  WORLD  OUTCOME  [MESSAGE...]

COMMAND is estimate or plan (plan runs with --gpus-per-node WORLD); CONFIG
and MODEL are paths relative to this directory; every run uses --seq-len
512. OUTCOME is one of
    accepted               exit 0, no "error:" line, the memory plan
                           ("peak") or the job plan ("plan:") on stdout;
                           MESSAGE, if given, must appear in the output
    not-supported:FEATURE  exit 1 and exactly one "error:" line, which
                           contains "not supported" and MESSAGE
    invalid:WHAT           exit 1 and exactly one "error:" line containing
                           MESSAGE: a config DeepSpeed or transformers
                           refuses too
    refused-wrongly:WHAT   (wrongly-refused.txt only) a config DeepSpeed or
                           transformers takes and dsc could run, refused
                           today with MESSAGE; not part of the passing
                           table: --wrongly-refused lists which of them
                           are still refused

It also checks that every JSON file under ds/ and models/ is named in
SOURCES.md and used by a table line. Prints one line per mismatch and a
summary; exits 1 on any mismatch (0 with --wrongly-refused).
"""
import argparse
import os
import subprocess
import sys
import time

SEQ_LEN = "512"


def read_table(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 5)
            if len(parts) < 5:
                sys.exit(f"{path}:{n}: expected COMMAND CONFIG MODEL WORLD OUTCOME [MESSAGE]")
            cmd, config, model, world, outcome = parts[:5]
            message = parts[5] if len(parts) > 5 else ""
            if message == "-":
                message = ""
            rows.append((f"{os.path.basename(path)}:{n}", cmd, config, model, world, outcome, message))
    return rows


def run(dsc_run, root, cmd, config, model, world):
    argv = [dsc_run, cmd, "--model", os.path.join(root, model),
            "--config", os.path.join(root, config), "--world-size", world,
            "--seq-len", SEQ_LEN]
    if cmd == "plan":
        argv += ["--gpus-per-node", world]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def check(row, rc, out, err):
    """None when the run matches the row, else what differs."""
    where, cmd, config, model, world, outcome, message = row
    errors = [l for l in err.splitlines() if l.startswith("error:")]
    if outcome == "accepted":
        if rc != 0 or errors:
            return f"expected accepted, got exit {rc}: {errors[0] if errors else err.strip()[-300:]}"
        marker = "peak" if cmd == "estimate" else "plan:"
        if marker not in out:
            return f"exit 0 but no '{marker}' on stdout"
        if message and message not in out + err:
            return f"accepted, but '{message}' is not in the output"
        return None
    kind = outcome.split(":", 1)[0]
    if kind not in ("not-supported", "invalid", "refused-wrongly"):
        return f"unknown outcome '{outcome}'"
    if rc != 1:
        return f"expected refusal ({outcome}), got exit {rc}"
    if len(errors) != 1:
        return f"expected one error line, got {len(errors)}: {errors}"
    if kind == "not-supported" and "not supported" not in errors[0]:
        return f"expected 'not supported', got: {errors[0]}"
    if message not in errors[0]:
        return f"expected '{message}', got: {errors[0]}"
    return None


def check_collection(root, rows):
    problems = []
    with open(os.path.join(root, "SOURCES.md")) as f:
        sources = f.read()
    used = set()
    for row in rows:
        used.add(row[2])
        used.add(row[3])
    for sub in ("ds", "models"):
        for name in sorted(os.listdir(os.path.join(root, sub))):
            if not name.endswith(".json"):
                continue
            rel = f"{sub}/{name}"
            if f"`{rel}`" not in sources:
                problems.append(f"{rel}: not listed in SOURCES.md")
            if rel not in used:
                problems.append(f"{rel}: used by no table line")
    for rel in sorted(used):
        if not os.path.isfile(os.path.join(root, rel)):
            problems.append(f"{rel}: named in a table but missing")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsc-run", required=True)
    ap.add_argument("--root", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--wrongly-refused", action="store_true",
                    help="run wrongly-refused.txt and report which are still refused")
    args = ap.parse_args()

    expected = read_table(os.path.join(args.root, "expected.txt"))
    wrongly = read_table(os.path.join(args.root, "wrongly-refused.txt"))
    rows = wrongly if args.wrongly_refused else expected

    start = time.time()
    cpu0 = os.times()
    failures = []
    counts = {}
    for row in rows:
        where, cmd, config, model, world, outcome, message = row
        rc, out, err = run(args.dsc_run, args.root, cmd, config, model, world)
        problem = check(row, rc, out, err)
        if args.wrongly_refused:
            state = "still refused" if problem is None else f"CHANGED: {problem}"
            print(f"{where}: {cmd} {config} {model}: {state}")
            continue
        label = outcome.split(":", 1)[0]
        counts[label] = counts.get(label, 0) + 1
        if problem:
            failures.append(f"{where}: {cmd} {config} {model} --world-size {world}: {problem}")
    cpu1 = os.times()
    child_cpu = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)
    if args.wrongly_refused:
        return 0

    failures += check_collection(args.root, expected + wrongly)
    for f in failures:
        print("MISMATCH " + f)
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"compat: {len(rows)} runs ({summary}), {len(wrongly)} known wrong refusals not run; "
          f"{len(failures)} mismatches; {time.time() - start:.1f} s wall, {child_cpu:.1f} s CPU")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
