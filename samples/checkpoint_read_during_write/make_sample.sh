#!/usr/bin/env bash
# Re-creates logs/: 4 CPU ranks under torchrun (gloo, 20 s timeout), tee'd per-rank files, @record error files.
# The failure is a real race (load while another process writes), so the run is repeated (at most 5 times)
# until a reader hits it; each attempt's outcome is printed. Needs torch==2.13.0 (CPU) on PATH.
set -u
cd "$(dirname "$0")"
for attempt in 1 2 3 4 5; do
  rm -rf logs output && mkdir -p logs/torchrun output
  OMP_NUM_THREADS=1 OUTPUT_DIR=output TORCHELASTIC_ERROR_FILE="$PWD/logs/torchrun_error.json" \
    torchrun --standalone --nproc-per-node 4 --tee 3 --log-dir logs/torchrun train.py \
    > logs/console.txt 2>&1
  rc=$?
  rm -rf output                      # the checkpoint itself is not an artifact
  if grep -q "PytorchStreamReader failed" logs/console.txt; then
    echo "attempt $attempt: torchrun exit code $rc, reader hit the half-written checkpoint"; exit 0
  fi
  echo "attempt $attempt: torchrun exit code $rc, race not hit; retrying"
done
exit 1
