#!/bin/bash
# A hand-written multi-process launcher of the kind people put in an sbatch script: it sets the rendezvous
# variables itself and sends each rank's output to Slurm-style files job_%j.%t.out / job_%j.%t.err.
# usage: slurm_like.sh WORLD SCRIPT OUTDIR JOBID PORT
WORLD=$1; SCRIPT=$2; OUT=$3; JOBID=$4; PORT=$5
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT WORLD_SIZE=$WORLD SLURM_JOB_ID=$JOBID SLURM_NTASKS=$WORLD
for ((t = 0; t < WORLD; t++)); do
  RANK=$t LOCAL_RANK=$t SLURM_PROCID=$t SLURM_LOCALID=$t \
    "$PYTHON" -u "$SCRIPT" > "$OUT/job_$JOBID.$t.out" 2> "$OUT/job_$JOBID.$t.err" &
done
status=0
for job in $(jobs -p); do wait "$job" || status=$?; done
exit $status
