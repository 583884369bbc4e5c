#!/usr/bin/env bash
# stop-rank.sh SIGNAL SECONDS COMMAND...: run under mpirun; rank 1 receives
# SIGNAL (STOP: it hangs; KILL: it dies) SECONDS after it starts COMMAND,
# the other ranks just run COMMAND.
set -eu
signal=$1 seconds=$2
shift 2
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then
  # exec keeps this PID, so the signal reaches COMMAND itself.
  (sleep "$seconds"; kill -s "$signal" $$) &
fi
exec "$@"
