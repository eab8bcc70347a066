"""Line-oriented text logs (rank logs, consoles, NCCL debug files, dmesg): events, tracebacks, steps, NCCL lines."""
from __future__ import annotations

import collections
import functools

from postmortem.parsers import formats as fmts
from postmortem.parsers import prefilter
from postmortem.parsers.scan_text import last_split
from postmortem.parsers.base import ParseResult, register
from postmortem.parsers import actor_ranks, dumps_in_logs, embedded, learned_prefix
from postmortem.parsers.prefixes import strip_prefixes
from postmortem.parsers.steps import parse_step
from postmortem.parsers import rich_wrap, spawn_block, tb_shapes
from postmortem.ingest import textio
from postmortem.ingest.discover import Source
from postmortem.parsers.line_blocks import _StepAccumulator, _TorchrunSummary
from postmortem.parsers.line_records import (json_record,  # noqa: F401 - some re-exported
                                              _last_lines, line_message, _line_rank, _Tail, _tail_window,
                                             template_keys, _ts)
# (the shapes are re-exported: tests and other parsers know them as textlog.NAME)
from postmortem.parsers.line_shapes import (CHAIN_RE,  # noqa: F401
                                            CONFIG_ECHO_SCAN, config_hint, CONFIG_HINT_RE, CONFIG_RE,
                                            EXC_RE, FRAME_RE, GLUE_SPLIT_RE, HOSTPID_RE, _LEVEL_ONLY, LINE_TRIGGERS,
                                            LINE_TRIGGERS_NOCASE, MAX_EVENTS_PER_KIND, MAX_OPEN_GAP, message_rank,
                                            MSG_RANK_RES, _NCCL_INIT_GROUPS, NCCL_INIT_RE, _NCCL_LINE_GROUPS,
                                            NCCL_LINE_RE, NCCL_VERSION_RE, _plain_line, _prefix_only, _Scheme,
                                            SCHEME_SAMPLE, STEP_TRIGGERS, STEP_TRIGGERS_NOCASE, TAIL_LINES_READ,
                                            TEMPLATE_MASKS, template_of, WAIT_EVENT_KINDS, WEAK_EVENT_TRIGGERS,
                                            WEAK_STEP_TRIGGERS_NOCASE, WINDOW_TRIGGERS, WORK_KV_RE)
from postmortem.parsers.tracebacks import _last_user_frame, _TracebackCollector  # noqa: F401 - re-exported


def _before_wait(result: ParseResult, source: Source, plain: tuple) -> None:
    """The last ordinary line before the file's first collective timeout: often the work a rank announced before
    the others started waiting for it ('Clustering 111M points...', 'Saving checkpoint...')."""
    lineno, message, rank, ctx = plain
    result.add("events", {"source": source.source, "line": lineno, "rank": rank, "host": ctx["host"],
                          "ts": ctx["ts"], "kind": "before_wait", "message": message[:300],
                          "template": "line before the first timeout", "details": {"format": "before-wait"},
                          "level": "I", "pid": None})


TEXT_KINDS = ("rank_log", "nccl_log", "dmesg", "unknown", "pyspy", "nvidia_smi", "stack_dump")
CONFIG_EVENT_KINDS = ("config", "job_id")


@register("launch_config")
def parse_launch_config(source: Source) -> ParseResult:
    """A launch script or config file beside the logs: its settings (config echoes, world size, job identity) only;
    the failures and progress a script's text may mention never happened in this run."""
    result = parse_textlog(source)
    result.rows = {"events": [r for r in result.rows.get("events", []) if r["kind"] in CONFIG_EVENT_KINDS]}
    return result


