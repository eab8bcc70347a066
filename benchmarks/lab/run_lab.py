"""Run the fault lab: real CPU PyTorch jobs with injected faults, kept as case folders in the realruns format.

usage: python benchmarks/lab/run_lab.py --all [-j 2]            # every planned run that is not there yet
       python benchmarks/lab/run_lab.py --only MECH [--launcher L] [--redo] [-n N]
       python benchmarks/lab/run_lab.py --case CASE_FOLDER_NAME --redo   # re-run one committed case's plan entry
       python benchmarks/lab/run_lab.py --list                   # the plan
       python benchmarks/lab/run_lab.py --coverage               # launcher x class counts of the committed cases

Each run: a fresh job dir $LAB_JOBS_DIR/<id>/ (train.py + trainkit.py copied there, so tracebacks show a neutral
path), the case folder under it, a side-channel dir the job writes outside the case folder. The harness watches
the job (hard time limit, optional memory watchdog, py-spy dumps when the output stalls), then checks the side
channel against what the mechanism was designed to do; a run that did not do it is discarded (logged in
runs.jsonl) and retried with the next seed, never labelled.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import launchers  # noqa: E402
import mechs  # noqa: E402
import procs  # noqa: E402
import registry  # noqa: E402

CASES = os.path.join(HERE, "cases")
RUNLOG = os.path.join(HERE, "runs.jsonl")
JOBS = os.environ.get("LAB_JOBS_DIR", "/tmp/labjobs")
GZIP_OVER = 64 * 1024
_runlog_lock = threading.Lock()


def plan() -> list[tuple[mechs.Mech, str, int]]:
    """Every (mechanism, launcher, index) the full lab runs."""
    out = []
    for m in registry.MECHS:
        for li, launcher in enumerate(m.launchers):
            for i in range(1, m.per_launcher + 1):
                out.append((li + (i - 1) * len(m.launchers), m, launcher, i))
    # round-robin: every mechanism's first launcher, then every second one... (a partial run covers every mechanism)
    return [(m, launcher, i) for _, m, launcher, i in sorted(out, key=lambda t: t[0])]


def existing(m: mechs.Mech, launcher: str, i: int) -> str | None:
    """The committed case folder of this plan entry, if any."""
    if not os.path.isdir(CASES):
        return None
    # exact: launcher names may extend one another (slurm / slurm-...), mechanism names too
    pat = re.compile(rf"[a-z_]+__{re.escape(m.name)}-{re.escape(launcher)}-\d+r-{i}")
    for d in os.listdir(CASES):
        if pat.fullmatch(d):
            return d
    return None


def draw(m: mechs.Mech, launcher: str, i: int, attempt: int) -> tuple[int, int, dict, list[int]]:
    """(seed, world size, params, expected culprits), seeded by mechanism, launcher, index and retry."""
    seed = (hash_str(f"{m.name}/{launcher}/{i}") + 7919 * attempt) % (2 ** 31)
    rng = random.Random(seed)
    ws = rng.choice(m.ws_for(launcher))
    params = dict(m.params)
    params.update(m.draw(rng, ws, launcher))
    params.setdefault("seed", seed)
    params["world"] = ws
    culprits = m.culprits(params, ws)
    return seed, ws, params, culprits


def hash_str(s: str) -> int:
    h = 0
    for ch in s.encode():
        h = (h * 131 + ch) % (2 ** 61 - 1)
    return h


class Job:
    """One launched run and what the harness saw of it."""

    def __init__(self, m: mechs.Mech, launcher: str, ws: int, params: dict, jid: str) -> None:
        self.m, self.launcher, self.ws, self.p = m, launcher, ws, params
        self.dir = os.path.join(JOBS, jid)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.case = os.path.join(self.dir, "case")
        self.side = os.path.join(self.dir, "side")
        self.work = os.path.join(self.dir, "job")
        for d in (self.case, self.side, self.work):
            os.makedirs(d)
        self.events: list[dict] = []  # harness-side observations (watchdog kills, py-spy, time limit)
        self.seen: dict[int, int] = {}

    def env(self, extra: dict) -> dict:
        e = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_", "PYTHON", "TORCH", "OMP"))}
        e.update(PATH=os.path.join(launchers.VENV, "bin") + os.pathsep + e.get("PATH", "/usr/bin:/bin"),
                 OMP_NUM_THREADS="1", LAB_PARAMS=json.dumps(self.p), LAB_SIDE=self.side, LAB_OUT=self.case,
                 LAB_WORK=self.work, LAB_LAUNCHER=self.launcher, HF_HOME=os.path.join(self.work, "hf"),
                 HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="disabled", TOKENIZERS_PARALLELISM="false")
        if self.p.get("faulthandler"):
            e["PYTHONFAULTHANDLER"] = "1"
        if self.p.get("fr"):
            e["TORCH_FR_BUFFER_SIZE"] = "2000"
            e["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(self.case, "fr", "nccl_trace_rank_")
        if self.p.get("debug_detail"):
            e["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
        e.update(self.p.get("env", {}))
        e.update(extra)
        return e

    def rank_pids(self) -> dict[int, int]:
        """rank -> pid of its latest attempt's main process, from the side channel's start records."""
        best: dict[int, tuple[int, int]] = {}
        for rec in read_side(self.side):
            if rec["event"] == "start":
                r, a = rec["rank"], rec.get("attempt", 0)
                if r not in best or a >= best[r][0]:
                    best[r] = (a, rec["pid"])
        return {r: v[1] for r, v in best.items()}

    def hanging(self) -> bool:
        """Every rank is up and the fault has happened: a user would see this run stuck and take a py-spy dump
        (dumps taken earlier caught ranks still importing or in rendezvous, which is not what a user has)."""
        recs = read_side(self.side)
        started = {r["rank"] for r in recs if r["event"] == "start"}
        return len(started) >= self.ws and any(r["event"] == "fault" for r in recs)

    def output_size(self) -> int:
        n = 0
        for root, _, files in os.walk(self.case):
            for f in files:
                try:
                    n += os.path.getsize(os.path.join(root, f))
                except OSError:
                    pass
        return n

    def pyspy(self) -> None:
        """py-spy dump of every live rank into pyspy/rank<N>.txt (or .json), as a user does while it hangs."""
        os.makedirs(os.path.join(self.case, "pyspy"), exist_ok=True)
        mode = self.p.get("pyspy", "text")
        pids = self.rank_pids()

        def one(item):
            r, pid = item
            if not procs.alive(pid):
                return r, None
            args = [os.path.join(launchers.VENV, "bin", "py-spy"), "dump", "--pid", str(pid)]
            if mode == "json":
                args.append("--json")
            if mode == "native":
                args.append("--native")
            out = subprocess.run(args, capture_output=True, text=True, timeout=30)
            ext = "json" if mode == "json" else "txt"
            with open(os.path.join(self.case, "pyspy", f"rank{r}.{ext}"), "w") as f:
                f.write(out.stdout if out.returncode == 0 else out.stdout + out.stderr)
            return r, out.returncode

        with cf.ThreadPoolExecutor(8) as pool:
            res = dict(pool.map(one, sorted(pids.items())))
        self.events.append({"t": time.time(), "event": "pyspy", "ranks": res})

    def run(self) -> dict:
        """Launch, watch, end; returns the harness observations."""
        script = os.path.join(self.work, "train.py")
        shutil.copy(os.path.join(HERE, "mechanisms", self.m.script), script)
        for helper in ("trainkit.py", "logstyles.py"):
            shutil.copy(os.path.join(HERE, "mechanisms", helper), os.path.join(self.work, helper))
        if self.m.prepare:
            subprocess.run([launchers.PY, os.path.join(HERE, "mechanisms", self.m.prepare), self.work],
                           env=self.env({}), cwd=self.work, check=True, capture_output=True, timeout=120)
        argv, console, extra = launchers.command(self.launcher, self.ws, script, self.case, self.p)
        limit = self.p.get("limit", self.m.limit(self.p))
        t0 = time.time()
        out = open(os.path.join(self.case, console), "wb") if console else \
            open(os.path.join(self.dir, "launcher.out"), "wb")
        proc = subprocess.Popen(argv, cwd=self.work, env=self.env(extra), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.seen[proc.pid] = procs._stat(proc.pid)[1] if procs._stat(proc.pid) else 0
        last_size, last_change, dumped, killed = -1, time.time(), False, False
        stall = self.p.get("stall_s", 6)
        wd = self.p.get("watchdog_mb")
        while proc.poll() is None:
            time.sleep(0.2)
            now = time.time()
            self.seen.update(procs.descendants(proc.pid))
            if self.launcher in launchers.cluster.DETACHED:  # ranks started by slurmstepd, not by our child
                self.follow_detached(now)
            if self.p.get("scancel_after") and self.due_for_cancel(now):
                self.events.extend(dict(e, t=now) for e in launchers.cluster.cancel(self.launcher, self.case))
                self._cancelled = True
            if wd:
                self.memory_watchdog(wd)
            if self.p.get("pyspy") and not dumped and self.launcher != "collect":
                size = self.output_size()
                if size != last_size:
                    last_size, last_change = size, now
                elif now - last_change > stall and self.hanging():
                    self.pyspy()
                    dumped = True
            if now - t0 > limit:
                killed = True
                self.events.append({"t": now, "event": "time_limit", "limit": limit})
                procs.kill_all(self.seen, signal.SIGTERM)
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
                break
        left = procs.kill_all(self.seen, signal.SIGKILL)
        if left:
            self.events.append({"t": time.time(), "event": "killed_leftovers", "pids": left})
        rc = proc.wait()
        out.close()
        self.events.extend(dict(e, t=time.time()) for e in launchers.cluster.finish(self.launcher, self.case))
        if self.launcher in launchers.cluster.DETACHED:  # what the scheduler's cancel left (none, normally)
            time.sleep(1)
            left = procs.kill_all(self.seen, signal.SIGKILL)
            if left:
                self.events.append({"t": time.time(), "event": "killed_leftovers", "pids": left})
        return {"rc": rc, "harness_killed": killed, "duration": round(time.time() - t0, 1), "t0": t0,
                "t_end": time.time(), "events": self.events}

    def follow_detached(self, now: float) -> None:
        """Add the ranks (and their children) that the side channel names to the processes the harness watches."""
        if now - getattr(self, "_followed", 0) < 1.0:
            return
        self._followed = now
        self.seen.update(procs.descendants(*self.rank_pids().values()))

    def due_for_cancel(self, now: float) -> bool:
        """A user's scancel: once every rank is up and `scancel_after` seconds have passed since the last start."""
        if getattr(self, "_cancelled", False):
            return False
        starts = [r["t"] for r in read_side(self.side) if r["event"] == "start"]
        return len(starts) >= self.ws and now - max(starts) > self.p["scancel_after"]

    def memory_watchdog(self, limit_mb: float) -> None:
        """SIGKILL any process of the job whose RSS passes limit_mb, as the kernel OOM killer or k8s would."""
        ranks = {pid: r for r, pid in self.rank_pids().items()}
        for pid, st in list(self.seen.items()):
            if procs.alive(pid, st) and procs.rss_mb(pid) > limit_mb:
                rss = procs.rss_mb(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    continue
                parent = procs.ppid(pid)
                # a rank's parent may itself be a rank (Lightning runs ranks 1.. as children of rank 0)
                self.events.append({"t": time.time(), "event": "oom_kill", "pid": pid, "rss_mb": round(rss),
                                    "rank": ranks.get(pid),
                                    "worker_of_rank": None if pid in ranks else ranks.get(parent)})


def read_side(side: str) -> list[dict]:
    recs = []
    for name in sorted(os.listdir(side)):
        with open(os.path.join(side, name), errors="replace") as f:
            for line in f:
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
    return sorted(recs, key=lambda r: r["t"])


def summarize(side: str, harness: dict, ws: int) -> dict:
    """How each rank ended in the first attempt (where the fault is injected), its faults and near misses, how
    later attempts (torchrun --max-restarts) ended, and the harness's view."""
    recs = read_side(side)
    fresh = lambda: {"started": False, "end": "none", "faults": [], "nearmiss": 0}  # noqa: E731
    ranks: dict[int, dict] = {r: fresh() for r in range(ws)}
    later: dict[int, dict[int, str]] = {}
    for rec in recs:
        a = rec.get("attempt", 0)
        if a > 0:
            ends = later.setdefault(a, {})
            if rec["event"] == "start":
                ends.setdefault(rec["rank"], "none")
            elif rec["event"] == "exception" and ends.get(rec["rank"], "none") == "none":
                ends[rec["rank"]] = "exception:" + rec["type"]
            elif rec["event"] == "end":
                ends[rec["rank"]] = "ok"
            if rec["event"] != "fault":
                continue
        r = ranks.setdefault(rec["rank"], fresh())
        if rec["event"] == "start":
            r["started"] = True
        elif rec["event"] == "fault":
            r["faults"].append({k: rec[k] for k in rec if k not in ("rank", "pid")})
        elif rec["event"] == "nearmiss":
            r["nearmiss"] += 1
        elif rec["event"] == "exception" and r["end"] == "none":
            r["end"] = "exception:" + rec["type"]
            r["exc_t"] = rec["t"]
        elif rec["event"] == "end":
            r["end"] = "ok"
            r["end_t"] = rec["t"]
    for ev in harness["events"]:
        if ev["event"] == "oom_kill" and ev.get("rank") is not None:
            ranks[ev["rank"]]["faults"].append({"event": "oom_kill", "t": ev["t"], "rss_mb": ev["rss_mb"]})
        if ev["event"] == "oom_kill" and ev.get("worker_of_rank") is not None:
            ranks[ev["worker_of_rank"]]["faults"].append({"event": "worker_oom_kill", "t": ev["t"],
                                                          "rss_mb": ev["rss_mb"]})
    return {"ranks": {str(k): v for k, v in sorted(ranks.items())}, "attempts": 1 + len(later),
            "later_attempts": {str(a): {str(r): e for r, e in sorted(v.items())} for a, v in sorted(later.items())},
            **{k: harness[k] for k in ("rc", "harness_killed", "duration")},
            "events": harness["events"], "hang_s": _hang_seconds(recs, harness)}


def _hang_seconds(recs: list[dict], harness: dict) -> float | None:
    """Seconds from the first fault record to the job's end (how long the job stayed up after the fault)."""
    ts = [r["t"] for r in recs if r["event"] == "fault" and r.get("attempt", 0) == 0] + \
         [e["t"] for e in harness["events"] if e["event"] == "oom_kill"]
    return round(harness["t_end"] - min(ts), 1) if ts else None


def finish_case(case: str) -> int:
    """gzip every file over 64 KB (the product reads .gz); returns the folder's bytes."""
    total = 0
    for root, _, files in os.walk(case):
        for f in files:
            path = os.path.join(root, f)
            if os.path.islink(path):
                os.unlink(path)
                continue
            if os.path.getsize(path) > GZIP_OVER and not f.endswith(".gz"):
                with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=9) as dst:
                    shutil.copyfileobj(src, dst)
                os.unlink(path)
                path += ".gz"
            total += os.path.getsize(path)
    return total


