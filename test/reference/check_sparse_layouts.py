"""dsc's block-sparse layouts against DeepSpeed's own make_layout.

usage: /usr/bin/python3 check_sparse_layouts.py --dsc-run DSC_RUN --workdir DIR
           [--cache DIR]

DeepSpeed's deepspeed/ops/sparse_attention/sparsity_config.py imports only
torch and random, so this loads that one file from DeepSpeed's source
release (0.16.4, fetched once with `pip download`, cached in
<source>/.deepspeed-ref, git-ignored) instead of installing DeepSpeed. Every deterministic configuration below (no random
blocks) must give the same heads x blocks x blocks layout from
`dsc-run layout` as from DeepSpeed, except where dsc differs on purpose:
a unidirectional layout is strictly block-causal, so it is compared with
torch.tril of DeepSpeed's (the number of future blocks DeepSpeed sets is
reported). Prints "check_sparse_layouts: PASS", or SKIP with the reason when
the file cannot be fetched.
"""
import argparse
import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

VERSION = "0.16.4"
MEMBER = "deepspeed/ops/sparse_attention/sparsity_config.py"


def fetch_sparsity_config(cache):
    """Path of DeepSpeed's sparsity_config.py, fetched if need be."""
    dest_dir = os.path.join(cache, "deepspeed-sparsity-" + VERSION)
    dest = os.path.join(dest_dir, "sparsity_config.py")
    if os.path.isfile(dest):
        return dest
    # pip fetches the source release from the configured index (verifying
    # the hash the index gives); it prepares the package's metadata but
    # installs nothing.
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                        "--no-binary", ":all:", "--quiet", "-d", tmp,
                        "deepspeed==" + VERSION], check=True, timeout=180,
                       capture_output=True,
                       env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
        archive = [f for f in os.listdir(tmp) if f.endswith(".tar.gz")][0]
        with open(os.path.join(tmp, archive), "rb") as f:
            data = f.read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        name = [m for m in tar.getnames() if m.endswith(MEMBER)][0]
        text = tar.extractfile(name).read()
    os.makedirs(dest_dir, exist_ok=True)
    tmp = "%s.%d.tmp" % (dest, os.getpid())
    with open(tmp, "wb") as f:
        f.write(text)
    os.replace(tmp, dest)
    return dest


# (DeepSpeed class, its constructor arguments = our JSON keys, seq, heads)
CASES = [
    ("Dense", {}, 64, 2),
    ("Fixed", {}, 256, 2),
    ("Fixed", {"num_local_blocks": 4, "num_global_blocks": 2}, 208, 1),
    ("Fixed", {"num_local_blocks": 3, "num_global_blocks": 1,
               "horizontal_global_attention": True}, 160, 1),
    ("Fixed", {"different_layout_per_head": True, "num_local_blocks": 4,
               "num_global_blocks": 1, "num_different_global_patterns": 4},
     176, 6),
    ("Fixed", {"attention": "unidirectional"}, 160, 2),
    ("Fixed", {"attention": "unidirectional", "num_local_blocks": 4,
               "num_global_blocks": 2}, 208, 1),
    ("Fixed", {"block": 8, "num_local_blocks": 5, "num_global_blocks": 5},
     96, 1),
    ("Variable", {}, 256, 2),
    ("Variable", {"local_window_blocks": [2, 3, 1], "global_block_indices":
                  [0, 5, 30]}, 192, 1),
    ("Variable", {"local_window_blocks": [4], "global_block_indices": [1, 7],
                  "global_block_end_indices": [3, 9],
                  "horizontal_global_attention": True}, 224, 1),
    ("Variable", {"attention": "unidirectional", "local_window_blocks": [3],
                  "global_block_indices": [2], "global_block_end_indices":
                  [4]}, 160, 1),
    ("BigBird", {"num_sliding_window_blocks": 3, "num_global_blocks": 2},
     192, 1),
    ("BigBird", {"num_sliding_window_blocks": 5, "num_global_blocks": 1,
                 "attention": "unidirectional"}, 160, 2),
    ("BSLongformer", {}, 128, 1),
    ("BSLongformer", {"num_sliding_window_blocks": 5, "global_block_indices":
                      [0, 4], "global_block_end_indices": [2, 6]}, 192, 1),
    ("BSLongformer", {"attention": "unidirectional",
                      "global_block_indices": [3]}, 160, 1),
]
MODES = {"Dense": "dense", "Fixed": "fixed", "Variable": "variable",
         "BigBird": "bigbird", "BSLongformer": "bslongformer"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsc-run", required=True)
    ap.add_argument("--workdir", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    # Not inside .pydeps: install-transformers.sh replaces that directory
    # whole, possibly while this runs.
    ap.add_argument("--cache", default=os.path.join(here, "..", "..",
                                                    ".deepspeed-ref"))
    a = ap.parse_args()
    try:
        path = fetch_sparsity_config(a.cache)
        spec = importlib.util.spec_from_file_location("ds_sparsity", path)
        ds = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ds)
    except Exception as e:  # no network, no PyPI: say why
        print("check_sparse_layouts: SKIP (DeepSpeed %s's sparsity_config.py "
              "unavailable: %s)" % (VERSION, str(e).splitlines()[0][:200]))
        return
    import torch
    os.makedirs(a.workdir, exist_ok=True)
    worst = None
    for n, (cls, args, seq, heads) in enumerate(CASES):
        ours_cfg = dict(args, mode=MODES[cls])
        block = args.get("block", 16)
        cfg_path = os.path.join(a.workdir, "case%d.json" % n)
        with open(cfg_path, "w") as f:
            json.dump({"train_micro_batch_size_per_gpu": 1,
                       "sparse_attention": ours_cfg}, f)
        out = subprocess.run([a.dsc_run, "layout", "--config", cfg_path,
                              "--seq-len", str(seq), "--heads", str(heads)],
                             check=True, capture_output=True, text=True)
        ours = torch.tensor(json.loads(out.stdout)["layout"])
        # DeepSpeed's JSON default for num_random_blocks is 0 (constants.py);
        # its BigBird class defaults to 1.
        ds_args = dict({"num_random_blocks": 0} if cls == "BigBird" else {},
                       **args)
        theirs = getattr(ds, cls + "SparsityConfig")(
            num_heads=heads, **ds_args).make_layout(seq)
        future = 0
        if args.get("attention") == "unidirectional":
            future = int((theirs - torch.tril(theirs)).sum())
            theirs = torch.tril(theirs)
        same = torch.equal(ours, theirs)
        label = "%s %s seq %d heads %d" % (cls, json.dumps(args), seq, heads)
        print("%-100s %s%s" % (label, "same" if same else "DIFFERENT",
                                ("  (DeepSpeed sets %d future blocks)" % future)
                                if future else ""))
        if not same:
            print("ours:\n%s\ndeepspeed:\n%s" % (ours, theirs))
            worst = label
    if worst:
        print("check_sparse_layouts: FAIL (%s)" % worst)
        sys.exit(1)
    print("check_sparse_layouts: PASS (%d layouts equal DeepSpeed %s's)"
          % (len(CASES), VERSION))


if __name__ == "__main__":
    main()
