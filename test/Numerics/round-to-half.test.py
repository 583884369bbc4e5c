"""Writes test inputs for dsc-round-half and checks its output against torch."""
import struct
import sys

import torch

EDGE = [0.0, -0.0, 1.0, 65504.0, 65519.99, 65520.0, -65520.0, 70000.0,
        2.0**-24, 2.0**-25, 1.5 * 2.0**-25, 3 * 2.0**-25, 2.0**-14,
        1023.5 * 2.0**-24, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 0.1, 1e-8, 3.4e38,
        float('inf'), float('-inf'), float('nan')]


def bits_tensor(n, seed):
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 2**32, (n,), generator=g, dtype=torch.int64)
    raw = raw.to(torch.int64)
    raw = torch.where(raw >= 2**31, raw - 2**32, raw).to(torch.int32)
    return raw.view(torch.float32)


def inputs():
    edge = torch.tensor(EDGE, dtype=torch.float32)
    # Random bit patterns (every exponent), plus values around the f16 range.
    rnd = bits_tensor(100000, 1)
    near = (torch.rand(100000, generator=torch.Generator().manual_seed(2)) - 0.5)
    near = near * torch.pow(2.0, torch.randint(-30, 18, (100000,),
                            generator=torch.Generator().manual_seed(3)).float())
    return torch.cat([edge, rnd, near.float()])


def read(path):
    data = open(path, 'rb').read()
    return torch.tensor(struct.unpack('<%df' % (len(data) // 4), data),
                        dtype=torch.float32)


def check(name, x, got, want):
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan), name + ': NaN positions differ'
    g, w = got[~nan].view(torch.int32), want[~nan].view(torch.int32)
    bad = (g != w).nonzero()
    if len(bad):
        i = bad[0].item()
        sys.exit('%s: %r -> %r, torch says %r' % (name, x[~nan][i].item(),
                                                 got[~nan][i].item(),
                                                 want[~nan][i].item()))
    print('%s: %d values match torch %s' % (
        name, len(x), '.half()' if name == 'f16' else '.bfloat16()'))


if sys.argv[1] == 'write':
    x = inputs()
    open(sys.argv[2], 'wb').write(struct.pack('<%df' % len(x), *x.tolist()))
else:
    x = read(sys.argv[2])
    check('f16', x, read(sys.argv[3]), x.half().float())
    check('bf16', x, read(sys.argv[4]), x.bfloat16().float())
