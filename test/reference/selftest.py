"""Self-checks of dsc_reference's building blocks (no dsc needed)."""

import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsc_reference as R  # noqa: E402


def main():
    R.philox_selftest()
    with tempfile.TemporaryDirectory() as d:
        t = {"a": np.arange(6, dtype=np.float32).reshape(2, 3),
             "b": np.array(3.5, dtype=np.float32),
             "c": np.array([[1, -2]], dtype=np.int32),
             "d": torch.randn(3, 1, 5, dtype=torch.float64)}
        p = os.path.join(d, "t.safetensors")
        R.save_safetensors(p, t, metadata={"format": "pt"})
        back = R.load_safetensors(p)
        assert list(back) == list(t)
        for k, v in t.items():
            v = v.numpy() if isinstance(v, torch.Tensor) else v
            assert back[k].dtype == v.dtype and back[k].shape == v.shape, k
            assert np.array_equal(back[k], v), k
        with open(p, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
        assert n % 8 == 0
        toks = R.random_tokens(100, 50000, seed=0)
        p = os.path.join(d, "t.bin")
        R.write_tokens(p, toks)
        assert np.array_equal(R.read_tokens(p), toks)
        x, y = R.batch_at(toks, 2, 1, 3, 5, 2)
        start = (2 * 30) % (100 - 31) + 15
        assert np.array_equal(x.numpy().ravel(), toks[start:start + 15])
        assert np.array_equal(y.numpy().ravel(), toks[start + 1:start + 16])
    # 80/10/10: over many draws the branch frequencies are close to nominal.
    ids = np.full((64, 512), 7)
    inp, lab = R.mlm_mask(ids, 0.15, 3, 1000, seed=42, offset=9)
    sel = lab.numpy() != -100
    frac = sel.mean()
    masked = (inp.numpy()[sel] == 3).mean()
    kept = (inp.numpy()[sel] == 7).mean()
    assert abs(frac - 0.15) < 0.01, frac
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1) < 0.02, (masked, kept)
    assert (inp.numpy()[~sel] == 7).all()
    print("selftest: PASS")


if __name__ == "__main__":
    main()
