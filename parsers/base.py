"""The parser contract and registry: kind -> parser functions; parse_source never raises on bad content."""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Callable

from postmortem.ingest import textio
from postmortem.ingest.discover import Source
from postmortem.tables.columns import Columns, share_text, to_columns


@dataclass
class ParseResult:
    """Rows for each table produced from one source, plus what was read and what went wrong."""
    rows: dict[str, list[dict]] = field(default_factory=dict)
    lines: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)   # facts about the job (world size, host->rank maps, versions)

    def add(self, table: str, row: dict) -> None:
        """Append one row to a table."""
        self.rows.setdefault(table, []).append(row)

    def merge(self, other: "ParseResult") -> None:
        """Fold another parser's result for the same source into this one."""
        for table, rows in other.rows.items():
            self.rows.setdefault(table, []).extend(rows)
        self.lines = max(self.lines, other.lines)
        self.bytes = max(self.bytes, other.bytes)
        self.problems.extend(p for p in other.problems if p not in self.problems)
        for key, value in other.meta.items():
            if isinstance(value, dict):
                self.meta.setdefault(key, {}).update(value)
            elif isinstance(value, list):
                self.meta.setdefault(key, []).extend(value)
            else:
                self.meta.setdefault(key, value)


def compact(result: ParseResult) -> ParseResult:
    """The same result with every table's rows as Columns (for sending between processes), equal texts of its rows
    one object (an error line is an event and one of the rank's last lines: it is pickled and held once)."""
    result.rows = {t: rows if isinstance(rows, Columns) else to_columns(rows) for t, rows in result.rows.items()}
    share_text(result.rows, {}, limit=1 << 30)
    return result


def parse_source_compact(source: Source) -> ParseResult:
    """parse_source, rows returned column-wise (the parallel engines' unit of work)."""
    return compact(parse_source(source))


Parser = Callable[[Source], ParseResult]
_REGISTRY: dict[str, list[Parser]] = {}


def register(*kinds: str) -> Callable[[Parser], Parser]:
    """Decorator: register a parser function for one or more input kinds (in registration order)."""
    def deco(fn: Parser) -> Parser:
        for kind in kinds:
            _REGISTRY.setdefault(kind, []).append(fn)
        return fn
    return deco


def registered_kinds() -> dict[str, list[str]]:
    """Kinds with their parser names (for `postmortem parsers` and tests)."""
    _load_builtin()
    return {k: [f"{fn.__module__}.{fn.__name__}" for fn in fns] for k, fns in sorted(_REGISTRY.items())}


_LOADED = False
_BROKEN: list[str] = []


def _load_builtin() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib
    for name in ("textlog", "pyspy", "nvidia_smi", "torchrun_error", "flight_recorder", "dmesg", "stackdump", "nccl",
                 "collect_manifest", "host_memory", "embedded", "dumps_in_logs", "notebook"):
        mod = f"postmortem.parsers.{name}"
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                _BROKEN.append(f"{mod} unavailable: {exc}")
        except Exception as exc:  # a broken parser module costs its kind, never the whole analysis
            _BROKEN.append(f"{mod} unavailable: {type(exc).__name__}: {exc}")


def preload() -> None:
    """Import every built-in parser and build the shared trigger matchers: done once in a parent before it forks
    its parser processes, so that each of them does not pay for it again (~0.15 CPU-s each)."""
    _load_builtin()
    try:
        # the registry knows its parsers by name only (they import it: a static import back would be a cycle)
        import importlib
        importlib.import_module("postmortem.parsers.textlog").warm()
    except Exception:  # noqa: BLE001 - the workers build the same state again and report a failure there
        pass


def parse_source(source: Source) -> ParseResult:
    """Run every parser registered for the source's kind; any exception becomes a problem, never a crash."""
    _load_builtin()
    result = ParseResult(bytes=source.bytes)
    if source.problem:
        result.problems.append(source.problem)
        return result
    parsers = _REGISTRY.get(source.kind, [])
    for fn in parsers:
        try:
            result.merge(fn(source))
        except textio.InputProblem as exc:  # the file was refused or vanished: say why, no traceback noise
            _note(result, str(exc))
        except MemoryError:
            _note(result, f"{fn.__module__}: ran out of memory; partial result kept")
        except RecursionError:
            _note(result, f"{fn.__module__}: content nested too deeply; not parsed")
        except OSError as exc:  # unreadable after discovery (permissions changed, file removed, I/O error)
            _note(result, f"cannot read: {exc.strerror or exc}")
        except Exception as exc:  # a parser bug or hostile input must not stop the analysis
            where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
            at = f" (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})" if where else ""
            _note(result, f"{fn.__module__} failed: {type(exc).__name__}: {_short(exc)}{at}")
    if parsers and not result.lines and source.bytes:
        # Every file read must report its lines; a structured parser may not count them itself.
        result.lines = textio.count_lines(source.path)
    return result


def _note(result: ParseResult, problem: str) -> None:
    if problem not in result.problems:
        result.problems.append(problem)


def _short(exc: BaseException, limit: int = 300) -> str:
    """An exception message bounded in length (hostile input can end up inside it)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not escape either
        text = "<unprintable>"
    return text if len(text) <= limit else text[:limit] + "…"
