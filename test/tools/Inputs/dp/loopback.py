"""Measuring what crosses Open MPI's transport inside a private network
namespace (unshare -n): the mpirun flags that make it TCP over the
namespace's loopback only (no shared memory) with the ring all-reduce, and
the loopback's transmit byte counter. Shared by loopback_bytes.py and
bench/bench_onebit.py."""
import contextlib
import subprocess
import sys

MCA = ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
       "--mca", "oob_tcp_if_include", "lo",
       "--mca", "coll_tuned_use_dynamic_rules", "1",
       "--mca", "coll_tuned_allreduce_algorithm", "4"]


def lo_tx(field=8):
    """What the loopback has transmitted (/proc/net/dev): field 8 bytes,
    9 packets."""
    for line in open("/proc/net/dev"):
        name, _, fields = line.partition(":")
        if name.strip() == "lo":
            return int(fields.split()[field])
    sys.exit("no loopback device in /proc/net/dev")


def lo_tx_bytes():
    return lo_tx(8)


def lo_tx_packets():
    return lo_tx(9)


def tc(*args, check=True):
    return subprocess.run(["tc", *args], check=check, capture_output=True, text=True)


@contextlib.contextmanager
def shaped_loopback(rate):
    """The loopback limited to `rate` (tc tbf; netem is not in this kernel)
    for the duration."""
    if tc("qdisc", "show", "dev", "lo").stdout.split()[1:2] not in (["noqueue"], []):
        sys.exit(f"lo already has a qdisc: {tc('qdisc', 'show', 'dev', 'lo').stdout}")
    tc("qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate, "burst", "128kb",
       "latency", "50ms")
    try:
        yield
    finally:
        tc("qdisc", "del", "dev", "lo", "root", check=False)
