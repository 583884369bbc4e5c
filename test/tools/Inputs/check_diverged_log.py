"""Checks a --log-json file of a run that diverged: every line is strict
JSON (no NaN or Infinity literals), and the last record, the step that
diverged, has a null loss or gradient norm."""
import json
import sys


def refuse(literal):
    raise ValueError(f"non-JSON number {literal} in the log")


records = [json.loads(line, parse_constant=refuse) for line in open(sys.argv[1])]
if not records:
    sys.exit("empty log")
last = records[-1]
if last["loss"] is not None and last["grad_norm"] is not None:
    sys.exit(f"last record has finite loss and grad_norm: {last}")
print("diverged step logged with null", "loss" if last["loss"] is None else "grad_norm")
