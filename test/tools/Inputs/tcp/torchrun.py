"""torchrun.py [--nproc N] [--kill RANK:SECONDS] [--stop RANK:SECONDS]
               [--env RANK:NAME=VALUE] [--impostor zeros|frames]
               [--timeout S] [--report] -- COMMAND...

Starts COMMAND N times as torchrun starts a job's workers (its environment
alone: MASTER_ADDR=127.0.0.1, a free MASTER_PORT, RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE; no MPI), so the tests need no torchrun
(Debian's torch 1.13 one fails under Python 3.11). Their output passes
through. --kill R:S sends SIGKILL to rank R after S seconds, --stop R:S
SIGSTOP (the rank hangs; it is killed once the others have ended); --env R:X=Y
sets X=Y for rank R alone. --impostor starts no rank 0: a thread answers
on MASTER_PORT instead, with zero bytes without end (zeros: another program
on the port) or with dsc's start-up as rank 0 sends it, then zero bytes
(frames: a stream no rank sends). Exits 0 when every rank succeeded, 1 when one
failed, 124 after --timeout seconds (default 300), when it kills every rank
and says so; --report prints each rank's exit status and seconds to
stderr."""
import argparse
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

# lib/Runtime/TcpCommunicator.cpp: Stamp (magic "dsc1", protocol version,
# WORLD_SIZE, rank) and, per rank, Address (IPv4, port, 64-byte host name).
MAGIC, PROTOCOL_VERSION, ADDRESS_BYTES = 0x64736331, 2, 72


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def impostor(listener, mode, nproc):
    """Answers every connection to `listener` as --impostor `mode` says."""
    def answer(conn):
        try:
            if mode == "frames":
                conn.sendall(struct.pack("<IIii", MAGIC, PROTOCOL_VERSION, nproc, 0)
                             + bytes(ADDRESS_BYTES * nproc))
            while True:
                conn.sendall(bytes(65536))
        except OSError:  # the rank gave up and closed the connection
            conn.close()
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=answer, args=(conn,), daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--kill", action="append", default=[])
    ap.add_argument("--stop", action="append", default=[])
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--impostor", choices=["zeros", "frames"])
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    port = free_port()
    procs = {}
    if a.impostor:
        listener = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=impostor, args=(listener, a.impostor, a.nproc),
                         daemon=True).start()
    for r in range(1 if a.impostor else 0, a.nproc):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   RANK=str(r), WORLD_SIZE=str(a.nproc), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(a.nproc), OMP_NUM_THREADS="1")
        for item in a.env:
            rank, _, assignment = item.partition(":")
            if int(rank) == r:
                name, _, value = assignment.partition("=")
                env[name] = value
        procs[r] = subprocess.Popen(command, env=env)
    signals = {int(r): (float(s), signal.SIGKILL) for r, s in (k.split(":") for k in a.kill)}
    signals.update({int(r): (float(s), signal.SIGSTOP)
                    for r, s in (k.split(":") for k in a.stop)})
    stopped = set()
    start = time.time()
    ended = {}
    while len(ended) < len(procs):
        now = time.time() - start
        for r, p in procs.items():
            if r not in ended and p.poll() is not None:
                ended[r] = (p.returncode, now)
            if r in signals and now >= signals[r][0] and r not in ended:
                p.send_signal(signals[r][1])
                if signals[r][1] == signal.SIGSTOP:
                    stopped.add(r)
                del signals[r]
        if stopped and all(r in ended or r in stopped for r in procs):
            for r in stopped:
                procs[r].kill()
            stopped = set()
        if now > a.timeout:
            for p in procs.values():
                p.kill()
            print("torchrun.py: ranks still running after %g s: killed" % a.timeout,
                  file=sys.stderr)
            sys.exit(124)
        time.sleep(0.05)
    if a.report:
        for r in sorted(ended):
            code, seconds = ended[r]
            print("rank %d: exit %d after %.1f s" % (r, code, seconds), file=sys.stderr)
    codes = [ended[r][0] for r in sorted(ended)]
    sys.exit(next((c for c in codes if c != 0), 0) and 1)


if __name__ == "__main__":
    main()
