#!/usr/bin/env bash
# Re-creates logs/: 4 CPU ranks under torchrun (gloo, 30 s timeout). While rank 3 hangs, py-spy dumps every
# rank (text, plus --json for rank 3); each rank's watchdog thread writes its flight recorder (pickle) after 12 s
# without progress; then gloo's timeout ends the job. Needs torch==2.13.0 (CPU) and py-spy on PATH.
set -u
cd "$(dirname "$0")"
rm -rf logs && mkdir -p logs/torchrun logs/pyspy logs/fr
export OMP_NUM_THREADS=1 TORCH_FR_BUFFER_SIZE=2000 TORCH_FR_DUMP_TEMP_FILE=logs/fr/fr_rank_
TORCHELASTIC_ERROR_FILE="$PWD/logs/torchrun_error.json" \
  torchrun --standalone --nproc-per-node 4 --tee 3 --log-dir logs/torchrun train.py \
  > logs/console.txt 2>&1 &
TR=$!                                   # the torchrun agent; the 4 workers are its children
for _ in $(seq 1 240); do
  grep -qs "\[Rank 3\] Forward: Encoder input" logs/console.txt && break; sleep 0.5
done
sleep 4                                 # ranks 0-2 are now waiting in all_reduce, rank 3 in encoder_forward
for pid in $(ps -o pid= --ppid "$TR"); do
  rank=$(tr '\0' '\n' < "/proc/$pid/environ" | sed -n 's/^RANK=//p')
  py-spy dump --pid "$pid" > "logs/pyspy/rank$rank.txt" 2>&1
  if [ "$rank" = 3 ]; then py-spy dump --pid "$pid" --json > logs/pyspy/rank3.json 2>&1; fi
done
wait "$TR"
echo "torchrun exit code: $?"
