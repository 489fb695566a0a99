#!/usr/bin/env bash
# The main job: the small policy's base (built once and cached: `precisecoder base`), then
# PreciseCoder (GDPO on r_lambda) on the generator's easy tier, offline on CPU; evaluation
# before and after, then a report (report.md, report.json, PNGs).
#
#   scripts/main_job.sh [--workdir=DIR] [--config=FILE[:PRESET]] [--config.a.b=v ...] [--dry-run]
#
# The arguments are the trainer's (python -m precisecoder.train): --workdir=DIR (default
# runs/main), --config=FILE[:PRESET] (default configs/precisecoder.py:local of this
# repository) and --config.a.b=v overrides. A single bare DIR is taken as the workdir, as
# before. Paths are relative to the folder you run the script from. --dry-run prints the
# trainer's command line and exits. Running it again in the same workdir resumes (or, once
# finished, just rewrites the report).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

fail() { echo "scripts/main_job.sh: error: $*" >&2; exit 2; }
workdir="" config="$repo/configs/precisecoder.py:local" dry_run=0 overrides=()
set_workdir() {
  [ -n "$1" ] || fail "the workdir is empty"
  [ -z "$workdir" ] || fail "two workdirs given: '$workdir' and '$1'"
  workdir=$1
}
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --dry-run) dry_run=1 ;;
    --workdir=*) set_workdir "${1#--workdir=}" ;;
    --workdir) [ $# -ge 2 ] || fail "--workdir needs a value"; set_workdir "$2"; shift ;;
    --config=*) config=${1#--config=} ;;
    --config) [ $# -ge 2 ] || fail "--config needs a value"; config=$2; shift ;;
    --config.*=*|--noconfig.*) overrides+=("$1") ;;
    # Without '=', the value would be the next argument, which could also be a workdir.
    --config.*) fail "$1: give overrides as $1=VALUE" ;;
    -*) fail "unknown argument $1 (the trainer's: --workdir=DIR, --config=FILE[:PRESET]," \
             "--config.a.b=v)" ;;
    *) set_workdir "$1" ;;
  esac
  shift
done
workdir=${workdir:-runs/main}
command=("$repo/.venv/bin/python" -m precisecoder.train "--config=$config" "--workdir=$workdir"
         ${overrides[@]+"${overrides[@]}"})
if [ "$dry_run" = 1 ]; then
  printf '%q ' "${command[@]}"; echo
  exit 0
fi

"$repo/scripts/bootstrap.sh"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s)
"${command[@]}"
echo "main job: $(( $(date +%s) - start )) s; report: $workdir/report.md"
