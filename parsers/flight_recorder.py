"""PyTorch flight-recorder dumps (pickle or JSON, versions 2.x, NCCL or gloo) -> `collectives` rows + pg status events.

FORMATS.md §2.4. A dump is a dict: version, pg_config, pg_status, comm_lib_version, nccl_comm_state, entries. Each
entry becomes one `collectives` row (pg, seq = collective_seq_id, op = profiling_name, numel from sizes, dtype,
state, timeout, ts from time_created_ns; pg = the group's global name), carrying its group's pg_status last
enqueued/completed. One `fr_pg_status` event per process group of the rank summarises the status under the group's
global name (`pg_config` key; pg_status and entries' `pg_id` are the rank's local id, mapped by `group_names`), the
first collective entry not completed (with its frames), and for send/recv groups the first pending send/recv and the
peer it waits on. A group of the rank's pg_config with no status is reported as never used when every status has a
name. Pickles are loaded with an unpickler that refuses every global, so only plain containers and scalars load.
"""
from __future__ import annotations

import ast
import re
from datetime import datetime, timezone

from postmortem.parsers.base import ParseResult, register
from postmortem.parsers.safeload import UnsafeInput, loads_json, loads_pickle_restricted
from postmortem.ingest import textio
from postmortem.ingest.discover import Source
from postmortem.ranks.fr_match import effective_state

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


def _as_int_key(text: str) -> int | None:
    return int(text) if isinstance(text, str) and text.isdigit() else None


