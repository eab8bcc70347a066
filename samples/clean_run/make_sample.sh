#!/usr/bin/env bash
# Re-creates logs/: a 2-rank CPU job under torchrun (gloo) that completes. OMP_NUM_THREADS is left unset on
# purpose so torchrun prints its banner. Needs torch==2.13.0 (CPU) and tqdm on PATH.
set -u
cd "$(dirname "$0")"
rm -rf logs && mkdir -p logs/torchrun
WORK=$(mktemp -d)                    # the final checkpoint is not an artifact
unset OMP_NUM_THREADS
OUTPUT_DIR="$WORK" TORCHELASTIC_ERROR_FILE="$PWD/logs/torchrun_error.json" \
  torchrun --standalone --nproc-per-node 2 --tee 3 --log-dir logs/torchrun train.py \
  > logs/console.txt 2>&1
echo "torchrun exit code: $?"
rm -rf "$WORK"