@register(*TEXT_KINDS)
def parse_textlog(source: Source) -> ParseResult:
    """Stream a text file once: strip prefixes, attribute ranks, extract events/tracebacks/steps/NCCL lines."""
    result = ParseResult()
    stats = textio.ReadStats()
    tbs = _TracebackCollector(result, source)
    shapes = tb_shapes.TracebackShapes()  # IPython, rich and loguru tracebacks read as plain ones
    wrapped = rich_wrap.Wrapped()  # rich's exception message wrapped onto the lines after `ExcType: `
    summary = _TorchrunSummary(result, source)
    steps = _StepAccumulator(getattr(source, "every_step", False))
    per_kind: dict[str, int] = {}
    dropped: dict[str, int] = {}
    over: dict = {}  # (kind, rank) -> the latest event beyond MAX_EVENTS_PER_KIND
    base_rank = source.rank if source.rank is not None else source.local_rank
    scanner, head_texts, items = _line_source(source, stats)
    scheme = _Scheme(head_texts)
    if scheme.learned is None and not scheme.active and len(head_texts) > END_SAMPLE_LINES:
        # a long start-up (library chatter) before the job's own prefixed lines: learn the prefix from the end
        end = (head_texts[-END_SAMPLE_LINES:] if len(head_texts) < SCHEME_SAMPLE else
               [] if source.compression else
               _end_lines(source.path, END_SAMPLE_LINES, scanner.whole_file() if scanner is not None else None))
        scheme.learn_from(end)
    hostpid_rank: dict[str, int] = {}
    spawned = spawn_block.SpawnBlock()  # mp.spawn's child traceback printed by the parent: its process index
    # Stack dumps list frames, not log lines: `save_checkpoint (x.py:3)` is no save, a command line is no config
    # echo, and `File "..."` frames are not a raised exception. Only failure lines (py-spy's own errors) count.
    dump = source.kind in ("pyspy", "stack_dump")
    plain, waited, tee = None, False, False
    big, dump_kinds = embedded.read_by_line_parser(source), set()
    for lineno, raw, steps_only in items:
        record = json_record(raw) if scheme.jsonl and raw[:1] == "{" else None
        if scheme.jsonl_prefixed:
            behind = scheme.json_behind_prefix(raw)
            inner = json_record(behind[0]) if behind is not None else None
            record = (inner[0], {**behind[1], **inner[1]}) if inner is not None else None
        if record is not None:
            segments, record_info = record
        else:
            segments = raw.split("\r") if "\r" in raw else [raw]
            if ".cpp:" in raw or "Traceback (" in raw:
                segments = [piece for seg in segments for piece in GLUE_SPLIT_RE.split(seg)]
        carry: dict = {}
        for seg in segments:
            if not seg or seg.isspace():
                continue
            line, sinfo = scheme.strip(seg) if scheme.active else (seg, {})
            if record is not None:
                sinfo = {**record_info, **sinfo}
            message, info = strip_prefixes(line)
            if scheme.learned_after is not None:
                message, after = scheme.learned_after.strip(message)
                info = {**after, **info}
            if sinfo:
                info = {**sinfo, **info}
            if carry:
                info = {**carry, **info}
                carry = {}
            if info and _prefix_only(message):
                carry = info  # a segment that was only prefixes (`[time] ` before a glued event): they are the next's
                lm = _LEVEL_ONLY.match(message)
                if lm.group("rank") is not None and "rank" not in carry:
                    carry = {**carry, "rank": int(lm.group("rank"))}
                continue
            if "local_rank" in info:
                tee = True  # torchrun --tee's `[roleN]:`: each rank's stdout and stderr tailed to this file apart
            dedup = info.get("ray_dedup", False)
            rank = None if dedup else spawned.rank_for(message, _line_rank(info, message, base_rank))
            ctx = {"rank": rank, "host": info.get("host") or source.host, "ts": _ts(info.get("ts"))}
            if dedup and (steps_only or parse_step(message)):
                continue  # Ray's grouped line: its step numbers are one actor's of many
            if steps_only:  # a sampled progress/step line from the prefilter: nothing but its step row
                st = parse_step(message)
                if not st and not dump and _plain_line(message) and (plain is None or lineno > plain[0]):
                    plain = (lineno, message, rank, ctx)
                if st:
                    st.update({"source": source.source, "line": lineno, "rank": rank, "host": ctx["host"],
                               "ts": ctx["ts"]})
                    steps.add(st)
                continue
            key = ("ray-dedup",) if dedup else rank if rank is not None else info.get("host")
            snippet = None if dump else actor_ranks.snippet_ranks(message)
            if snippet:
                # (the `Rank 0` in the header is no prefix: the stream is the line's own, as its prefixes give it)
                own = info.get("rank") if info.get("rank") is not None else base_rank
                tbs.for_ranks(own if own is not None else info.get("host"), snippet, lineno)
                continue
            consumed = False if dump else wrapped.feed(tbs, shapes, key, lineno, message, ctx)
            summary.feed(lineno, message)
            if consumed:
                continue
            if "NCCL " in message:
                nm = NCCL_LINE_RE.match(message)
                if nm:
                    _nccl_row(result, source, lineno, nm, ctx, hostpid_rank)
                    if nm.group("level") != "WARN":
                        continue
            if big and not dump:
                kind = embedded.marker_kind(message)
                if kind:
                    dump_kinds.add(kind)
            hits = fmts.match_line(message)
            before_plain = plain
            # (the prefilter may hand an earlier ordinary line over again just before an event: the latest one counts)
            if not hits and not dump and _plain_line(message) and (plain is None or lineno > plain[0]):
                plain = (lineno, message, rank, ctx)  # what the job printed last before anything happened
            for fmt, m in hits:
                if dump and fmt.level != "error":
                    continue
                if fmt.kind in WAIT_EVENT_KINDS and not waited:
                    waited = True
                    if plain is not None and plain[0] < lineno:
                        _before_wait(result, source, plain)
                cap_key = (fmt.kind, rank)
                n = per_kind.get(cap_key, 0)
                per_kind[cap_key] = n + 1
                if n >= MAX_EVENTS_PER_KIND and cap_key in over:
                    dropped[fmt.kind] = dropped.get(fmt.kind, 0) + 1
                attrs = {k: v for k, v in fmt.groupdict(m).items() if v not in (None, "")}
                attrs["format"] = fmt.name
                ev_rank = rank
                hp = HOSTPID_RE.match(message)
                pid = None
                if hp:
                    pid = int(hp.group("pid"))
                    ctx_host = hp.group("host")
                    attrs.setdefault("hostpid", f"{ctx_host}:{pid}")
                row = {"source": source.source, "line": lineno, "rank": ev_rank, "host": ctx["host"], "ts": ctx["ts"],
                       "kind": fmt.kind, "message": message[:1000], "template": template_of(message),
                       "details": attrs, "level": info.get("level") or fmt.level[0].upper(), "pid": pid}
                steps.mark_context()
                if n >= MAX_EVENTS_PER_KIND:  # beyond the cap only the latest of its kind and rank is kept
                    over[cap_key] = (row, lineno, ctx)
                    continue
                result.add("events", row)
                if fmt.kind in ("watchdog_timeout", "watchdog_status"):
                    _collective_row(result, source, lineno, ctx, fmt.kind, attrs)
            if dump:
                continue
            if config_hint(message):
                for cm in CONFIG_RE.finditer(message):
                    result.add("events", {"source": source.source, "line": lineno, "rank": rank, "host": ctx["host"],
                                          "ts": ctx["ts"], "kind": "config", "message": message[:300],
                                          "template": "config echo", "level": "I", "pid": None,
                                          "details": {"key": cm.group("key").lower().lstrip("-"),
                                                    "value": float(cm.group("value")), "format": "config-echo"}})
            st = parse_step(message)
            if st:
                if plain is not None and plain[0] == lineno:
                    plain = before_plain  # progress is not an announcement of work (as for sampled step lines)
                st.update({"source": source.source, "line": lineno, "rank": rank, "host": ctx["host"],
                           "ts": ctx["ts"]})
                steps.add(st)
    for row, lineno, ctx in over.values():
        result.add("events", row)
        if row["kind"] in ("watchdog_timeout", "watchdog_status"):
            _collective_row(result, source, lineno, ctx, row["kind"], row["details"])
    tbs.finish()
    summary.finish()
    if scanner is not None and not dump:
        _last_lines(result, source, scanner.tail_lines(_tail_window(scanner, base_rank)), head_texts, scheme,
                    base_rank)
    if dump_kinds:  # dumps inside a big log (small ones are read by postmortem.parsers.embedded directly)
        result.merge(dumps_in_logs.read_dumps(source, sorted(dump_kinds)))
    for row in steps.rows():
        result.add("steps", row)
    if dropped:
        result.problems.append("repetitive lines summarised: " + ", ".join(f"{k} x{v}" for k, v in sorted(dropped.items())))
    if hostpid_rank:
        result.meta["hostpid_rank"] = hostpid_rank
    if scheme.actors:  # Ray's log monitor forwards each actor's stdout and stderr apart: line order is not time order
        result.meta["unordered_streams"] = {source.source: "ray actor stdout/stderr merged by the log monitor"}
    elif tee:  # so does torchrun's tee (a tail thread per file): a rank's stdout can come after its traceback
        result.meta["unordered_streams"] = {source.source: "torchrun --tee: each rank's stdout and stderr tailed apart"}
    if scanner is not None and getattr(scanner, "summarised", False):
        if any(scanner.nccl_counts.values()):
            result.meta["nccl_counts"] = {source.source: dict(scanner.nccl_counts)}
        result.meta["summarised"] = {source.source: dict(scanner.sampled)}
    result.lines, result.bytes = stats.lines, stats.bytes
    result.problems.extend(stats.problems)
    return result