def group_names(status_ids: list[str], config_names: list[str], seen: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Local pg id (the key of `pg_status`, an entry's `pg_id`) -> (global group name, how it was found).

    The id is the process's own creation counter of its process groups, so the same id names different groups on
    different ranks; the name (`pg_config` key, an entry's `process_group[0]`) is global. An entry pairs the two
    ("entries"). A group with no entry left in this dump is placed by order ("order"): torch numbers both in
    creation order (the id per process, the default name over the whole job), so between two known pairs the
    unknown ids and unknown names of this rank's groups pair up in order when their counts agree. A dump with one
    group and one status is that pair ("single"). Hashed (non-numeric) names, or counts that differ, stay unknown.
    """
    out = {lid: (name, "entries") for lid, name in seen.items()}
    if len(status_ids) == 1 and len(config_names) == 1 and status_ids[0] not in out:
        name = config_names[0] or status_ids[0]  # gloo names its only group "" in pg_config
        return {status_ids[0]: (name, "single")}
    ids = sorted({i for i in status_ids} | set(seen), key=lambda i: (_as_int_key(i) is None, _as_int_key(i) or 0))
    names = sorted(set(config_names) | set(seen.values()),
                   key=lambda n: (_as_int_key(n) is None, _as_int_key(n) or 0))
    if any(_as_int_key(x) is None for x in ids + names):
        return out
    anchors = sorted((int(i), int(n)) for i, n in seen.items())
    if any(b[1] <= a[1] for a, b in zip(anchors, anchors[1:])):
        return out  # ids and names not in the same order: no inference
    bounds = [(-1, -1)] + anchors + [(1 << 62, 1 << 62)]
    taken = set(seen.values())
    for (lo_i, lo_n), (hi_i, hi_n) in zip(bounds, bounds[1:]):
        free_ids = [i for i in ids if lo_i < int(i) < hi_i and i not in out]
        free_names = [n for n in names if lo_n < int(n) < hi_n and n not in taken]
        if free_ids and len(free_ids) == len(free_names):
            out.update({i: (n, "order") for i, n in zip(free_ids, free_names)})
    return out


_P2P_PEER = re.compile(r"\b(send|recv)\s+(\d+)\s*(?:->|<-)\s*(\d+)")


def p2p_peer(op: str | None, ranks: list[int] | None) -> int | None:
    """The global rank a send/recv waits on: `nccl:send 0->3` / `nccl:recv 0<-3` in group ranks [0, 4, 8, 12] -> 12
    (the numbers are positions in the group); None when the name or the group's ranks do not say."""
    m = _P2P_PEER.search(op or "")
    if not m:
        return None
    peer = int(m.group(3))
    if ranks is None:
        return None
    return ranks[peer] if 0 <= peer < len(ranks) else None


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
    per_pg: dict[str, dict] = {}  # keyed by the rank's local pg id (as pg_status is)
    seen_names: dict[str, str] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        pg, desc = _pg_of(entry)
        local = str(entry.get("pg_id")) if entry.get("pg_id") is not None else None
        if local is not None and pg is not None:
            seen_names.setdefault(local, pg)
        # pg_status is keyed by the group's local id; `process_group` names it globally.
        st = status.get(local) if local is not None else None
        if not isinstance(st, dict):
            st = status.get(pg) if local is None and isinstance(status.get(pg), dict) else {}
        last_enq = _int(st.get("last_enqueued_collective"))
        last_done = _int(st.get("last_completed_collective"))
        last_started = _int(st.get("last_started_collective"))
        p2p = bool(entry.get("is_p2p"))
        seq = _int(entry.get("p2p_seq_id") if p2p else entry.get("collective_seq_id", entry.get("seq_id")))
        state = str(entry.get("state"))[:20] if entry.get("state") is not None else None
        dtypes = entry.get("input_dtypes")
        duration = entry.get("duration_ms")
        op = str(entry.get("profiling_name"))[:200] if entry.get("profiling_name") is not None else None
        numel_in = numel(entry.get("input_sizes"))
        dtype = (",".join(str(d) for d in dtypes[:64]) or None) if isinstance(dtypes, (list, tuple)) else None
        result.add("collectives", {
            "source": source.source, "line": None, "rank": rank, "host": source.host,
            "ts": ns_to_iso(entry.get("time_created_ns")), "pg": pg, "seq": seq, "op": op,
            "numel_in": numel_in, "numel_out": numel(entry.get("output_sizes")), "dtype": dtype,
            "timeout_ms": _int(entry.get("timeout_ms")),
            "elapsed_ms": round(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool)
            else None,
            "state": state, "last_enqueued": last_enq, "last_completed": last_done})
        key = local if local is not None else f"name:{pg}"
        info = per_pg.setdefault(key, _new_info(st, desc, pg if local is None else None))
        info["count"] += 1
        info["last_is_p2p"] = p2p
        info["p2p"] = info["p2p"] or p2p
        if info["backend"] is None and op and ":" in op:
            info["backend"] = op.split(":", 1)[0]
        if seq is None:
            continue
        if not p2p:
            info["max_seq"] = max(info["max_seq"] if info["max_seq"] is not None else seq, seq)
            if state == "completed":
                info["max_done_seq"] = max(info["max_done_seq"] if info["max_done_seq"] is not None else seq, seq)
        if effective_state(state, seq, last_done if not p2p else None, last_started if not p2p else None) \
                == "completed":
            continue
        slot = "p2p_pending" if p2p else "pending"
        if not p2p:
            info["pending_count"] += 1
        if info[slot] is None or seq < info[slot]["seq"]:
            info[slot] = {"seq": seq, "op": op or "", "state": state, "frames": _frames(entry.get("frames")),
                          "ts": ns_to_iso(entry.get("time_created_ns")), "numel_in": numel_in, "dtype": dtype,
                          "record_id": _int(entry.get("record_id"))}
    # A group with no entries left in this dump (or a dump with none at all) is a rank with nothing pending there:
    # it still counts, with its status counters.
    for pg_id, st in status.items():
        if str(pg_id) not in per_pg and isinstance(st, dict):
            per_pg[str(pg_id)] = _new_info(st, None, None)
    names = group_names([k for k in per_pg if not k.startswith("name:")], [str(k) for k in configs], seen_names)
    for key, info in per_pg.items():
        if info["name"] is None and key in names:
            info["name"], info["name_from"] = names[key]
        if info["last_enqueued"] is None and info["max_seq"] is not None:
            # No status for this group (dumps before pg_status): the entries give the counters.
            info["last_enqueued"], info["last_completed"] = info["max_seq"], info["max_done_seq"]
            info["counters_from"] = "entries"
        _status_event(result, source, rank, key, info, configs, version)
    # A group this rank belongs to (pg_config) that has no status: it never ran an op there, if every status of
    # this dump has its group name (else it may be one of the unnamed ones).
    named = {info["name"] for info in per_pg.values() if info["name"] is not None}
    if all(info["name"] is not None for info in per_pg.values()):
        for cname, cfg in configs.items():
            cname = str(cname)
            if cname and cname not in named and isinstance(cfg, dict) and rank in (_ranks(cfg) or ()):
                info = _new_info({"last_enqueued_collective": -1, "last_completed_collective": -1}, None, cname)
                info["name_from"], info["never_used"] = "config", True
                _status_event(result, source, rank, None, info, configs, version)
    result.meta["flight_recorder"] = {str(rank): {"version": version,
                                                  "comm_lib_version": str(dump.get("comm_lib_version"))[:40]}}
    return result


def _new_info(st: dict, desc: str | None, name: str | None) -> dict:
    return {"desc": desc, "name": name, "name_from": "entries" if name else None, "count": 0, "pending": None,
            "pending_count": 0, "p2p_pending": None, "p2p": False, "last_is_p2p": None, "backend": None,
            "max_seq": None, "max_done_seq": None, "never_used": False,
            "last_enqueued": _int(st.get("last_enqueued_collective")),
            "last_completed": _int(st.get("last_completed_collective")),
            "last_started": _int(st.get("last_started_collective"))}


def _status_event(result, source, rank, local, info, configs, version) -> None:
    name = info["name"]
    cfg = configs.get(name) if name is not None and isinstance(configs.get(name), dict) else None
    if cfg is None and len(configs) == 1 and name is not None:
        cfg = next(iter(configs.values()))  # gloo dumps key their only group by "" instead of its name
    desc = info["desc"] or (str(cfg.get("desc"))[:200] if isinstance(cfg, dict) and cfg.get("desc") else None)
    ranks = _ranks(cfg)
    pending, p2p_pending = info["pending"], info["p2p_pending"]
    attrs = {"pg": name, "pg_id": local, "pg_name_from": info["name_from"], "pg_desc": desc, "version": version,
             "entries": info["count"], "backend": info["backend"], "last_enqueued": info["last_enqueued"],
             "last_completed": info["last_completed"], "last_started": info["last_started"], "ranks": ranks,
             "p2p": info["p2p"] or None, "last_is_p2p": info["last_is_p2p"],
             "pending_count": info["pending_count"] or None, "never_used": info["never_used"] or None,
             "counters_from": info.get("counters_from"), "format": "flight-recorder"}
    if pending:
        attrs.update(first_pending_seq=pending["seq"], first_pending_op=pending["op"],
                     first_pending_state=pending["state"], first_pending_frames=pending["frames"],
                     first_pending_numel=pending["numel_in"], first_pending_dtype=pending["dtype"],
                     first_pending_record=pending["record_id"])
    if p2p_pending:
        attrs.update(p2p_pending_seq=p2p_pending["seq"], p2p_pending_op=p2p_pending["op"],
                     p2p_pending_record=p2p_pending["record_id"], p2p_peer=p2p_peer(p2p_pending["op"], ranks))
    attrs = {k: v for k, v in attrs.items() if v is not None}
    label = name if name is not None else f"(local id {local}, name unknown)"
    msg = (f"flight recorder pg {label}{' (' + desc + ')' if desc else ''}: "
           + ("no op recorded" if info["never_used"] else
              f"last enqueued {info['last_enqueued']}, last completed {info['last_completed']}")
           + (f"; first not completed #{pending['seq']} {pending['op']}" if pending else
              f"; {p2p_pending['op']} #{p2p_pending['seq']} not completed" if p2p_pending else "; nothing pending"))
    first = pending or p2p_pending
    result.add("events", {"source": source.source, "line": None, "rank": rank, "host": source.host,
                          "ts": first["ts"] if first else None, "kind": "fr_pg_status", "message": msg[:1000],
                          "template": "flight recorder pg status", "details": attrs,
                          "level": "W" if first else "I", "pid": None})