def log_run(rec: dict) -> None:
    with _runlog_lock, open(RUNLOG, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")


def do_one(m: mechs.Mech, launcher: str, i: int, retries: int, redo: bool) -> str:
    """Run one plan entry until it verifies (at most retries+1 tries); returns a one-line outcome."""
    old = existing(m, launcher, i)
    if old and not redo:
        return f"skip {old}"
    for attempt in range(retries + 1):
        seed, ws, params, culprits = draw(m, launcher, i, attempt)
        jid = f"j{hash_str(f'{m.name}/{launcher}/{i}/{attempt}/{time.time()}') % 10**8:08d}"
        job = Job(m, launcher, ws, params, jid)
        harness = job.run()
        obs = summarize(job.side, harness, ws)
        why = m.verify(obs, params, culprits, launcher)
        name = f"{m.cls}__{m.name}-{launcher}-{ws}r-{i}"
        log_run({"case": name, "seed": seed, "try": attempt, "ok": why is None, "why": why, "params": params,
                 "culprits": culprits, "obs": obs})
        if why is not None:
            keep = os.path.join(JOBS, "discarded", f"{name}-try{attempt}")
            shutil.rmtree(keep, ignore_errors=True)
            os.makedirs(os.path.dirname(keep), exist_ok=True)
            shutil.move(job.dir, keep)
            print(f"  discard {name} (try {attempt}): {why}", flush=True)
            continue
        size = finish_case(job.case)
        case_json = {
            "source": f"real run: torch 2.13.0 CPU, gloo, {launchers.DESCRIBE[launcher].split(':')[0]}, "
                      f"OMP_NUM_THREADS=1 (fault lab)",
            "class": m.cls,
            "root_cause": m.root_cause(params, ws, culprits, obs, launcher),
            "expect": {"categories": list(m.categories), "culprit_ranks": culprits},
            "script": f"benchmarks/lab/mechanisms/{m.script}",
            "mechanism": m.name, "launcher": launcher, "world_size": ws, "seed": seed, "params": params,
            "observed": obs,
        }
        with open(os.path.join(job.case, "case.json"), "w") as f:
            json.dump(case_json, f, indent=2)
            f.write("\n")
        dest = os.path.join(CASES, name)
        if old:
            shutil.rmtree(os.path.join(CASES, old), ignore_errors=True)
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(CASES, exist_ok=True)
        tmp_dest = dest + ".tmp"
        shutil.rmtree(tmp_dest, ignore_errors=True)
        shutil.copytree(job.case, tmp_dest, symlinks=False)
        os.rename(tmp_dest, dest)
        shutil.rmtree(job.dir, ignore_errors=True)
        return f"ok   {name} ({obs['duration']} s, {size // 1024} KB)"
    return f"FAIL {m.name}-{launcher}-{i}: no verified run in {retries + 1} tries"


def table() -> int:
    """The mechanisms as a markdown table, with the launchers that have a committed case."""
    ran: dict[str, set[str]] = {}
    for name in os.listdir(CASES) if os.path.isdir(CASES) else []:
        path = os.path.join(CASES, name, "case.json")
        if os.path.isfile(path):
            c = json.load(open(path))
            ran.setdefault(c["mechanism"], set()).add(c["launcher"])
    rule = {"any": "the faulty rank (drawn)", "zero": "rank 0", "nonzero": "the faulty rank (drawn, not 0)",
            "last": "the last rank", "none": "[] (every rank fails alike)"}
    print("| mechanism | script | class | categories accepted | culprit | fault / near miss | check | launchers run |")
    print("|---|---|---|---|---|---|---|---|")
    for m in registry.MECHS:
        cul = "[] (nothing failed)" if m.check in ("clean", "stopped") else rule[m.culprit]
        kind = {"clean": "near miss", "stopped": "scheduler stop"}.get(m.check, "fault")
        print(f"| {m.name} | {m.script} | {m.cls} | {', '.join(m.categories)} | {cul} | {kind} | {m.check} | "
              f"{', '.join(sorted(ran.get(m.name, []))) or '-'} |")
    return 0


def coverage() -> int:
    """Committed cases as a launcher x class table, then world sizes, culprit ranks, py-spy and FR counts."""
    import collections
    cases = [json.load(open(os.path.join(CASES, n, "case.json"))) for n in sorted(os.listdir(CASES))
             if os.path.isfile(os.path.join(CASES, n, "case.json"))]
    classes = sorted({c["class"] for c in cases})
    launchers_ = sorted({c["launcher"] for c in cases})
    short = {c: c.replace("_corruption", "").replace("_failure", "").replace("_blocking", "") for c in classes}
    print("| launcher | " + " | ".join(short[c] for c in classes) + " | all |")
    print("|---" * (len(classes) + 2) + "|")
    for lname in launchers_ + ["all"]:
        row = [c for c in cases if lname in ("all", c["launcher"])]
        cnt = collections.Counter(c["class"] for c in row)
        print(f"| {lname} | " + " | ".join(str(cnt[c] or ".") for c in classes) + f" | {len(row)} |")
    ws = collections.Counter(c["world_size"] for c in cases)
    cul = collections.Counter(r for c in cases for r in c["expect"]["culprit_ranks"])
    print(f"\n{len(cases)} cases, {len({c['mechanism'] for c in cases})} mechanisms, {len(launchers_)} launchers")
    print("world sizes: " + ", ".join(f"{k}: {v}" for k, v in sorted(ws.items())))
    print("culprit ranks: " + ", ".join(f"{k}: {v}" for k, v in sorted(cul.items())) +
          f", none ([]): {sum(not c['expect']['culprit_ranks'] for c in cases)}")
    spy = sum(os.path.isdir(os.path.join(CASES, n, "pyspy")) or
              any("pyspy" in d for d, _, _ in os.walk(os.path.join(CASES, n))) for n in os.listdir(CASES))
    fr = sum(os.path.isdir(os.path.join(CASES, n, "fr")) for n in os.listdir(CASES))
    print(f"cases with py-spy dumps: {spy}; with flight-recorder dumps: {fr}")
    return 0


def relabel() -> int:
    """Rewrite expect/root_cause of every committed case from its mechanism, params and observations."""
    by = {m.name: m for m in registry.MECHS}
    n = 0
    for name in sorted(os.listdir(CASES)):
        path = os.path.join(CASES, name, "case.json")
        if not os.path.isfile(path):
            continue
        case = json.load(open(path))
        m = by.get(case["mechanism"])
        if m is None:
            print(f"no mechanism {case['mechanism']} for {name}")
            continue
        ws, p = case["world_size"], case["params"]
        culprits = m.culprits(p, ws)
        case["expect"] = {"categories": list(m.categories), "culprit_ranks": culprits}
        case["root_cause"] = m.root_cause(p, ws, culprits, case["observed"], case["launcher"])
        case["class"] = m.cls
        with open(path, "w") as f:
            json.dump(case, f, indent=2)
            f.write("\n")
        n += 1
    print(f"relabelled {n} cases")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="run the whole plan")
    ap.add_argument("--only", action="append", default=[], help="mechanism name (repeatable)")
    ap.add_argument("--case", action="append", default=[], help="the plan entry of this case folder (repeatable)")
    ap.add_argument("--launcher", action="append", default=[], help="launcher name (repeatable)")
    ap.add_argument("-n", type=int, default=None, help="at most N runs per mechanism x launcher")
    ap.add_argument("-j", type=int, default=2, help="jobs at once (default 2: the machine has 2 cores)")
    ap.add_argument("--redo", action="store_true", help="re-run entries that already have a case folder")
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--table", action="store_true", help="print the README's mechanism table (markdown)")
    ap.add_argument("--coverage", action="store_true", help="launcher x class counts, world sizes, culprit ranks")
    ap.add_argument("--relabel", action="store_true",
                    help="recompute expect and root_cause of every case from the registry (no runs)")
    a = ap.parse_args()
    todo = [(m, l, i) for m, l, i in plan()
            if (not a.only or m.name in a.only) and (not a.launcher or l in a.launcher) and (a.n is None or i <= a.n)
            and (not a.case or existing(m, l, i) in a.case)]
    if a.table:
        return table()
    if a.coverage:
        return coverage()
    if a.relabel:
        return relabel()
    if a.list:
        for m, l, i in todo:
            print(f"{m.name:28} {l:20} {i}  {existing(m, l, i) or '-'}")
        print(f"{len(todo)} runs")
        return 0
    if not (a.all or a.only or a.launcher or a.case):
        ap.error("say --all, --only MECH, --launcher L or --case NAME")
    os.makedirs(JOBS, exist_ok=True)
    with cf.ThreadPoolExecutor(a.j) as pool:
        futs = [pool.submit(do_one, m, l, i, a.retries, a.redo) for m, l, i in todo]
        bad = 0
        for fut in cf.as_completed(futs):
            msg = fut.result()
            bad += msg.startswith("FAIL")
            print(msg, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
