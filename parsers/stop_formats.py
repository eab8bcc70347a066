"""Line formats of the ways a job is ended from outside the training script: the scheduler (Slurm's slurmstepd and
srun), Kubernetes (the kubelet's eviction and preemption messages, as `kubectl describe` and events show them) and
launchers receiving the stop signal (torchrun's agent, the DeepSpeed launcher, Lightning). Same declaration shape
as formats.FORMAT_DEFS, which appends these.

Wordings are the sources' own:
- slurmstepd `src/slurmd/slurmstepd/req.c` (Slurm 14.03 to 25.11): `error("*** %s ON %s CANCELLED AT %s DUE TO TIME
  LIMIT ***", entity, node_name, time_str)` and the PREEMPTION, `NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS`,
  `JOB REQUEUE`, `TASK FAILURE` variants; scancel's SIGTERM/SIGKILL as `*** %s ON %s CANCELLED AT %s ***` (before
  25.05) or `... DUE to SIGNAL %s ***` (25.05+, strsignal's name); before 15.08 without `ON %s`. The entity is
  `JOB <id>` (the batch script) or `STEP <id>.<step>`; the log prefix is `slurmstepd:` or `slurmstepd-<node>:`.
- srun `src/srun/launch.c`: `error("%s: %s %s: %s%s", hosts, task_str, tasks, strsignal(sig), core)`, i.e.
  `srun: error: node1: tasks 0-2: Terminated` (task_str `task` or `tasks`).
- kubelet (Kubernetes `pkg/kubelet/eviction/helpers.go`, `preemption/preemption.go`, `nodeshutdown/`), the scheduler's
  preemption event (`defaultpreemption`) and the node controller's eviction events (`controller/util/node`,
  `nodelifecycle/scheduler/taint_manager.go`); container state `Reason: OOMKilled` (the runtime's reason).
- torchrun `torch/distributed/elastic/agent/server/api.py`: `logger.warning("Received %s death signal, shutting down
  workers", e.sigval)` (a signal.Signals: `Signals.SIGTERM` on Python <= 3.10, `15` from 3.11); DeepSpeed
  `deepspeed/launcher/launch.py` `Main process received SIGTERM, exiting`; Lightning's SignalConnector
  `Received SIGTERM: 15` (`[rank: N] ` prefixed).
"""
from __future__ import annotations

