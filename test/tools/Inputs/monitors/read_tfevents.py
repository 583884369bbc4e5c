"""read_tfevents.py DIR: prints the scalar events of the one
events.out.tfevents.* file in DIR as "tag step value", after checking every
TFRecord frame's masked CRC-32C and decoding each tensorflow.Event with a
protobuf reader written here (no TensorFlow needed). The first event must
be the file version "brain.Event:2"."""
import glob
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def fields(buf):
    """(field number, wire type, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            sys.exit(f"FAIL: wire type {wire}")
        yield num, wire, value


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


(path,) = glob.glob(sys.argv[1] + "/events.out.tfevents.*")
data = open(path, "rb").read()
i, events = 0, []
while i < len(data):
    header = data[i:i + 8]
    (length,) = struct.unpack("<Q", header)
    (hcrc,) = struct.unpack("<I", data[i + 8:i + 12])
    body = data[i + 12:i + 12 + length]
    (bcrc,) = struct.unpack("<I", data[i + 12 + length:i + 16 + length])
    if hcrc != masked(header) or bcrc != masked(body):
        sys.exit("FAIL: a frame's CRC does not match")
    events.append(body)
    i += 16 + length
first = {num: value for num, _, value in fields(events[0])}
if first.get(3) != b"brain.Event:2":
    sys.exit("FAIL: the first event is not the file version")
for body in events[1:]:
    ev = {num: value for num, _, value in fields(body)}
    for num, _, value in fields(ev[5]):  # Summary.value
        v = {n: x for n, _, x in fields(value)}
        print(v[1].decode(), ev[2], "%.6g" % struct.unpack("<f", v[2])[0])
