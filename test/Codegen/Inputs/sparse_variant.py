"""Adds a sparse_attention section and a sequence length to a ds_config
written by variant.py.

usage: sparse_variant.py CONFIG.json SEQ_LEN '{"mode": ...}'
"""
import json
import sys

path, seq_len, section = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
config = json.load(open(path))
config["dsc"]["seq_len"] = seq_len
config["sparse_attention"] = section
json.dump(config, open(path, "w"), indent=2)
