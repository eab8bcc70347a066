#!/usr/bin/env bash
# Re-creates logs/: 2 CPU ranks under torchrun (gloo), tee'd per-rank files, @record error files.
# Needs torch==2.13.0 (CPU) on PATH.
set -u
cd "$(dirname "$0")"
rm -rf logs && mkdir -p logs/torchrun
export OMP_NUM_THREADS=1
TORCHELASTIC_ERROR_FILE="$PWD/logs/torchrun_error.json" \
  torchrun --standalone --nproc-per-node 2 --tee 3 --log-dir logs/torchrun train.py \
  > logs/console.txt 2>&1
echo "torchrun exit code: $?"
