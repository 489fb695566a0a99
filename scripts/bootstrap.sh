#!/usr/bin/env bash
# Creates .venv (once) and installs the pinned stack and this package into it. Idempotent:
# a stamp file skips pip when requirements have not changed (and then prints nothing).
# PRECISECODER_ACCELERATOR=cuda|tpu adds requirements-cuda.txt / requirements-tpu.txt (the same
# jax built for that accelerator); unset or "cpu": the CPU stack only.
# PRECISECODER_INTEGRATIONS=1 adds requirements-integrations.txt (TRL, for the adapter tests).
# Set-up prints one line per stage; pip runs quiet, minus the notices some pip configurations
# print for every package (an index location that does not exist): its real warnings and
# errors still show.
set -euo pipefail

# pip's "WARNING: Location 'file:///...' is ignored: it is neither a file nor a directory."
# comes once per package from an --extra-index-url / --find-links entry that has no folder for
# that package: configuration noise, not a problem with the install.
PIP_NOISE="^WARNING: Location '[^']*' is ignored: it is neither a file nor a directory\.$"

pip_filter() {  # stdin -> stderr without PIP_NOISE; never fails (pip's status decides)
  grep -v -E "$PIP_NOISE" >&2 || true
}

stage() {  # stage LABEL PIP_ARGS...: one line, then pip, quiet and filtered
  local label=$1
  shift
  echo "bootstrap: [$((++done_stages))/$stages] $label (at $((SECONDS - started)) s)"
  if ! .venv/bin/python -m pip "$@" -q 2>&1 1>&3 | pip_filter; then
    echo "bootstrap: failed while $label (pip's messages are above)" >&2
    exit 1
  fi
}

# The CPU stack fills about 2.5 GiB in .venv, and pip unpacks wheels beside it (torch is the
# largest). With less free, pip stops partway with "No space left on device"; say so first.
check_space() {  # check_space DIR MIB WHAT: fails, in one line naming DIR and the figures,
  local free_mib   # when DIR's disk has less than MIB free for WHAT
  free_mib=$(( $(df -Pk "$1" | awk 'NR == 2 {print $4}') / 1024 ))
  if [ "$free_mib" -lt "$2" ]; then
    echo "$(basename "$0"): $free_mib MiB free on $(cd "$1" && pwd)'s disk; $3 needs about" \
         "$2 MiB: free some space and run it again" >&2
    return 1
  fi
}

main() {
  cd "$(dirname "$0")/.."
  local py=${PYTHON:-python3} ACCEL=${PRECISECODER_ACCELERATOR:-cpu} extra=() file
  case "$ACCEL" in
    cpu) ;;
    cuda|tpu) extra=("requirements-$ACCEL.txt") ;;
    *) echo "PRECISECODER_ACCELERATOR=$ACCEL: want cpu, cuda or tpu" >&2; exit 2 ;;
  esac
  [ "${PRECISECODER_INTEGRATIONS:-0}" = 1 ] && extra+=("requirements-integrations.txt")
  local stamp
  stamp=.venv/.installed-$(cat requirements.txt requirements-nodeps.txt pyproject.toml \
    ${extra[@]+"${extra[@]}"} | sha1sum | cut -c1-12)
  [ -x .venv/bin/python ] && [ -f "$stamp" ] && return 0
  if [ -x .venv/bin/python ]; then  # an update: pip unpacks only the changed wheels
    check_space . 1024 "an update of .venv (pip's unpacking)" || exit 1
  else
    check_space . 3072 "the pinned stack (.venv and pip's unpacking)" || exit 1
  fi
  started=$SECONDS done_stages=0 stages=$((5 + ${#extra[@]}))
  exec 3>&1
  echo "bootstrap: [$((++done_stages))/$stages] creating .venv with $("$py" --version 2>&1)" \
       "(the pinned stack: a few minutes)"
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  stage "upgrading pip" install --upgrade pip
  stage "installing requirements.txt (jax, flax, torch, transformers, ...)" \
    install -r requirements.txt
  for file in ${extra[@]+"${extra[@]}"}; do stage "installing $file" install -r "$file"; done
  stage "installing requirements-nodeps.txt" install --no-deps -r requirements-nodeps.txt
  stage "installing precisecoder (editable)" install --no-deps -e .
  rm -f .venv/.installed-*
  touch "$stamp"
  echo "bootstrap: .venv ready in $((SECONDS - started)) s"
}

# Sourced (by a test), it only defines the functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
