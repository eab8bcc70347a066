"""The lab's mechanisms: which script, which category counts as right, who the culprit is, how a run is drawn
(world size, culprit rank, fault step, timing) and how the harness checks from the side channel that the run did
what it was designed to do."""
from __future__ import annotations

import dataclasses
import random
from typing import Callable

GENERIC = ["torchrun-tee", "torchrun-console", "torchrun-redirects", "spawn", "slurm", "jsonl", "accelerate",
           "collect", "torchrun-restarts"]
CATEGORIES = {"gpu_oom", "host_oom", "dataloader_failure", "barrier_skew", "straggler", "logging_blocking",
              "checkpoint_corruption", "nccl_error", "gpu_hardware", "nan_inf", "ddp_usage_error", "rank_crash",
              "collective_timeout", "no_failure", "unknown", "job_stopped"}
STYLE = {"spawn": "logging", "jsonl": "jsonl", "loguru": "loguru", "structlog-json": "structlog-json",
         "structlog-console": "structlog-console", "absl": "absl", "shared-logfile": "sharedlog",
         "hydra": "hydralog"}


@dataclasses.dataclass
class Mech:
    name: str
    script: str
    cls: str
    categories: tuple[str, ...]
    check: str                      # exception | silent | hang | alike | clean | oomkill | stopped
    root: str                       # root-cause template: {c} culprits, {step}, {ws}, {others}, {p[...]}
    launchers: list[str] = dataclasses.field(default_factory=lambda: ["torchrun-tee", "torchrun-console", "slurm"])
    per_launcher: int = 1
    ws: tuple[int, ...] = (2, 3, 3, 4, 4, 5, 6, 8)  # drawn uniformly from the tuple: 2-4 mostly, up to 8
    culprit: str = "any"            # any | zero | nonzero | none (every rank alike) | last
    steps: tuple[int, int] = (4, 12)
    total: int = 16
    exc: str | None = None          # exception type the culprit (or every rank, for alike) must end with
    params: dict = dataclasses.field(default_factory=dict)
    min_nearmiss: int = 0
    extra: Callable[[random.Random, int, str], dict] | None = None
    nearmiss_kind: str = "fault"    # fault | near-miss (for the README table)
    ws_by_launcher: dict = dataclasses.field(default_factory=dict)
    needs_fault: bool = False       # exception check: the culprit must also have written a fault record
    prepare: str | None = None      # script run in the job dir before the launch (a previous run's leftovers)
    culprit_fn: Callable[[dict, int], list[int]] | None = None

    def ws_for(self, launcher: str) -> tuple[int, ...]:
        return self.ws_by_launcher.get(launcher, self.ws)

    def draw(self, rng: random.Random, ws: int, launcher: str) -> dict:
        """The varied part of a run's params."""
        if self.culprit == "zero":
            c = 0
        elif self.culprit == "nonzero":
            c = rng.randrange(1, ws)
        elif self.culprit == "last":
            c = ws - 1
        elif self.culprit == "none":
            c = -1
        else:
            c = rng.randrange(ws)
        p = {"culprit": c, "step": rng.randint(*self.steps), "steps": self.total,
             "pg_timeout": rng.choice(self.params.get("pg_timeouts", [20, 25, 30])),
             "sleep": round(rng.uniform(0.02, 0.1), 3), "fmt": rng.choice(["rank", "kv", "ts", "plain"]),
             "style": STYLE.get(launcher, "print")}
        if launcher == "slurm":
            p["jobid"] = rng.randint(100000, 999999)
        if self.check == "hang" or (self.check == "failed" and "pg_timeouts" in self.params):
            if launcher != "collect":  # collect takes its own py-spy dumps on a stall
                p["pyspy"] = rng.choice([None, "text", "text", "json", "native"])
            p["fr"] = rng.random() < 0.5  # the job enables the flight recorder and dumps it from a watchdog thread
        if self.extra:
            p.update(self.extra(rng, ws, launcher))
        p.update(launcher_draw(rng, launcher, ws))
        return p

    def culprits(self, p: dict, ws: int) -> list[int]:
        if self.culprit_fn:
            return self.culprit_fn(p, ws)
        if self.check == "clean":  # a near miss has no culprit: nothing failed
            return []
        return [] if self.culprit == "none" else [p["culprit"]]

    def limit(self, p: dict) -> float:
        """The job's hard time limit: start-up + the run + the process-group timeout + margin."""
        return 40 + 4 * p.get("world", 2) + p["steps"] * (p["sleep"] + 0.05) + 2 * p["pg_timeout"] + \
            p.get("extra_limit", 0)

    def root_cause(self, p: dict, ws: int, culprits: list[int], obs: dict, launcher: str) -> str:
        c = ", ".join(map(str, culprits)) if culprits else "every rank"
        others = ", ".join(str(r) for r in range(ws) if r not in culprits) or "none"
        text = self.root.format(c=c, step=p["step"], ws=ws, others=others, p=p)
        ends = {}
        for r, st in obs["ranks"].items():
            ends.setdefault(st["end"], []).append(r)
        ended = "; ".join(f"rank{'s' if len(v) > 1 else ''} {','.join(v)}: "
                          f"{ {'ok': 'finished', 'none': 'no exception recorded (signal, os._exit, or ended by the launcher/harness)'}.get(k, k.replace('exception:', 'raised '))}"
                          for k, v in sorted(ends.items()))
        killed = " The harness ended the job at its time limit." if obs["harness_killed"] else ""
        oom = [e for e in obs["events"] if e["event"] == "oom_kill"]
        oom_s = "".join(f" The memory watchdog SIGKILLed pid {e['pid']} ({'rank ' + str(e['rank']) if e.get('rank') is not None else 'DataLoader worker of rank ' + str(e.get('worker_of_rank'))}) at {e['rss_mb']} MB RSS." for e in oom)
        restarts = "".join(
            f" Attempt {a} (torchrun restart): " + "; ".join(f"rank {r} {e.replace('exception:', 'raised ')}"
                                                            for r, e in ends.items()) + "."
            for a, ends in obs.get("later_attempts", {}).items())
        return (f"{text} Observed (side channel, first attempt): {ended}; launcher exit {obs['rc']} after {obs['duration']} s."
                f"{oom_s}{killed}{restarts}")

    def verify(self, obs: dict, p: dict, culprits: list[int], launcher: str) -> str | None:
        """None when the run did what it was designed to do, else why not."""
        ranks = obs["ranks"]
        failed = obs["rc"] != 0 or obs["harness_killed"]
        if any(not st["started"] for st in ranks.values()):
            return "a rank never started"
        if self.check == "clean":
            if not failed and all(st["end"] == "ok" for st in ranks.values()) and \
                    not any(st["faults"] for st in ranks.values()):
                nm = sum(st["nearmiss"] for st in ranks.values())
                return None if nm >= self.min_nearmiss else f"only {nm} near misses"
            return f"not clean: rc={obs['rc']} ends={[st['end'] for st in ranks.values()]}"
        if not failed:
            return f"job succeeded (rc={obs['rc']})"
        if self.check == "stopped":
            return verify_stopped(obs, p)
        if self.check == "alike":
            ends = {st["end"] for st in ranks.values()}
            return None if ends == {f"exception:{self.exc}"} else f"ends {ends}"
        cul = [ranks[str(c)] for c in culprits]
        if not all(st["faults"] for st in cul) and self.check not in ("exception", "workerkill"):
            return "no fault record on the culprit"
        others_faulted = [r for r, st in ranks.items() if st["faults"] and int(r) not in culprits]
        if others_faulted:
            return f"fault on non-culprit ranks {others_faulted}"
        if self.check == "exception":
            if self.needs_fault and not all(st["faults"] for st in cul):
                return "no fault record on the culprit"
            for st in cul:
                if st["end"] != f"exception:{self.exc}":
                    return f"culprit ended {st['end']}, want {self.exc}"
            first = min(st["exc_t"] for st in cul)
            early = [r for r, st in ranks.items() if int(r) not in culprits and st.get("exc_t", 1e18) < first]
            return f"ranks {early} raised before the culprit" if early else None
        if self.check == "failed":
            return None
        if self.check == "workerkill":
            kills = [e for e in obs["events"] if e["event"] == "oom_kill"]
            if not kills or any(e.get("worker_of_rank") not in culprits for e in kills):
                return f"watchdog kills {kills}"
            return None if all(st["end"] != "ok" for st in cul) else "culprit finished"
        if self.check in ("silent", "oomkill"):
            for st in cul:
                if st["end"] != "none":
                    return f"culprit ended {st['end']}"
            if self.check == "oomkill" and not any(e["event"] == "oom_kill" for e in obs["events"]):
                return "the watchdog killed nothing"
            return None
        if self.check == "hang":
            need = p.get("min_hang", 0.7 * p["pg_timeout"])
            if obs["hang_s"] is None or obs["hang_s"] < need:
                return f"did not hang: job ended {obs['hang_s']} s after the fault (< {need:.0f})"
            if p.get("stop_state") and p["stop_state"] not in [e.get("state") for e in obs["events"]
                                                              if e["event"] == "slurm_job"]:
                return f"Slurm did not end the hung job with {p['stop_state']}"
            return None
        return f"unknown check {self.check}"


def launcher_draw(rng: random.Random, launcher: str, ws: int) -> dict:
    """The launcher's own drawn params (launchers/cluster.py), imported late: mechs is imported without the package."""
    import launchers.cluster as cl  # noqa: PLC0415
    return cl.draw(rng, launcher, ws)


def verify_stopped(obs: dict, p: dict) -> str | None:
    """job_stopped: a healthy job that the scheduler ended (time limit or scancel): no fault anywhere, no rank raised,
    and Slurm's record says TIMEOUT (time limit) or CANCELLED (scancel), as the mechanism wants."""
    if any(st["faults"] for st in obs["ranks"].values()):
        return "a fault record in a job that should be healthy"
    raised = [r for r, st in obs["ranks"].items() if st["end"].startswith("exception") or st["end"] == "ok"]
    if raised:
        return f"ranks {raised} ended by themselves before the scheduler stopped the job"
    want = p.get("stop_state", "TIMEOUT")
    states = [e.get("state") for e in obs["events"] if e["event"] == "slurm_job"]
    if want not in states:
        return f"Slurm says {states}, want {want}"
    if obs["harness_killed"]:
        return "the harness's time limit came first"
    return None


MECHS: list[Mech] = []
BY_NAME = {m.name: m for m in MECHS}
