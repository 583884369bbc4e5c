"""Writes the model and ds_config of one CUDA codegen test variant.

usage: variant.py MODEL.json fused|unfused|attention fp32|bf16|fp16 OUT_PREFIX

The model is the example with every dropout probability set to 0.1 (so the
Philox kernels are emitted). The fusion switch sets every dsc.fusion key
but `attention` (fused: the five elementwise fusions, so the softmax +
dropout kernels are emitted; attention: all six, the fused attention);
each (model, fusion) pair also picks its own optimizer, schedule and
options so that, together, the variants emit every opcode the pipelines
produce: AdamW/Lamb/SGD/Adam, the four schedules, gradient accumulation,
normalize_invertible and the fp16 loss scaler.
"""
import json
import sys

model_path, fusion, precision, out = sys.argv[1:5]
model = json.load(open(model_path))
for key in ("attn_pdrop", "embd_pdrop", "resid_pdrop",
            "attention_probs_dropout_prob", "hidden_dropout_prob",
            "attention_dropout"):
    if key in model:
        model[key] = 0.1
bert = model["model_type"] == "bert"
fused = fusion in ("fused", "attention")

config = {
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 1,
    "gradient_clipping": 1.0,
    "dsc": {"seed": 3, "seq_len": 32,
            "fusion": {k: fused for k in ("qkv", "bias_gelu", "swiglu",
                                          "bias_dropout_add", "softmax_dropout",
                                          "residual_layer_norm",
                                          "residual_rms_norm")}},
}
config["dsc"]["fusion"]["attention"] = fusion == "attention"
if bert:
    config["dsc"].update({"mlm_probability": 0.15, "mask_token_id": 255})
if not bert and fused:
    config["gradient_accumulation_steps"] = 2
    config["optimizer"] = {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}
    config["scheduler"] = {"type": "WarmupDecayLR", "params": {
        "warmup_num_steps": 10, "total_num_steps": 100, "warmup_max_lr": 1e-3}}
elif not bert:
    config["optimizer"] = {"type": "Lamb", "params": {"lr": 5e-3, "weight_decay": 0.01}}
    config["scheduler"] = {"type": "WarmupCosineLR", "params": {
        "total_num_steps": 50, "warmup_num_steps": 5}}
    config["transformer_kernel"] = {"normalize_invertible": True}
elif fused:
    # Standalone bias+dropout+residual (not fused with the LayerNorm).
    config["dsc"]["fusion"]["residual_layer_norm"] = False
    config["optimizer"] = {"type": "SGD", "params": {
        "lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.001}}
    config["scheduler"] = {"type": "WarmupLR", "params": {
        "warmup_min_lr": 0.0, "warmup_max_lr": 0.05, "warmup_num_steps": 10,
        "warmup_type": "log"}}
    config["transformer_kernel"] = {"normalize_invertible": True}
else:
    config["optimizer"] = {"type": "Adam", "params": {
        "lr": 1e-3, "weight_decay": 0.01, "adam_w_mode": False}}
if precision != "fp32":
    config[precision] = {"enabled": True}

json.dump(model, open(out + ".model.json", "w"))
json.dump(config, open(out + ".config.json", "w"))
