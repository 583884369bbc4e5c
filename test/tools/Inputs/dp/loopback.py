"""Measuring what crosses Open MPI's transport inside a private network
namespace (unshare -n): the mpirun flags that make it TCP over the
namespace's loopback only (no shared memory) with the ring all-reduce, and
the loopback's transmit byte counter. Shared by loopback_bytes.py and
bench/bench_onebit.py."""
import sys

MCA = ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
       "--mca", "oob_tcp_if_include", "lo",
       "--mca", "coll_tuned_use_dynamic_rules", "1",
       "--mca", "coll_tuned_allreduce_algorithm", "4"]


def lo_tx_bytes():
    """Bytes the loopback has transmitted (/proc/net/dev)."""
    for line in open("/proc/net/dev"):
        name, _, fields = line.partition(":")
        if name.strip() == "lo":
            return int(fields.split()[8])
    sys.exit("no loopback device in /proc/net/dev")