@functools.lru_cache(maxsize=1)
def _prefilter_triggers() -> prefilter.Triggers:
    return prefilter.compile_triggers(
        events=sorted({t for f in fmts.FORMATS for t in f.triggers} | set(LINE_TRIGGERS)),
        events_nocase=LINE_TRIGGERS_NOCASE, windows=WINDOW_TRIGGERS, steps=STEP_TRIGGERS,
        steps_nocase=STEP_TRIGGERS_NOCASE, weak_steps_nocase=WEAK_STEP_TRIGGERS_NOCASE,
        weak_events=WEAK_EVENT_TRIGGERS, **_gates(), scans=((CONFIG_ECHO_SCAN, True),),
        error_events=sorted({t for f in fmts.FORMATS if f.level == "error" for t in f.triggers} | set(LINE_TRIGGERS)
                            | set(WINDOW_TRIGGERS)))


def share_exact_budget(sources: list, every_line: bool = False) -> None:
    """Give every source this parser reads its share of the job's exact budget (Source.exact_bytes; see
    prefilter.EXACT_JOB_BYTES): before parsing, from the sizes the discovery saw, on every engine alike.
    `every_line`: no budget, every file is read exactly (every step line a row)."""
    text = [s for s in sources if not s.problem and s.kind in TEXT_KINDS]
    sizes = [prefilter.text_size(s.path, s.bytes, s.compression) for s in text]
    shares = sizes if every_line else prefilter.exact_shares(sizes)
    for s, share in zip(text, shares):
        s.exact_bytes = share
        s.every_step = every_line


