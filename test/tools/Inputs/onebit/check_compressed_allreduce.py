"""check_compressed_allreduce.py DIR G N ITERS

DeepSpeed's compressed_allreduce (deepspeed/runtime/comm/nccl.py), written
out in numpy for G simulated ranks, against what dsc-compressed-allreduce
wrote to DIR: every rank's result of every iteration and its final worker
and server errors must be equal bit for bit. The reference keeps DeepSpeed's
operation order in float32; its norm is accumulated in float64 and rounded,
as dsc does (torch.norm accumulates in float32: the one documented
difference). Prints the padded size and "PASS", or the first mismatch.
"""
import math
import sys

import numpy as np

directory, G, N, ITERS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def padded_size(n, g):
    # OnebitAdam.__init__ and step(): divider = lcm(g, 8); pad to g * divider.
    divider = g * 8 // math.gcd(g, 8)
    unit = g * divider
    return (n + unit - 1) // unit * unit


def load(rank, what):
    return np.fromfile(f"{directory}/r{rank}_{what}.bin", dtype=np.float32)


def signs_of(y):
    # sign(y) + 1 > 0: +1 for y >= 0, -0.0 and NaN included.
    return ~(y < 0)


def scale_of(y):
    norm = np.float32(math.sqrt(float(np.sum(y.astype(np.float64) ** 2))))
    return np.float32(norm / np.float32(math.sqrt(y.size)))


def pm1(bits):
    return np.where(bits, np.float32(1.0), np.float32(-1.0))


P = padded_size(N, G)
chunk = P // G
worker_error = [np.zeros(P, np.float32) for _ in range(G)]
server_error = [np.zeros(chunk, np.float32) for _ in range(G)]
for it in range(ITERS):
    # Workers: add the error, compress, keep the new error.
    worker_bits, worker_scales = [], []
    for r in range(G):
        y = np.zeros(P, np.float32)
        y[:N] = load(r, f"in{it}")
        y = y + worker_error[r]
        s = scale_of(y)
        bits = signs_of(y)
        worker_error[r] = y - s * pm1(bits)
        # The packed bytes are what travels; decode them as DeepSpeed does.
        packed = np.packbits(bits)
        worker_bits.append(np.unpackbits(packed).astype(bool))
        worker_scales.append(s)
    # Servers: rank j averages chunk j of every worker, adds its error,
    # compresses again.
    server_bits, server_scales = [], []
    for j in range(G):
        acc = np.zeros(chunk, np.float32)
        for r in range(G):
            w = np.float32(worker_scales[r] * np.float32(1.0 / G))
            acc = acc + pm1(worker_bits[r][j * chunk:(j + 1) * chunk]) * w
        y = acc + server_error[j]
        s = scale_of(y)
        bits = signs_of(y)
        server_error[j] = y - s * pm1(bits)
        server_bits.append(np.unpackbits(np.packbits(bits)).astype(bool))
        server_scales.append(s)
    result = np.concatenate([pm1(server_bits[j]) * server_scales[j]
                             for j in range(G)])[:N]
    for r in range(G):
        got = load(r, f"out{it}")
        if not np.array_equal(got.view(np.uint32), result.view(np.uint32)):
            bad = int(np.argmax(got.view(np.uint32) != result.view(np.uint32)))
            sys.exit(f"FAIL: iteration {it}, rank {r}, element {bad}: dsc "
                     f"{got[bad]!r}, reference {result[bad]!r}")
for r in range(G):
    for what, ref in (("worker_error", worker_error[r]),
                      ("server_error", server_error[r])):
        got = load(r, what)
        if not np.array_equal(got.view(np.uint32), ref.view(np.uint32)):
            bad = int(np.argmax(got.view(np.uint32) != ref.view(np.uint32)))
            sys.exit(f"FAIL: rank {r} {what} element {bad}: dsc {got[bad]!r}, "
                     f"reference {ref[bad]!r}")
print(f"compressed all-reduce G={G} N={N} P={P} x{ITERS}: bitwise equal: PASS")
