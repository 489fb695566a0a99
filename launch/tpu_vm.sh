#!/usr/bin/env bash
# Cloud TPU VM lifecycle for a training run (single host or multi-host pod).
#
#   launch/tpu_vm.sh create              # queued resource, spot capacity
#   launch/tpu_vm.sh setup               # copy this checkout to every worker, bootstrap
#                                        # (requirements.txt + requirements-tpu.txt: same jax)
#   launch/tpu_vm.sh run CONFIG [FLAGS]  # same program on all workers, in the background
#   launch/tpu_vm.sh resume CONFIG       # after preemption: recreate, setup, run again
#   launch/tpu_vm.sh logs | status | delete
#
# Settings (environment): TPU_NAME, ZONE, ACCELERATOR (v5p-32), RUNTIME, PROJECT,
# RUN_DIR (gs://bucket/runs/NAME): the run's workdir. Orbax writes checkpoints to
# RUN_DIR/checkpoints and process 0 copies metrics, TensorBoard events, evaluations and the
# report up after every step, so a run resumed on fresh VMs continues from the last step with
# its whole history. Every worker runs `python -m precisecoder.train`; the program calls
# jax.distributed.initialize() when more than one host is present.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${TPU_NAME:?set TPU_NAME}" "${ZONE:?set ZONE}" "${RUN_DIR:?set RUN_DIR (gs://bucket/runs/NAME)}"
case "$RUN_DIR" in gs://*) ;; *) echo "RUN_DIR must be a gs:// bucket path (a VM's disk dies with it)" >&2; exit 2 ;; esac
ACCELERATOR=${ACCELERATOR:-v5p-32}
RUNTIME=${RUNTIME:-v2-alpha-tpuv5}
PROJECT_FLAG=${PROJECT:+--project=$PROJECT}
REMOTE_DIR=precisecoder
tpu() { gcloud compute tpus tpu-vm "$@" --zone="$ZONE" $PROJECT_FLAG; }
on_all() { tpu ssh "$TPU_NAME" --worker=all --command="$1"; }

create() {
  gcloud compute tpus queued-resources create "$TPU_NAME" --node-id="$TPU_NAME" \
    --accelerator-type="$ACCELERATOR" --runtime-version="$RUNTIME" --spot \
    --zone="$ZONE" $PROJECT_FLAG
  until [ "$(gcloud compute tpus queued-resources describe "$TPU_NAME" --zone="$ZONE" \
      $PROJECT_FLAG --format='value(state.state)')" = ACTIVE ]; do
    echo "waiting for $TPU_NAME ..."; sleep 30
  done
}

setup() {
  tar czf /tmp/precisecoder.tgz --exclude=.venv --exclude=runs --exclude=.git .
  tpu scp /tmp/precisecoder.tgz "$TPU_NAME":/tmp/ --worker=all
  on_all "mkdir -p $REMOTE_DIR && tar xzf /tmp/precisecoder.tgz -C $REMOTE_DIR && \
    cd $REMOTE_DIR && PRECISECODER_ACCELERATOR=tpu scripts/bootstrap.sh"
}

run() {
  local config=$1; shift
  on_all "cd $REMOTE_DIR && nohup .venv/bin/python -m precisecoder.train \
    --config=$config --workdir=$RUN_DIR $* > train.log 2>&1 &"
}

case "${1:-}" in
  create) create ;;
  setup) setup ;;
  run) shift; run "$@" ;;
  resume) shift; tpu delete "$TPU_NAME" --quiet || true
          gcloud compute tpus queued-resources delete "$TPU_NAME" --zone="$ZONE" \
            $PROJECT_FLAG --quiet --force || true
          create; setup; run "$@" ;;
  logs) on_all "tail -n 20 $REMOTE_DIR/train.log" ;;
  status) gcloud compute tpus queued-resources describe "$TPU_NAME" --zone="$ZONE" $PROJECT_FLAG ;;
  delete) gcloud compute tpus queued-resources delete "$TPU_NAME" --zone="$ZONE" $PROJECT_FLAG \
            --quiet --force ;;
  *) sed -n 2,16p "$0"; exit 2 ;;
esac
