"""The manifest `postmortem collect` writes: the job's exit status and what the collector captured."""
from __future__ import annotations

import json

from parsers.base import ParseResult, register
from postmortem import textio
from postmortem.discover import Source

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
    env = data.get("env_added")
    if isinstance(env, dict):
        result.meta["collector_env"] = {str(k): str(v)[:300] for k, v in list(env.items())[:64]}
    return result
