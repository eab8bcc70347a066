"""The notebook/library facade: `analyze(path) -> Analysis` runs discover → parse → build → rules → verdict."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

from postmortem.ingest import beside
from postmortem.tables.columns import share_text
from postmortem.ingest import discover as discover_mod
from postmortem.verdict.findings import Finding, Verdict

if TYPE_CHECKING:
    import pandas as pd

    from postmortem.tables.build import Tables

# pandas and the stages after parsing are imported while the parser processes run (see _Preload), not before.

PARALLEL_MIN_BYTES = 32 * 1024 * 1024  # below this, process start-up costs more than it saves
MAX_CHUNK = 64  # files sent to a parser process at a time


@dataclass
class Analysis:
    """Everything postmortem concluded about one input path."""
    input: str
    sources: list
    tables: Tables
    findings: list[Finding]
    verdict: Verdict | None
    evidence_gaps: list[dict] = field(default_factory=list)

    @property
    def ranks(self):
        """Where every rank was when the job stopped: one row per rank (columns in postmortem.ranks.state)."""
        return self.tables.frames.get("ranks")

    @property
    def world_size(self):
        return self.tables.meta.get("world_size")

    def to_dict(self) -> dict:
        """The JSON contract (docs/json.md) as a dict."""
        from postmortem.reports.json_report import to_dict
        return to_dict(self)

    def to_json(self, indent: int | None = 2) -> str:
        """The JSON contract as a string (sorted, deterministic)."""
        from postmortem.reports.json_report import to_json
        return to_json(self, indent=indent)

    def to_text(self, lang: str = "en") -> str:
        """The terminal summary (`lang`: "en" or "zh")."""
        from postmortem.reports.i18n import catalogue
        from postmortem.reports.text_report import render_text
        catalogue(lang)  # an unknown language is a ValueError here, as for to_html
        return render_text(self, lang=lang)

    def to_html(self, **options) -> str:
        """The self-contained HTML report."""
        from postmortem import __version__
        from postmortem.reports.render import render_html
        return render_html(self, **{"version": __version__, **options})

    @property
    def figures(self) -> "Figures":
        """The report's charts as matplotlib Figures (never shown): `a.figures["steps"]`; an attribute like
        `a.tables` and `a.findings` (`a.figures()` still works, and `a.figures(lang="zh")` labels them in Chinese)."""
        from postmortem.reports.figures import make_figures
        return Figures(make_figures(self), self)

    def _repr_html_(self) -> str:
        from postmortem import __version__
        from postmortem.reports.render import render_html
        return render_html(self, fragment=True, version=__version__)

    def __repr__(self) -> str:
        """A few lines: the verdict, the culprit, what was read and found (the tables have their own repr)."""
        from postmortem.verdict.sentences import describe
        return describe(self)


class Figures(dict):
    """Name -> matplotlib Figure (timeline, steps, gpu_memory: those with data). Calling it returns itself, or the
    figures labelled in another language: `a.figures(lang="zh")`."""

    def __init__(self, figures: dict, analysis: "Analysis"):
        super().__init__(figures)
        self._analysis = analysis

    def __missing__(self, name):
        raise NoChart(name, sorted(self))

    def __call__(self, lang: str = "en") -> "Figures":
        if lang == "en":
            return self
        from postmortem.reports.figures import make_figures
        return Figures(make_figures(self._analysis, lang), self._analysis)


CHART_NEEDS = {"timeline": "lines with times from at least one source",
               "steps": "step lines with times from two reports of a rank, or ranks that stopped at different steps",
               "gpu_memory": "nvidia-smi snapshots"}


class NoChart(KeyError):
    """A chart the inputs have no data for (a KeyError, as for any dict, that says why and what there is)."""

    def __init__(self, name, drawn: list):
        super().__init__(name)
        need = CHART_NEEDS.get(name)
        self.message = (f"no {name!r} chart for this input" + (f": it needs {need}" if need else " (no such chart)")
                        + f"; charts drawn: {', '.join(drawn) if drawn else 'none'}")

    def __str__(self) -> str:
        return self.message


def _findings_frame(self) -> "pd.DataFrame":
    """The findings as a DataFrame, one row per finding, the verdict's first (columns: docs/tables.md)."""
    from postmortem.verdict.frame import findings_frame
    from postmortem.reports.evidence import first_time
    return findings_frame(self.finding_list, [first_time(self, f) for f in self.finding_list])


