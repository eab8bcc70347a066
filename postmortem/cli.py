"""The command line: a thin skin over postmortem.analyze (same option names)."""
from __future__ import annotations

import argparse
import os
import sys

from postmortem import __version__


def _positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds_or_auto(text: str) -> float | None:
    """argparse type: seconds (0 or more), or `auto` (None)."""
    if text.strip().lower() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds or 'auto': {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value:g}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree (also used by the docs test)."""
    p = argparse.ArgumentParser(prog="postmortem", description="Why did a distributed training job die or hang?")
    p.add_argument("--version", action="version", version=f"postmortem {__version__}")
    sub = p.add_subparsers(dest="command")
    a = sub.add_parser("analyze", help="analyse a directory of logs/dumps (or one file)")
    a.add_argument("path", nargs="+",
                   help="directory tree, file, or .tar.gz/.tgz/.zip with the job's logs, dumps and snapshots; several: "
                        "runs of the same job, oldest first (the last is judged, the earlier ones show recurrence)")
    a.add_argument("--format", choices=("text", "json", "html"), default=None,
                   help="output format (default: from the -o extension .json/.html/.txt, else text)")
    a.add_argument("-o", "--output", help="write the report to this file (the terminal still gets the summary)")
    a.add_argument("--jobs", "-j", type=_positive_int, default=None, metavar="N",
                   help="parser processes, at least 1 (default: cores, when it pays)")
    a.add_argument("--rules", action="append", default=None, metavar="RULE_ID", help="run only these rule ids (unknown ids are an error)")
    a.add_argument("--plugin", action="append", default=None, metavar="FILE_OR_DIR",
                   help="load extra rules from a .py file or directory")
    a.add_argument("--engine", choices=("local", "dask"), default="local", help="where to run the parse stage")
    a.add_argument("--scheduler", default=None, help="dask scheduler address (with --engine dask)")
    a.add_argument("--lang", choices=("en", "zh"), default="en", help="language of the report (text and HTML)")
    a.add_argument("--baseline", default=None, metavar="GOOD_RUN",
                   help="logs of a run of the same job that worked: lines it printed are not odd")
    a.add_argument("--all-steps", action="store_true",
                   help="keep a row for every step line in the steps table (big logs are otherwise sampled)")
    a.add_argument("--quiet", "-q", action="store_true", help="no progress output on stderr")
    c = sub.add_parser("collect", help="run a training command unchanged and capture the evidence a post-mortem needs",
                       description="Run COMMAND (torchrun, accelerate launch, deepspeed, python ...) unchanged, "
                                   "capturing its output, stacks on stall, nvidia-smi history and the kernel log "
                                   "into OUT/<node>/; then print the verdict. Exit status is the job's.")
    c.add_argument("--out", required=True, help="evidence directory (each node writes OUT/<node>/)")
    c.add_argument("--stall-after", type=_seconds_or_auto, default=None, metavar="SECONDS",
                   help="take py-spy dumps when the job has printed nothing for this long (default auto: ten times "
                        "the job's usual silence, 10 s at least, at most half its collective timeout or 300 s; "
                        "0: never)")
    c.add_argument("--smi-interval", type=float, default=None, metavar="SECONDS",
                   help="nvidia-smi sampling interval when nvidia-smi exists (default 10, at least 1)")
    c.add_argument("--node", default=None, help="node directory name (default: the short host name)")
    c.add_argument("--py-spy", default=None, metavar="PATH", help="py-spy executable (default: found on PATH)")
    c.add_argument("--no-analyze", action="store_true", help="do not run `postmortem analyze OUT` at the end")
    c.add_argument("--quiet", "-q", action="store_true", help="only errors and the verdict from the collector")
    c.add_argument("cmd", nargs=argparse.REMAINDER, metavar="COMMAND", help="-- then the command to run")
    r = sub.add_parser("rules", help="list the rules with their ids and categories")
    r.add_argument("--plugin", action="append", default=None, metavar="FILE_OR_DIR")
    return p


def main(argv: list[str] | None = None) -> int:
    """The `postmortem` command line: parse the arguments, run the command, return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "collect":
        return _collect(args)
    if args.command not in ("rules", "analyze"):
        parser.print_help()
        return 2
    try:
        if args.command == "rules":
            rc = _rules(args)
        else:
            rc = _analyze(args)
        sys.stdout.flush()  # a closed pipe shows up here, inside the handler, not at interpreter exit
        return rc
    except BrokenPipeError:
        # `postmortem rules | head`: the reader left; that is not an error of the analysis.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's 128 + SIGINT, no traceback
        print("postmortem: interrupted", file=sys.stderr)
        return 130


def run() -> None:
    """The console script: main(), then exit without tearing the heap down (freeing the tables of a big job object
    by object took ~0.1 s after the report was already written)."""
    rc = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(rc)


FORMAT_BY_SUFFIX = {".json": "json", ".html": "html", ".htm": "html", ".txt": "text", ".text": "text"}


def output_format(fmt: str | None, output: str | None) -> str:
    """The output format: --format if given, else what the -o file's extension says, else text.

    Raises ValueError when --format contradicts the extension (`--format json -o report.html`), and when an -o file's
    extension names no format and --format is not given (`-o report.pdf`: writing text into it would mislead)."""
    ext = os.path.splitext(output or "")[1].lower()
    implied = FORMAT_BY_SUFFIX.get(ext)
    if fmt and implied and fmt != implied:
        raise ValueError(f"--format {fmt} contradicts the extension of {output} ({implied}); "
                         f"drop --format or name the file *.{'txt' if fmt == 'text' else fmt}")
    if output and not fmt and not implied:
        raise ValueError(f"cannot tell the format from {output!r}: name it *.html, *.json or *.txt, "
                         "or give --format html|json|text")
    return fmt or implied or "text"


