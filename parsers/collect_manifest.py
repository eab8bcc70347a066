"""The manifest `postmortem collect` writes: the job's exit status and what the collector captured."""
from __future__ import annotations

import json

from postmortem.parsers.base import ParseResult, register
from postmortem.ingest import textio
from postmortem.ingest.discover import Source

MAX_MANIFEST = 16 * 1024 * 1024


@register("collect_manifest")
def parse_manifest(source: Source) -> ParseResult:
    """One `exit` event with the job's exit code/signal; the evidence env the collector added goes to meta."""
    result = ParseResult()
    stats = textio.ReadStats()
    try:
        data = json.loads(textio.read_bounded(source.path, MAX_MANIFEST, stats).decode("utf-8", "replace"))
    except (textio.InputProblem, ValueError, RecursionError) as exc:
        result.problems.append(f"manifest not readable: {exc}")
        return result
    result.bytes, result.lines = stats.bytes, stats.lines
    if not isinstance(data, dict):
        result.problems.append("manifest is not a JSON object")
        return result
    code, sig = data.get("exit_code"), data.get("signal")
    if isinstance(code, int) or sig:
        attrs = {"code": str(code), "format": "collect-manifest"}
        if sig:
            attrs["signal"] = str(sig)
        result.add("events", {"source": source.source, "line": 1, "rank": None, "host": None, "ts": data.get("ended"),
                              "kind": "exit", "message": f"job exited with code {code}" + (f" ({sig})" if sig else ""),
                              "template": "collect exit", "details": attrs,
                              "level": "E" if code not in (0, None) else "I", "pid": None})
    _pid_ranks(data, result)
    _stall(data, source, result)
    env = data.get("env_added")
    if isinstance(env, dict):
        result.meta["collector_env"] = {str(k): str(v)[:300] for k, v in list(env.items())[:64]}
    return result


MAX_PROCESSES = 65_536


def _stall(data: dict, source: Source, result: ParseResult) -> None:
    """The collector's stall setting and how many stack dumps it kept (the gaps say why none was taken)."""
    after = data.get("stall_after_s")
    dumps = data.get("stall_dumps")
    policy = data.get("stall_policy") if isinstance(data.get("stall_policy"), dict) else {}
    if after is None and not policy:
        return
    result.meta["collect_stall"] = {source.source: {
        "stall_after": after if isinstance(after, (int, float, str)) else None,
        "cap_s": policy.get("cap_s") if isinstance(policy.get("cap_s"), (int, float)) else None,
        "threshold_s": policy.get("threshold_s") if isinstance(policy.get("threshold_s"), (int, float)) else None,
        "dumps": len(dumps) if isinstance(dumps, list) else 0}}


def _pid_ranks(data: dict, result: ParseResult) -> None:
    """`host:pid -> rank` of every rank process the collector saw (its `processes` census), into the same map NCCL's
    `host:pid` prefixes use: py-spy dumps and torchrun's agent lines name pids, and this names their ranks."""
    procs = data.get("processes")
    if not isinstance(procs, list):
        return
    hosts = {str(h).split(".")[0] for h in (data.get("host"),) if isinstance(h, str) and h}
    hosts |= {str(h) for h in (data.get("host"),) if isinstance(h, str) and h}
    out = result.meta.setdefault("hostpid_rank", {})
    for rec in procs[:MAX_PROCESSES]:
        if not isinstance(rec, dict) or rec.get("role") not in ("rank", "child"):
            continue
        pid, rank = rec.get("pid"), rec.get("rank")
        if isinstance(pid, int) and isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 1_000_000:
            for host in hosts or {"?"}:
                out[f"{host}:{pid}"] = rank
