"""check_profile.py PROFILE MODEL.json MICRO_BATCH SEQ_LEN

Checks the printed FLOPs profile's contraction counts against the GPT-2
formulas, written here from the model config alone: per token, each
linear layer of a block does 2 * in * out FLOPs plus `out` bias adds (the
fused c_attn 3C wide, c_proj C, c_fc 4C, the MLP projection C), the LM
head 2 * C * V (no bias); attention's two batched products (Q K^T and
P V) 2 * T * D each per head and token. The profile prints MFLOP with two
decimals, so each must agree to 0.005 MFLOP."""
import json
import re
import sys

profile, model_path, batch, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m = json.load(open(model_path))
C, L, H, V = m["n_embd"], m["n_layer"], m["n_head"], m["vocab_size"]
tokens = batch * seq
linear_per_token = L * sum(2 * i * o + o for i, o in
                           [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)]) + 2 * C * V
attention = L * 2 * 2 * batch * H * seq * seq * (C // H)
expected = {"linear": linear_per_token * tokens, "batch_matmul": attention}
text = open(profile).read()
ops = re.search(r"forward FLOPs by op \(top \d+ of \d+\):(.*)", text).group(1)
found = {name: float(value) * 1e6 for name, value in
         re.findall(r"([a-z_]+) ([0-9.]+) MFLOP", ops)}
for name, flops in expected.items():
    got = found.get(name)
    if got is None or abs(got - flops) > 0.005e6:
        sys.exit(f"FAIL: {name}: profile {got}, formula {flops}")
    print(f"{name}: {flops / 1e6:.2f} MFLOP = the formula's")
