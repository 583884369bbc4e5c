"""pad-vocabulary.test's comparisons of two --log-json files: `same` (every
step's loss and gradient norm equal) or `tail` (the second is the first's
last steps, as a resumed run's)."""
import json
import sys

mode, a, b = sys.argv[1:4]
rows = lambda p: [(r["step"], r["loss"], r["grad_norm"]) for r in map(json.loads, open(p))]
x, y = rows(a), rows(b)
if mode == "tail":
    x = x[len(x) - len(y):]
sys.exit(0 if x == y else "runs differ:\n%s\n%s" % (x, y))