def _set_findings(self, value: list) -> None:
    if hasattr(value, "columns"):  # the DataFrame view read back (e.g. dataclasses.replace): not a finding list
        raise TypeError("Analysis.findings takes a list of Finding; the DataFrame is a view of a.finding_list")
    self.finding_list = list(value)


# `Analysis(findings=[...])` keeps taking the list (rules and reports use it as `finding_list`); reading
# `a.findings` gives the notebook view, a DataFrame.
Analysis.findings = property(_findings_frame, _set_findings, doc=_findings_frame.__doc__)


def parse_all(sources: list, jobs: int | None = None, engine: str = "local", scheduler: str | None = None,
              quiet: bool = False, preload: "_Preload | None" = None, sink=None, all_steps: bool = False) -> list:
    """Parse every source (in parallel processes when it pays); results are in the order of `sources`.

    With `sink`, each result is handed to `sink(index of its source, result)` as it arrives (in any order) and not
    kept: the list returned then holds True for each source. A progress bar is drawn on stderr while parsing, unless
    `quiet` or stderr is not a terminal. `preload` is started once the parser processes exist (never before a fork:
    a thread inside an import at fork time would leave that import's lock held in the child)."""
    preload = preload or _Preload(enabled=False)
    from postmortem.parsers.base import parse_source_compact as parse_source
    from postmortem.parsers.textlog import share_exact_budget
    # what of each file is read exactly: from the whole job, before any file is read (all_steps: all of it)
    share_exact_budget(sources, every_line=all_steps)
    from postmortem import progress as progress_mod
    total = sum(s.bytes for s in sources if not s.problem)
    out: list = [None] * len(sources)
    canon: dict = {}

    def put(i: int, res) -> None:
        share_text(res.rows, canon)
        if sink is None:
            out[i] = res
        else:
            sink(i, res)
            out[i] = True

    with progress_mod.make(len(sources), total, quiet=quiet) as bar:
        if engine == "dask":
            from postmortem.ingest.engines import dask_parse
            preload.start()  # Dask starts its worker processes with spawn: nothing inherited
            dask_parse(sources, scheduler, progress=bar, sink=put)
            return out
        workers = jobs if jobs is not None else (os.cpu_count() or 1)
        if workers <= 1 or len(sources) < 2 or (jobs is None and total < PARALLEL_MIN_BYTES):
            preload.start()
            for i, s in enumerate(sources):
                put(i, parse_source(s))
                bar.update(s.bytes)
            return out
        from postmortem.parsers.base import preload as preload_parsers
        preload_parsers()  # the forked workers inherit the imported parsers and compiled triggers
        # Largest files first so one big file does not finish last; chunks keep IPC small for many tiny files.
        order = sorted(range(len(sources)), key=lambda i: -sources[i].bytes)
        pool = ProcessPoolExecutor(max_workers=workers, initializer=_ignore_sigint)
        try:
            # chunks of at most MAX_CHUNK files: a chunk's results are unpickled at once, so bigger ones would make
            # the parent's peak grow with the number of files
            results = pool.map(parse_source, [sources[i] for i in order],
                               chunksize=max(1, min(MAX_CHUNK, len(sources) // (workers * 8))))
            preload.start()  # map() has forked every worker (fork pools start them all on the first task)
            for i, res in zip(order, results):
                put(i, res)
                bar.update(sources[i].bytes)
            pool.shutdown()
        except KeyboardInterrupt:  # Ctrl-C: stop the workers now instead of waiting for their chunks
            _stop_pool(pool)
            raise
        except BrokenProcessPool:
            pool.shutdown()
            preload.join()  # _isolate forks again
            _isolate(sources, out, bar, put)
        return out


def _ignore_sigint() -> None:
    """Parser processes leave Ctrl-C to the parent (which stops them): no traceback from each of them."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop_pool(pool) -> None:
    """Cancel what is queued and end the parser processes (interrupted)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # shutdown() forgets them
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        try:
            proc.terminate()
        except Exception:  # noqa: BLE001 - already gone
            pass


def _isolate(sources: list, out: list, bar, put) -> None:
    """A parser process died (killed for memory, a crash in C code): parse what is left one file per process, so
    the file that kills its process is named in its problem and every other file is still read."""
    from postmortem.parsers.base import ParseResult
    from postmortem.parsers.base import parse_source_compact as parse_source
    for i, src in enumerate(sources):
        if out[i] is not None:
            continue
        try:
            with ProcessPoolExecutor(max_workers=1) as pool:
                put(i, pool.submit(parse_source, src).result())
        except BrokenProcessPool:
            put(i, ParseResult(bytes=src.bytes, problems=[
                "the parser process died while reading this file (killed, e.g. out of memory); not parsed"]))
        bar.update(src.bytes)


def analyze(path: str, *, jobs: int | None = None, rules: list[str] | None = None, engine: str = "local",
            scheduler: str | None = None, plugin_paths: list[str] | None = None, quiet: bool = False,
            html: bool = False, baseline: str | None = None, earlier: list[str] | None = None,
            all_steps: bool = False) -> Analysis:
    """Analyse a directory tree, a single file or a .tar.gz/.tgz/.zip and return the Analysis (raises
    FileNotFoundError for no input). The tables, their columns and dtypes: docs/tables.md.

    `quiet` turns off the progress bar drawn on stderr (it is drawn only when stderr is a terminal). `html` says
    the caller renders the HTML report next: its templates are loaded while the files are parsed, and its charts'
    matplotlib too, unless parser processes run (then a chart process loads it once they are done).

    `baseline`: a run of the same job that worked (directory, file or archive); templates it printed are not new,
    so the odd lines (`a.tables.odd_lines`, `new` column) and the culprits they name leave them out.

    `all_steps`: read every file exactly, so that `a.tables.steps` holds a row for every step line (by default a big
    job's files are read exactly up to a shared budget and their progress and step lines sampled beyond it; the
    last step of each rank and the lines around every error are always kept). Slower and bigger on big logs.

    `earlier`: runs of the same job submitted before this one, oldest first (directories, files or archives). Each
    is analysed on its own; when the verdict's root failed them too, without the job getting further in between,
    `a.verdict.next` says so and a restart becomes a change. A `baseline` that failed counts as an earlier run."""
    for other in [baseline, *(earlier or [])]:
        if other is not None and not os.path.exists(other):
            raise FileNotFoundError(f"{'baseline' if other == baseline else 'earlier run'} not found: {other}")
    analysis = _analyze_one(path, jobs=jobs, rules=rules, engine=engine, scheduler=scheduler,
                            plugin_paths=plugin_paths, quiet=quiet, html=html, baseline=baseline,
                            all_steps=all_steps)
    if earlier or baseline is not None:
        from postmortem.verdict import history
        runs = [_analyze_one(p, jobs=jobs, rules=rules, engine=engine, scheduler=scheduler, quiet=True)
                for p in ([baseline] if baseline is not None else []) + list(earlier or [])]
        # a baseline that worked is no earlier failure
        runs = [a for a in runs if a.verdict is not None and (a.input != baseline or a.verdict.category != "no_failure")]
        history.redecide(analysis, history.resubmissions(analysis, runs))
    return analysis


def _analyze_one(path: str, *, jobs: int | None = None, rules: list[str] | None = None, engine: str = "local",
                 scheduler: str | None = None, plugin_paths: list[str] | None = None, quiet: bool = False,
                 html: bool = False, baseline: str | None = None, all_steps: bool = False) -> Analysis:
    """analyze() of one run."""
    parallel = _parallel_likely(path, jobs, engine)
    if parallel:
        # The tree is walked and sniffed in a forked child while this process imports the parsers and builds their
        # trigger databases, which the parser processes then inherit: the two used to run one after the other.
        from postmortem.parsers.base import preload as preload_parsers
        sources = beside.call_beside(discover_mod.discover, path, preload_parsers)
    else:
        sources = discover_mod.discover(path)
    # With parser processes, an HTML report's charts are drawn by a process forked once they are done (see
    # postmortem.reports.chart_process): matplotlib is not loaded here while they run.
    preload = _Preload(html=html, charts=not parallel)
    from postmortem.tables.fold import TableBuilder  # no pandas: it is imported while the files are parsed
    builder = TableBuilder(sources)
    # each result goes into the tables' column lists as it arrives: the parsed rows are never all held at once
    parse_all(sources, jobs=jobs, engine=engine, scheduler=scheduler, quiet=quiet, preload=preload, sink=builder.add,
              all_steps=all_steps)
    preload.join()
    if html and parallel:
        from postmortem.reports import chart_process
        chart_process.start()  # loads matplotlib on the CPU the parser processes left while the rules run here
    if plugin_paths:
        from postmortem.rules import load_plugins
        load_plugins(plugin_paths, entry_points=False)
    tables = builder.finish()
    if html and parallel:
        from postmortem.reports import view_ahead
        view_ahead.start(tables)  # the report's parts that the verdict does not change, beside the rules here
    base_keys = None
    if baseline is not None:
        from postmortem.ranks.odd_lines import baseline_keys
        base_keys = baseline_keys(baseline)
    return conclude_tables(path, sources, tables, rules=rules, baseline=base_keys)


def _parallel_likely(path: str, jobs: int | None, engine: str) -> bool:
    """Whether parse_all will fork parser processes for this path: a big enough directory, more than one CPU."""
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    return (engine == "local" and workers > 1 and os.path.isdir(path) and beside.can_fork()
            and (jobs is not None or discover_mod.holds_at_least(path, PARALLEL_MIN_BYTES)))


def conclude(path: str, sources: list, results: list, rules: list[str] | None = None) -> Analysis:
    """The stages after parsing: tables -> rank state -> rules -> failure signals -> verdict -> evidence gaps."""
    from postmortem.tables import build as tables_mod
    return conclude_tables(path, sources, tables_mod.build(sources, results), rules=rules)


def conclude_tables(path: str, sources: list, tables, rules: list[str] | None = None,
                    baseline: set[int] | None = None) -> Analysis:
    """The stages after the tables: rank state -> rules -> failure signals -> verdict -> evidence gaps."""
    from postmortem.verdict import gaps as gaps_mod
    from postmortem.rules import all_rules
    from postmortem.ingest.attempts import first_attempt
    # With restarts, the stages below see the first attempt only (the verdict is about the first failure); the
    # Analysis keeps every row.
    work, attempts = first_attempt(tables)
    work.meta["attempts"] = attempts
    selected = all_rules()
    if rules:
        wanted = set(rules)
        selected = [r for r in selected if r.id in wanted]
    has_inputs = any(not s.problem for s in sources)
    from postmortem.verdict.judge import judge
    verdict, findings = judge(work, selected, has_inputs, baseline)
    if verdict is not None and findings:
        from postmortem.verdict.direct_exception import strengthen
        if strengthen(findings[0], work):  # one rank's exception seen directly: no inference to hedge
            verdict.confidence = findings[0].confidence
        from postmortem.verdict.holder import name_holder
        name_holder(findings[0], work)  # a stuck rank's odd thread: what it most likely waits on
    _mark_roles(work.frames["ranks"], verdict, findings)
    if verdict is not None and attempts.restarted and findings:
        findings[0].explanation = f"{findings[0].explanation} {attempts.sentence()}"
    if work is not tables:
        tables.frames["ranks"], tables.frames["odd_lines"] = work.frames["ranks"], work.frames["odd_lines"]
        for key in ("culprits", "attempts", "signals", "rule_errors"):
            if key in work.meta:
                tables.meta[key] = work.meta[key]
    explain(verdict, findings, work, sources)
    if verdict is not None:
        from postmortem.verdict import history
        recurrence = history.restarts(tables, verdict, findings, work, selected) if attempts.restarted else None
        verdict.next = history.next_for(verdict, findings, work, recurrence)
    gaps = gaps_mod.evidence_gaps(tables, verdict) if verdict else []
    return Analysis(input=path, sources=sources, tables=tables, findings=findings, verdict=verdict,
                    evidence_gaps=gaps)


def _mark_roles(ranks, verdict, findings) -> None:
    """Fill the ranks table's verdict_role from the verdict's culprits and its root finding's affected ranks."""
    if ranks is None or not len(ranks) or verdict is None:
        return
    import pandas as pd
    culprits = set(verdict.culprit_ranks)
    affected = set(findings[0].affected_ranks) if findings else set()
    if culprits and "end_cause" in ranks:  # with culprits named, a rank that ended as a consequence followed them
        affected |= {int(r) for r, c in zip(ranks["rank"], ranks["end_cause"]) if c == "consequence"}
    ranks["verdict_role"] = pd.Series(["culprit" if int(r) in culprits else "affected" if int(r) in affected
                                       else None for r in ranks["rank"]], index=ranks.index, dtype=object)


def explain(verdict: Verdict | None, findings: list[Finding], tables, sources: list | None = None) -> None:
    """Fill the verdict's why, fix and evidence from its root mechanism (postmortem.verdict.advice), and say so when nothing
    in the input looks like a training job's output. Category, culprits and confidence stay as decided."""
    from postmortem.verdict import advice as advice_mod
    from postmortem.ingest import recognised
    if verdict is None:
        return
    adv = advice_mod.advise(findings, tables.frames.get("ranks"), tables.steps)
    if adv is not None:
        verdict.why, verdict.fix, verdict.mechanism = adv.why, adv.fix, adv.mechanism
        # the lines of the root finding, then those of the finding that names the mechanism (the why cites both)
        verdict.evidence = list(findings[0].evidence)
        if adv.basis is not None:
            verdict.evidence += [e for e in adv.basis.evidence if e not in verdict.evidence]
        if verdict.culprit_ranks and not any(e.rank in verdict.culprit_ranks for e in verdict.evidence):
            from postmortem.ranks.last_words import ending_line, last_own_line
            own = last_own_line(tables, verdict.culprit_ranks[0])  # the culprit's own words, not only its peers'
            own = own if own is not None else ending_line(tables, verdict.culprit_ranks[0])  # else how it ended
            verdict.evidence += [own] if own is not None else []
    paths = [s.path for s in sources or [] if not s.problem] if sources is not None else []
    if verdict.category == "no_failure" and not findings and not recognised.looks_like_training(tables, paths):
        verdict.summary = recognised.NOT_TRAINING_SUMMARY
        verdict.confidence = min(verdict.confidence, recognised.NOT_TRAINING_CONFIDENCE)
        verdict.mechanism = "not_a_training_log"


class _Preload:
    """Imports pandas, the table builder and the rules in a thread while the parser processes read the files: the
    parent process only waits on them then, and these imports are a third of a second it would otherwise add. With
    `html`, also the report's templates and, with `charts` (no chart process draws them), matplotlib: another half
    second, only worth it when a report follows."""

    def __init__(self, enabled: bool = True, html: bool = False, charts: bool = True):
        self._thread = None
        self._enabled = enabled
        self._html = html
        self._charts = charts

    def start(self) -> None:
        if self._enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, args=(self._html, self._charts),
                                            name="postmortem-preload", daemon=True)
            self._thread.start()

    @staticmethod
    def _run(html: bool, charts: bool) -> None:
        try:
            import postmortem.verdict.gaps  # noqa: F401
            import postmortem.rules
            import postmortem.tables.build  # noqa: F401
            import postmortem.verdict.decide  # noqa: F401
            postmortem.rules.all_rules()
            if html:
                from postmortem.reports.render import warm_up
                warm_up(charts=charts)
        except Exception:  # noqa: BLE001 - the same imports run again in the main thread and raise there
            pass

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