def check_output_path(output: str | None) -> None:
    """Raise ValueError when the report could not be written to `output` (checked before the analysis runs)."""
    if not output:
        return
    folder = os.path.dirname(os.path.abspath(output))
    if os.path.isdir(output):
        raise ValueError(f"{output} is a directory; give a file name (e.g. {os.path.join(output, 'report.html')})")
    if not os.path.isdir(folder):
        raise ValueError(f"cannot write {output}: the directory {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write {output}: no permission to create files in {folder}")


def check_plugin_paths(paths: list[str] | None) -> None:
    """Raise ValueError naming a --plugin path that is neither a .py file nor a directory."""
    for path in paths or ():
        if not os.path.exists(path):
            raise ValueError(f"--plugin {path}: no such file or directory")
        if os.path.isfile(path) and not path.endswith(".py"):
            raise ValueError(f"--plugin {path}: not a .py file")


def load_plugins_or_fail(paths: list[str] | None) -> None:
    """Load --plugin files; a plugin that fails to import is a usage error naming it (ValueError), not a traceback."""
    if not paths:
        return
    from postmortem.rules import load_plugins
    check_plugin_paths(paths)
    for path in paths:
        try:
            load_plugins([path], entry_points=False)
        except Exception as exc:  # noqa: BLE001 - whatever a user's rule file raises on import
            raise ValueError(f"--plugin {path} could not be loaded: {type(exc).__name__}: {exc}") from None


def check_rule_ids(wanted: list[str], known: list[str]) -> None:
    """Raise ValueError naming the ids of `wanted` that no rule has."""
    unknown = [r for r in wanted if r not in set(known)]
    if unknown:
        raise ValueError(f"unknown rule id{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)} "
                         f"(`postmortem rules` lists the ids)")


def _rules(args) -> int:
    from postmortem.rules import all_rules
    try:
        load_plugins_or_fail(args.plugin)
    except ValueError as exc:
        print(f"postmortem rules: error: {exc}", file=sys.stderr)
        return 2
    for r in all_rules():
        print(f"{r.id:34} {r.category:22} {r.severity:8} {r.title}")
    return 0


def _collect(args) -> int:
    from postmortem.collect import DEFAULT_SMI_INTERVAL, collect, exit_like
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        print("postmortem collect: error: no command given (postmortem collect --out DIR -- COMMAND ...)",
              file=sys.stderr)
        return 2
    try:
        rc = collect(command, args.out,
                     stall_after=args.stall_after,
                     smi_interval=DEFAULT_SMI_INTERVAL if args.smi_interval is None else args.smi_interval,
                     analyze=not args.no_analyze, node=args.node, py_spy=args.py_spy, quiet=args.quiet)
    except OSError as exc:  # the evidence directory cannot be made: said before the job starts
        print(f"postmortem collect: error: {exc}", file=sys.stderr)
        return 2
    return exit_like(rc)


def _analyze(args) -> int:
    from postmortem.api import analyze
    from postmortem.ingest.engines import EngineError
    from postmortem.rules import all_rules
    for what in (*args.path, args.baseline):
        if what is not None and not os.path.exists(what):
            print(f"postmortem: error: no such file or directory: {what}", file=sys.stderr)
            return 2
    try:  # everything that can be wrong with the command is said before the analysis runs
        check_output_path(args.output)
        fmt = output_format(args.format, args.output)
        load_plugins_or_fail(args.plugin)
        if args.rules:
            check_rule_ids(args.rules, [r.id for r in all_rules()])
    except ValueError as exc:
        print(f"postmortem analyze: error: {exc}", file=sys.stderr)
        return 2
    try:
        analysis = analyze(args.path[-1], jobs=args.jobs, rules=args.rules, engine=args.engine,
                           scheduler=args.scheduler, plugin_paths=None, quiet=args.quiet, html=fmt == "html",
                           baseline=args.baseline, earlier=args.path[:-1] or None, all_steps=args.all_steps)
    except (FileNotFoundError, EngineError) as exc:
        print(f"postmortem: error: {exc}", file=sys.stderr)
        return 2
    if analysis.verdict is None:  # the same for every format: nothing was read, so no report is written
        print(f"postmortem: error: no readable files under {args.path[-1]}", file=sys.stderr)
        for src in (analysis.sources or [])[:10]:  # why each file was not read
            if getattr(src, "problem", None):
                print(f"  {src.source}: {src.problem}", file=sys.stderr)
        return 2
    if analysis.verdict.mechanism == "not_a_training_log":  # nothing to judge: no verdict, as for an empty folder
        print(f"postmortem: error: nothing under {args.path[-1]} looks like a training job's output (no step, rank, "
              "launcher, NCCL, traceback or stack line); point it at the job's logs", file=sys.stderr)
        return 2
    if fmt == "json":
        text = analysis.to_json()
    elif fmt == "html":
        text = analysis.to_html(lang=args.lang)
    else:
        text = analysis.to_text(lang=args.lang)
    if not args.output:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return 0
    try:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        print(f"postmortem analyze: error: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        if fmt != "text":
            print(analysis.to_text(lang=args.lang), end="")
        print(f"report written to {args.output}")
    return 0


if __name__ == "__main__":
    run()
