#!/usr/bin/env bash
# Re-creates logs/: 2 CPU ranks under torchrun (gloo, 30 s timeout), rank 0 logs to wandb (offline) every batch.
# Once training runs, the wandb-core process(es) under rank 0 are SIGSTOPped so wandb.log's socket fills; after
# 10 s both ranks are py-spy dumped; gloo's timeout then ends the job; wandb-core is resumed and killed.
# Needs a venv with torch==2.13.0 (CPU), wandb==0.31.0 and py-spy on PATH.
set -u
cd "$(dirname "$0")"
rm -rf logs && mkdir -p logs/torchrun logs/pyspy logs/wandb
WORK=$(mktemp -d)                       # wandb's run dir and config stay out of logs/
export OMP_NUM_THREADS=1 WANDB_RUN_DIR="$WORK" WANDB_CONFIG_DIR="$WORK/config" WANDB_CACHE_DIR="$WORK/cache" \
       WANDB_DATA_DIR="$WORK/data" WANDB_DISABLE_GIT=true WANDB_SILENT=false
TORCHELASTIC_ERROR_FILE="$PWD/logs/torchrun_error.json" \
  torchrun --standalone --nproc-per-node 2 --tee 3 --log-dir logs/torchrun train.py \
  > logs/console.txt 2>&1 &
TR=$!
for _ in $(seq 1 240); do grep -qs "\[Rank 0\] Epoch 0: 40/" logs/console.txt && break; sleep 0.5; done
declare -A RANKPID
for pid in $(ps -o pid= --ppid "$TR"); do
  RANKPID[$(tr '\0' '\n' < "/proc/$pid/environ" | sed -n 's/^RANK=//p')]=$pid
done
R0=${RANKPID[0]}
STOPPED=""
for k in $(ps -o pid= --ppid "$R0"); do STOPPED="$STOPPED $k $(ps -o pid= --ppid "$k")"; done
echo "rank0 pid $R0; SIGSTOP wandb backend:$STOPPED"
ps -o pid,ppid,cmd -p $STOPPED | cut -c1-200
for k in $STOPPED; do kill -STOP "$k"; done
sleep 10                                # the socket fills, wandb.log blocks; rank 1 waits in all_reduce
for r in 0 1; do py-spy dump --pid "${RANKPID[$r]}" > "logs/pyspy/rank$r.txt" 2>&1; done
ps -o pid,ppid,stat,cmd -p "$R0" $STOPPED > logs/ps_rank0_tree.txt   # rank 0 and its stopped wandb children
wait "$TR"
echo "torchrun exit code: $?"
for k in $STOPPED; do kill -CONT "$k" 2>/dev/null; kill -9 "$k" 2>/dev/null; done
RUN=$(ls -d "$WORK"/wandb/offline-run-* 2>/dev/null | head -1)
[ -n "$RUN" ] && cp "$RUN"/logs/debug.log "$RUN"/logs/debug-internal.log logs/wandb/ 2>/dev/null
rm -rf "$WORK"
