#!/usr/bin/env bash
# N JAX processes on this machine, as the hosts of a pod: the multi-host path on a laptop or CI.
#
#   scripts/multihost_local.sh N CONFIG WORKDIR [--config.a.b=v ...]
#   scripts/multihost_local.sh 2 configs/precisecoder.py:tiny /tmp/mh-tiny
#
# Each process gets DEVICES CPU devices (default 2) and joins a coordinator on a free localhost
# port (jax.distributed.initialize via JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES,
# JAX_PROCESS_ID). The mesh defaults to `fsdp` (one batch/parameter axis over all N x DEVICES
# devices); a later --config.model.mesh overrides it. Process i logs to WORKDIR/logs/process_i.log
# (its pid in process_i.pid: `kill -TERM` one of them to rehearse a preemption).
# Exits non-zero when any process does; Ctrl-C (or SIGTERM) stops them all.
set -euo pipefail
if [ $# -lt 3 ]; then sed -n 2,11p "$0"; exit 2; fi
n=$1 config=$2 workdir=$3; shift 3
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("localhost", 0)); print(s.getsockname()[1])')
mkdir -p "$workdir/logs"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' INT TERM
for ((i = 0; i < n; i++)); do
  JAX_PLATFORMS=cpu JAX_COORDINATOR_ADDRESS=localhost:$port JAX_NUM_PROCESSES=$n JAX_PROCESS_ID=$i \
  XLA_FLAGS="--xla_force_host_platform_device_count=${DEVICES:-2} ${XLA_FLAGS:-}" \
    "$python" -m precisecoder.train --config="$config" --workdir="$workdir" \
      --config.model.mesh=fsdp "$@" > "$workdir/logs/process_$i.log" 2>&1 &
  pids+=($!)
  echo $! > "$workdir/logs/process_$i.pid"
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
echo "$n processes done (exit $status); logs in $workdir/logs/"
exit $status
