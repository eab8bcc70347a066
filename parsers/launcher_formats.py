"""Line formats of launchers' own endings that name the rank that ended a job, beyond torchrun/srun/mp.spawn
(formats.py): Open MPI's mpirun (orte/tools/orterun/help-orterun.txt and orte/mca/errmgr help texts, printed
verbatim by Open MPI 4.x) and Ray Train's report of a worker whose process died. Same declaration shape as formats.FORMAT_DEFS, which appends these."""
from __future__ import annotations

DEFS: list[dict] = [
    # "mpirun noticed that process rank %s with PID %s on node %s exited on signal %d (%s)." -- the process that
    # died by a signal first; its MPI rank is the job's rank (mpirun's [J,R] tags and OMPI_COMM_WORLD_RANK)
    {"name": "mpirun-noticed-signal", "kind": "exit", "level": "error",
     "triggers": ["mpirun noticed that process rank"],
     "pattern": r"mpirun noticed that process rank (?P<task>\d{1,7}) with PID (?P<pid>\d{1,10}) on node "
                r"(?P<node>[^\s]{1,255}) exited on signal (?P<mpi_signal>\d{1,3})(?: \((?P<signame>[^)\n]{1,40})\))?",
     "samples": [("mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 11 (Segmentation fault).",
                  {"task": "2", "mpi_signal": "11", "signame": "Segmentation fault"}),
                 ("mpirun noticed that process rank 0 with PID 4242 on node gpu-07 exited on signal 9 (Killed).",
                  {"task": "0", "pid": "4242", "mpi_signal": "9"})]},
    # "mpirun detected that one or more processes exited with non-zero status, thus causing the job to be
    # terminated. The first process to do so was:\n\n  Process name: [[J,1],R]\n  Exit code:    N"
    {"name": "mpirun-first-nonzero", "kind": "exit", "level": "error",
     "triggers": ["Process name: [["],
     "pattern": r"^\s*Process name: \[\[\d{1,10},\d{1,10}\],(?P<task>\d{1,7})\]\s*$",
     "samples": [("  Process name: [[28186,1],2]", {"task": "2"})]},
    # Ray Train v2 (train/v2/_internal/exceptions.py WorkerHealthCheckFailedError): "A worker health check failed.\n
    # Worker info: Worker(... distributed_context=DistributedContext(world_rank=R, world_size=N, ...) ...)" then "The
    # actor died unexpectedly before finishing this task." -- the process of rank R died (os._exit, a signal, a kill)
    {"name": "ray-worker-died", "kind": "exit", "level": "error",
     "triggers": ["distributed_context=DistributedContext(world_rank="],
     "pattern": r"distributed_context=DistributedContext\(world_rank=(?P<task>\d{1,7}), world_size=\d{1,7}",
     "samples": [("  distributed_context=DistributedContext(world_rank=1, world_size=5, local_rank=1, local_world_size=5,"
                  " node_rank=0),", {"task": "1"})]},
]