def _gates() -> dict:
    """The scan patterns of the `scan: regex` formats (gates), and their triggers that no other format or line
    rule shares (gated; see prefilter.Triggers)."""
    scanned = [f for f in fmts.FORMATS if f.scan_regex]
    shared = {t for f in fmts.FORMATS if not f.scan_regex for t in f.triggers} | set(LINE_TRIGGERS) \
        | set(WINDOW_TRIGGERS)
    gated = sorted({t for f in scanned for t in f.triggers} - shared)
    return {"gates": tuple(fmts.scan_pattern(f) for f in scanned), "gated": tuple(gated)}


def warm() -> None:
    """Build the trigger matchers now (see postmortem.parsers.base.preload)."""
    triggers = _prefilter_triggers()
    triggers.fast_events()
    triggers.fast_config()
    learned_prefix._stamp_or_rank_matcher()


END_SAMPLE_BYTES = 64 * 1024
END_SAMPLE_LINES = 20  # the job's last lines (its failure), where a collector's prefix is the rule


def _end_lines(path: str, n: int, whole: bytes | None = None) -> list[str]:
    """The last n whole lines of an uncompressed file (at most END_SAMPLE_BYTES read), decoded; [] when unreadable.
    `whole`: the file's bytes, when the scanner already holds all of it (a small file is not opened again)."""
    if whole is not None:
        size, data = len(whole), whole[-END_SAMPLE_BYTES:]
    else:
        try:
            with open(path, "rb") as fh:
                size = fh.seek(0, 2)
                fh.seek(max(0, size - END_SAMPLE_BYTES))
                data = fh.read(END_SAMPLE_BYTES)
        except OSError:
            return []
    parts = last_split(data, n, drop_first=size > END_SAMPLE_BYTES)  # (a window that starts mid-line)
    return [textio.clean(p[:1024].decode("utf-8", "replace")) for p in parts if p.strip()]


