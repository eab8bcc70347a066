#!/usr/bin/env bash
# Re-creates logs/ for this sample: 4 CPU ranks under torchrun (gloo, 20 s timeout), run under `postmortem collect`
# as a user would: arrival-stamped console with every worker line tagged [rankN]: (torchrun's tee, set by the
# collector), torchrun's per-rank files and @record error files, py-spy dumps (--native) of every rank when the job
# went quiet, the flight-recorder JSON the script writes per rank, and manifest.json. Needs torch==2.13.0 (CPU) and
# py-spy on PATH, and postmortem importable (run from the repository, or installed).
set -u
cd "$(dirname "$0")"
rm -rf logs
export OMP_NUM_THREADS=1
python -m postmortem collect --out logs --node node0 --stall-after 8 --no-analyze -- \
  torchrun --standalone --nproc-per-node 4 train.py > /dev/null 2>&1
echo "collector exit code: $? (the job's: rank 0 timed out, so 1)"
