#!/usr/bin/env bash
# Re-creates logs/ for this sample: 4 CPU ranks under torchrun (gloo, 20 s timeout), tee'd per-rank files,
# @record error files and flight-recorder JSON per rank. Needs torch==2.13.0 (CPU) on PATH.
set -u
cd "$(dirname "$0")"
rm -rf logs && mkdir -p logs/torchrun logs/fr
export OMP_NUM_THREADS=1
export TORCH_FR_BUFFER_SIZE=2000
export TORCH_FR_DUMP_TEMP_FILE=logs/fr/fr_rank_
TORCHELASTIC_ERROR_FILE="$PWD/logs/torchrun_error.json" \
  torchrun --standalone --nproc-per-node 4 --tee 3 --log-dir logs/torchrun train.py \
  > logs/console.txt 2>&1
echo "torchrun exit code: $?"
