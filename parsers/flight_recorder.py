"""PyTorch flight-recorder dumps (pickle or JSON, versions 2.x, NCCL or gloo) -> `collectives` rows + pg status events.

FORMATS.md §2.4. A dump is a dict: version, pg_config, pg_status, comm_lib_version, nccl_comm_state, entries. Each
entry becomes one `collectives` row (pg, seq = collective_seq_id, op = profiling_name, numel from sizes, dtype,
state, timeout, ts from time_created_ns), carrying its group's pg_status last enqueued/completed. One `fr_pg_status`
event per process group summarises the status and the first entry that had not completed, with its frames.
Pickles are loaded with an unpickler that refuses every global, so only plain containers and scalars load.
"""
from __future__ import annotations

import ast
from datetime import datetime, timezone

from parsers.base import ParseResult, register
from parsers.safeload import UnsafeInput, loads_json, loads_pickle_restricted
from postmortem import textio
from postmortem.discover import Source
from postmortem.fr_match import effective_state

MAX_DUMP_BYTES = 256 * 1024 * 1024
MAX_ENTRIES = 200_000
MAX_FRAMES = 32


def _int(value) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def ns_to_iso(value) -> str | None:
    """Epoch nanoseconds -> ISO UTC (no zone suffix); None for 0/None/implausible values."""
    ns = _int(value)
    if not ns or not 0 < ns < 32503680000 * 10 ** 9:
        return None
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).replace(tzinfo=None).isoformat()


def numel(sizes) -> int | None:
    """Total elements over a list of tensor shapes (`[[16], [4, 4]]` -> 32); None when not a list of shapes."""
    if not isinstance(sizes, (list, tuple)):
        return None
    total = 0
    for shape in sizes[:4096]:
        if not isinstance(shape, (list, tuple)):
            return None
        n = 1
        for dim in shape[:64]:
            d = _int(dim)
            if d is None:
                return None
            n *= d
        total += n
    return total


def load_dump(data: bytes):
    """Decode a dump: pickle (restricted) when it starts with a pickle protocol byte, else depth-bounded JSON."""
    if data[:1] == b"\x80":
        return loads_pickle_restricted(data)
    text = data.decode("utf-8", "replace").lstrip()
    if text.startswith(("b'", 'b"')) and "entries" in text[:10000]:
        raise ValueError("a printed bytes literal (b'...'), not a dump file; save the dump bytes themselves")
    return loads_json(text)


def _pg_of(entry: dict) -> tuple[str | None, str | None]:
    pg = entry.get("process_group")
    if isinstance(pg, (list, tuple)) and pg:
        return str(pg[0]), (str(pg[1]) if len(pg) > 1 else None)
    pid = entry.get("pg_id")
    return (str(pid) if pid is not None else None), None


def _ranks(cfg) -> list[int] | None:
    ranks = cfg.get("ranks") if isinstance(cfg, dict) else None
    if isinstance(ranks, str):
        try:
            ranks = ast.literal_eval(ranks[:100000])  # "[0, 1]": a literal, never evaluated as code
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if isinstance(ranks, (list, tuple)) and all(isinstance(r, int) for r in ranks):
        return list(ranks)
    return None


def _frames(raw) -> list[dict]:
    out = []
    for fr in (raw if isinstance(raw, (list, tuple)) else [])[:MAX_FRAMES]:
        if isinstance(fr, dict):
            out.append({"func": str(fr.get("name", "?"))[:200], "file": str(fr.get("filename", "?"))[:500],
                        "line": _int(fr.get("line"))})
    return out


