"""bad_configs.py DIR: writes the ds_configs optimizers-8bit-adafactor.test
expects dsc to refuse, one per rule, each otherwise valid."""
import json
import os
import sys

base = {"train_batch_size": 8, "dsc": {"seq_len": 8}}
configs = {
    "lr-relative": {"optimizer": {"type": "Adafactor", "params": {"lr": 1e-3}}},
    "warmup-init": {"optimizer": {"type": "Adafactor", "params": {
        "lr": 1e-3, "relative_step": False, "warmup_init": True}}},
    "no-lr": {"optimizer": {"type": "Adafactor", "params": {"relative_step": False}}},
    "eps": {"optimizer": {"type": "Adafactor", "params": {"eps": 1e-8}}},
    "decay": {"optimizer": {"type": "Adafactor", "params": {"decay_rate": 0.8}}},
    "betas": {"optimizer": {"type": "Adafactor", "params": {"betas": [0.9, 0.99]}}},
    "bias-correction": {"optimizer": {"type": "AdamW8bit",
                                      "params": {"bias_correction": False}}},
    "min8": {"optimizer": {"type": "Adam8bit", "params": {"min_8bit_size": -1}}},
    "zero-adafactor": {"optimizer": {"type": "Adafactor"},
                       "zero_optimization": {"stage": 2}},
    "sched-adafactor": {"optimizer": {"type": "Adafactor"},
                        "scheduler": {"type": "WarmupLR"}},
    "tp-adam8bit": {"optimizer": {"type": "Adam8bit"},
                    "tensor_parallel": {"autotp_size": 2}},
}
for name, extra in configs.items():
    with open(os.path.join(sys.argv[1], name + ".json"), "w") as f:
        json.dump({**base, **extra}, f)