def _line_source(source: Source, stats: textio.ReadStats):
    """(scanner or None, the first lines for prefix schemes, iterator of (line number, text, steps_only)).

    UTF-8 files go through the bytes prefilter (big ones summarised); UTF-16 ones are read line by line."""
    hint = prefilter.text_size(source.path, source.bytes, source.compression)
    try:
        scanner = prefilter.LineScanner(source.path, stats, hint, _prefilter_triggers(), source.exact_bytes)
    except prefilter.NotStreamable:
        scanner = None
    if scanner is not None:
        return scanner, scanner.head_lines(SCHEME_SAMPLE), iter(scanner)
    lines_iter = textio.iter_lines(source.path, stats)
    head: list[tuple[int, str]] = []
    for item in lines_iter:
        head.append(item)
        if len(head) >= SCHEME_SAMPLE:
            break

    tail: collections.deque = collections.deque(maxlen=TAIL_LINES_READ)

    def all_lines():
        for lineno, raw in head:
            tail.append((lineno, raw))
            yield lineno, raw, False
        for lineno, raw in lines_iter:
            tail.append((lineno, raw))
            yield lineno, raw, False
    return _Tail(tail), [ln for _, ln in head], all_lines()


def _nccl_row(result: ParseResult, source: Source, lineno: int, m, ctx: dict, hostpid_rank: dict) -> None:
    msg, host, level, dev, pid = m.group(*_NCCL_LINE_GROUPS)  # by number: the regex module's names are slow
    row = {"source": source.source, "line": lineno, "rank": ctx["rank"], "host": host, "ts": None,
           "level": level, "subsys": None, "comm_id": None, "nranks": None,
           "cuda_dev": int(dev) if dev else None, "bus_id": None, "version": None,
           "message": msg[:500], "pid": int(pid), "nccl_rank": None}
    im = NCCL_INIT_RE.search(msg) if "nranks " in msg else None  # (a literal every match holds)
    if im:
        commid, comm, nranks, bus, nccl_rank = im.group(*_NCCL_INIT_GROUPS)
        row.update(comm_id=commid or comm, nranks=int(nranks), bus_id=bus, nccl_rank=int(nccl_rank))
        key = f"{host}:{pid}"
        # The largest communicator a process joins is the default (world) group: its rank is the global rank.
        prev = hostpid_rank.get(key + "#n", 0)
        if int(nranks) >= prev:
            hostpid_rank[key] = int(nccl_rank)
            hostpid_rank[key + "#n"] = int(nranks)
    vm = NCCL_VERSION_RE.search(msg) if "version" in msg else None
    if vm:
        row["version"] = vm.group(1)
    result.add("nccl", row)


def _collective_row(result: ParseResult, source: Source, lineno: int, ctx: dict, kind: str, attrs: dict) -> None:
    row = {"source": source.source, "line": lineno, "rank": ctx["rank"], "host": ctx["host"], "ts": ctx["ts"],
           "pg": None, "state": "timeout" if kind == "watchdog_timeout" else "failed"}
    if kind == "watchdog_timeout":
        work = dict(WORK_KV_RE.findall(attrs.get("work", "")))
        row.update(seq=_int(work.get("SeqNum")), op=work.get("OpType"), numel_in=_int(work.get("NumelIn")),
                   numel_out=_int(work.get("NumelOut")), timeout_ms=_int(work.get("Timeout(ms)")),
                   elapsed_ms=_int(attrs.get("elapsed_ms")))
        attrs.update({k: v for k, v in (("seq", row["seq"]), ("op", row["op"]), ("timeout_ms", row["timeout_ms"]))
                      if v is not None})
    else:
        row.update(seq=_int(attrs.get("seq")), last_enqueued=_int(attrs.get("last_enqueued")),
                   last_completed=_int(attrs.get("last_completed")))
    if row.get("seq") is None and row.get("last_completed") is None:
        return
    result.add("collectives", row)


def _int(v) -> int | None:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None