@register("flight_recorder")
def parse_flight_recorder(source: Source) -> ParseResult:
    """Read one flight-recorder dump into `collectives` rows and one `fr_pg_status` event per process group."""
    result = ParseResult()
    stats = textio.ReadStats()
    try:
        data = textio.read_bounded(source.path, MAX_DUMP_BYTES, stats)
        dump = load_dump(data)
    except (textio.InputProblem, UnsafeInput) as exc:
        result.problems.append(f"flight-recorder dump not loaded: {exc}")
        return result
    except ValueError as exc:
        result.problems.append(f"flight-recorder dump not understood: {exc}")
        return result
    finally:
        result.bytes = stats.bytes
    if not isinstance(dump, dict) or not isinstance(dump.get("entries", []), (list, tuple)):
        result.problems.append("flight-recorder dump is not a dict with an `entries` list")
        return result
    rank = _int(dump.get("rank"))
    if rank is None:
        rank = source.rank
    if rank is None:
        result.problems.append("flight-recorder dump: rank unknown (no `rank` key and none in the file name)")
    version = str(dump.get("version"))[:20] if dump.get("version") is not None else None
    status = dump.get("pg_status") if isinstance(dump.get("pg_status"), dict) else {}
    configs = dump.get("pg_config") if isinstance(dump.get("pg_config"), dict) else {}
    entries = list(dump.get("entries") or [])
    if len(entries) > MAX_ENTRIES:
        result.problems.append(f"flight-recorder dump has {len(entries)} entries; the last {MAX_ENTRIES} kept")
        entries = entries[-MAX_ENTRIES:]
    per_pg: dict[str, dict] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        pg, desc = _pg_of(entry)
        # pg_status is keyed by the group's id; `process_group` names it (equal only for the default group).
        st = status.get(str(entry.get("pg_id"))) if entry.get("pg_id") is not None else None
        if not isinstance(st, dict):
            st = status.get(pg) if isinstance(status.get(pg), dict) else {}
        last_enq = _int(st.get("last_enqueued_collective"))
        last_done = _int(st.get("last_completed_collective"))
        last_started = _int(st.get("last_started_collective"))
        p2p = bool(entry.get("is_p2p"))
        seq = _int(entry.get("p2p_seq_id") if p2p else entry.get("collective_seq_id", entry.get("seq_id")))
        state = str(entry.get("state"))[:20] if entry.get("state") is not None else None
        dtypes = entry.get("input_dtypes")
        duration = entry.get("duration_ms")
        result.add("collectives", {
            "source": source.source, "line": None, "rank": rank, "host": source.host,
            "ts": ns_to_iso(entry.get("time_created_ns")), "pg": pg, "seq": seq,
            "op": str(entry.get("profiling_name"))[:200] if entry.get("profiling_name") is not None else None,
            "numel_in": numel(entry.get("input_sizes")), "numel_out": numel(entry.get("output_sizes")),
            "dtype": (",".join(str(d) for d in dtypes[:64]) or None) if isinstance(dtypes, (list, tuple)) else None,
            "timeout_ms": _int(entry.get("timeout_ms")),
            "elapsed_ms": round(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool)
            else None,
            "state": state, "last_enqueued": last_enq, "last_completed": last_done})
        info = per_pg.setdefault(pg, {"desc": desc, "count": 0, "pending": None, "backend": None,
                                      "last_enqueued": last_enq, "last_completed": last_done,
                                      "last_started": last_started})
        info["count"] += 1
        op = str(entry.get("profiling_name") or "")
        if info["backend"] is None and ":" in op:
            info["backend"] = op.split(":", 1)[0]
        if not p2p and seq is not None and effective_state(state, seq, last_done, last_started) != "completed":
            if info["pending"] is None or seq < info["pending"]["seq"]:
                info["pending"] = {"seq": seq, "op": op, "state": state, "frames": _frames(entry.get("frames")),
                                   "ts": ns_to_iso(entry.get("time_created_ns"))}
    # A group with no entries left in this dump (or a dump with none at all) is a rank that completed everything it
    # recorded: it still counts, with its status counters.
    named = {str(e.get("pg_id")) for e in entries if isinstance(e, dict) and e.get("pg_id") is not None}
    for pg_id, st in status.items():
        if str(pg_id) in named or str(pg_id) in per_pg or not isinstance(st, dict):
            continue
        per_pg[str(pg_id)] = {"desc": None, "count": 0, "pending": None, "backend": None,
                              "last_enqueued": _int(st.get("last_enqueued_collective")),
                              "last_completed": _int(st.get("last_completed_collective")),
                              "last_started": _int(st.get("last_started_collective"))}
    for pg, info in per_pg.items():
        _status_event(result, source, rank, pg, info, configs, version)
    result.meta["flight_recorder"] = {str(rank): {"version": version,
                                                  "comm_lib_version": str(dump.get("comm_lib_version"))[:40]}}
    return result


def _status_event(result, source, rank, pg, info, configs, version) -> None:
    cfg = configs.get(pg) if isinstance(configs.get(pg), dict) else None
    if cfg is None and len(configs) == 1:
        cfg = next(iter(configs.values()))  # gloo dumps key their only group by "" instead of its name
    pending = info["pending"]
    attrs = {"pg": pg, "pg_desc": info["desc"], "version": version, "entries": info["count"],
             "backend": info["backend"], "last_enqueued": info["last_enqueued"],
             "last_completed": info["last_completed"], "last_started": info["last_started"],
             "ranks": _ranks(cfg), "format": "flight-recorder"}
    if pending:
        attrs.update(first_pending_seq=pending["seq"], first_pending_op=pending["op"],
                     first_pending_state=pending["state"], first_pending_frames=pending["frames"])
    attrs = {k: v for k, v in attrs.items() if v is not None}
    msg = (f"flight recorder pg {pg}{' (' + info['desc'] + ')' if info['desc'] else ''}: last enqueued "
           f"{info['last_enqueued']}, last completed {info['last_completed']}"
           + (f"; first not completed #{pending['seq']} {pending['op']}" if pending else "; nothing pending"))
    result.add("events", {"source": source.source, "line": None, "rank": rank, "host": source.host,
                          "ts": pending["ts"] if pending else None, "kind": "fr_pg_status", "message": msg[:1000],
                          "template": "flight recorder pg status", "details": attrs,
                          "level": "W" if pending else "I", "pid": None})
