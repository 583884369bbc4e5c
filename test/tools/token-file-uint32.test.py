"""Writes token-file-uint32.test's files into argv[1]: the same 600 tokens
(< 65,536) as llm.c's uint16 (low16.bin) and uint32 (low32.bin) formats,
tokens up to 69,999 (high32.bin) and one token of 70,000 (beyond32.bin)."""
import random
import struct
import sys


def write(path, magic, version, fmt, tokens):
    header = struct.pack("<3i", magic, version, len(tokens)) + bytes(1024 - 12)
    with open(path, "wb") as f:
        f.write(header + struct.pack("<%d%s" % (len(tokens), fmt), *tokens))


out = sys.argv[1]
rng = random.Random(5)
low = [rng.randrange(65536) for _ in range(600)]
write(out + "/low16.bin", 20240520, 1, "H", low)
write(out + "/low32.bin", 20240801, 7, "I", low)
high = [rng.randrange(65536, 70000) for _ in range(600)]
write(out + "/high32.bin", 20240801, 7, "I", high)
write(out + "/beyond32.bin", 20240801, 7, "I", high[:300] + [70000] + high[301:])
