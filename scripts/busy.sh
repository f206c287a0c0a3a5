#!/usr/bin/env bash
# Run a command with the processor kept busy beside it: BUSY_SPINNERS processes (default 2) that spin
# at full speed, started first and stopped when the command ends, fails or is interrupted (Ctrl-C).
# Why: a test that passes only on an idle machine (a deadline in seconds, a tolerance one processor's
# kernels happen to meet) fails for a user whose laptop is doing something else; `make test-busy` runs
# the suite this way, to prove a test that waits or times something holds under load.
# Each spinner also ends on its own after BUSY_MAX_S seconds (default 3 h, `timeout`), so none outlives
# this script even if it is killed with SIGKILL and cannot clean up.
#
#   scripts/busy.sh COMMAND [ARGS...]      exit status: the command's
set -u

spinners=${BUSY_SPINNERS:-2}
max_s=${BUSY_MAX_S:-10800}
pids=()

stop_spinners() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null
    done
}
trap stop_spinners EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq "$spinners"); do
    timeout "$max_s" sh -c 'while :; do :; done' &
    pids+=("$!")
done
echo "busy.sh: $spinners spinning processes beside the command (each stopped with it, or after ${max_s} s):" \
     "$*; $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores" >&2

"$@"
