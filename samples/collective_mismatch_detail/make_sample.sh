#!/usr/bin/env bash
# Re-creates logs/: 4 CPU ranks under torchrun (gloo, 20 s timeout) with TORCH_DISTRIBUTED_DEBUG=DETAIL,
# tee'd per-rank files, @record error files. Needs torch==2.13.0 (CPU) on PATH.
set -u
cd "$(dirname "$0")"
rm -rf logs && mkdir -p logs/torchrun
export OMP_NUM_THREADS=1 TORCH_DISTRIBUTED_DEBUG=DETAIL
TORCHELASTIC_ERROR_FILE="$PWD/logs/torchrun_error.json" \
  torchrun --standalone --nproc-per-node 4 --tee 3 --log-dir logs/torchrun train.py \
  > logs/console.txt 2>&1
echo "torchrun exit code: $?"