DEFS: list[dict] = [
    {"name": "slurm-cancelled", "kind": "job_stopped", "level": "error",
     "triggers": ["CANCELLED AT"],
     "pattern": r"\*\*\* (?P<entity>JOB|STEP) (?P<job>[\w.+-]{1,40}) (?:ON (?P<host>[^\s*]{1,255}) )?CANCELLED AT "
                r"(?P<at>[^*\n]{1,60}?)(?: DUE [Tt][Oo] (?P<due>TIME LIMIT|PREEMPTION|NODE FAILURE|JOB REQUEUE|"
                r"TASK FAILURE|SIGNAL [\w ]{1,30}?))?,?(?: SEE SLURMCTLD LOG FOR DETAILS)? \*\*\*",
     "samples": [("slurmstepd-vm: error: *** STEP 18.0 ON vm CANCELLED AT 2026-11-28T20:35:28 DUE TO TIME LIMIT ***",
                  {"entity": "STEP", "job": "18.0", "host": "vm", "at": "2026-11-28T20:35:28", "due": "TIME LIMIT"}),
                 ("slurmstepd-vm: error: *** JOB 15 ON vm CANCELLED AT 2026-11-28T20:32:34 ***",
                  {"entity": "JOB", "job": "15", "host": "vm", "due": None}),
                 ("slurmstepd: error: *** JOB 4242 ON gpu-node-03 CANCELLED AT 2024-03-01T10:00:00 DUE TO NODE "
                  "FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***", {"host": "gpu-node-03", "due": "NODE FAILURE"}),
                 ("slurmstepd: error: *** STEP 77.1 ON n1 CANCELLED AT 2025-06-01T08:00:00 DUE to SIGNAL Terminated ***",
                  {"due": "SIGNAL Terminated"}),
                 ("slurmstepd: error: *** JOB 99 CANCELLED AT 2014-05-01T08:00:00 DUE TO PREEMPTION ***",
                  {"job": "99", "host": None, "due": "PREEMPTION"})]},
    # srun's report of tasks a signal ended (the other signals: formats' fatal-signal; exit codes: agent-failed)
    {"name": "srun-task-signal", "kind": "task_signal", "level": "warning",
     "triggers": [": Terminated", ": Killed"],
     "pattern": r"\bsrun: error: (?P<host>[^\s:]{1,255}): tasks? (?P<tasks>[\d,\-\[\]]{1,200}): "
                r"(?P<signame>Terminated|Killed)\b",
     "samples": [("srun: error: vm: tasks 0-2: Terminated", {"host": "vm", "tasks": "0-2", "signame": "Terminated"}),
                 ("srun: error: gpu-node-03: task 3: Killed", {"host": "gpu-node-03", "tasks": "3", "signame": "Killed"})]},
    {"name": "k8s-stopped", "kind": "job_stopped", "level": "error",
     "triggers": ["low on resource", "had condition:", "Preempted in order to admit critical pod", "Preempted by",
                  "Node is shutting, evicting pods", "Marking for deletion Pod", "Evicted"],
     "pattern": r"(?:The node was low on resource: (?P<k8s_resource>[\w-]{1,40}(?:\.[\w-]{1,40})?)(?=[.,\s]|$)|The node had condition: "
                r"\[?(?P<k8s_condition>[\w, -]{1,80})|(?P<k8s_critical>Preempted in order to admit critical pod)|"
                r"Preempted by (?P<k8s_preemptor>\S{1,255}) on node (?P<k8s_node>[^\s,]{1,255})|"
                r"(?P<k8s_shutdown>Node is shutting, evicting pods)|Marking for deletion Pod (?P<k8s_pod>\S{1,255})"
                r"(?: from Node (?P<k8s_lost_node>\S{1,255}))?|^\s*(?:Reason|Status):\s+(?P<k8s_evicted>Evicted)\s*$)",
     "samples": [("Message:      The node was low on resource: memory. Container trainer was using 61Gi, which exceeds "
                  "its request of 32Gi. ", {"k8s_resource": "memory"}),
                 ("  Warning  Preempting  2m  kubelet  Preempted in order to admit critical pod",
                  {"k8s_critical": "Preempted in order to admit critical pod"}),
                 ("  Normal  Preempted  1m  default-scheduler  Preempted by team-b/big-job on node gpu-07",
                  {"k8s_preemptor": "team-b/big-job", "k8s_node": "gpu-07"}),
                 ("Reason:       Evicted", {"k8s_evicted": "Evicted"})]},
    {"name": "k8s-oomkilled", "kind": "host_oom", "level": "error",
     "triggers": ["OOMKilled"],
     "pattern": r"\b(?P<oomkilled>OOMKilled)\b",
     "samples": [("      Reason:       OOMKilled", {"oomkilled": "OOMKilled"})]},
    {"name": "launcher-stop-signal", "kind": "agent_stopped", "level": "warning",
     "triggers": ["death signal, shutting down workers", "Main process received", "Received SIGTERM: "],
     "pattern": r"(?:Received (?:Signals\.)?(?P<agent_sig>SIG[A-Z]{2,6}|\d{1,2}) death signal, shutting down workers|"
                r"Main process received (?P<ds_sig>SIG[A-Z]{2,6}), exiting|Received SIGTERM: (?P<pl_sig>\d{1,2}))",
     "samples": [("W1121 13:19:56.375000 9590 torch/distributed/elastic/agent/server/api.py:753] Received 15 death "
                  "signal, shutting down workers", {"agent_sig": "15"}),
                 ("WARNING:torch.distributed.elastic.agent.server.api:Received Signals.SIGTERM death signal, shutting "
                  "down workers", {"agent_sig": "SIGTERM"}),
                 ("[2024-05-01 10:00:00,000] [INFO] [launch.py:336:sigkill_handler] Main process received SIGTERM, "
                  "exiting", {"ds_sig": "SIGTERM"}),
                 ("[rank: 0] Received SIGTERM: 15", {"pl_sig": "15"})]},
]
