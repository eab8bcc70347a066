"""The command line: a thin skin over postmortem.analyze (same option names)."""
from __future__ import annotations

import argparse
import os
import sys

from postmortem import __version__


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree (also used by the docs test)."""
    p = argparse.ArgumentParser(prog="postmortem", description="Why did a distributed training job die or hang?")
    p.add_argument("--version", action="version", version=f"postmortem {__version__}")
    sub = p.add_subparsers(dest="command")
    a = sub.add_parser("analyze", help="analyse a directory of logs/dumps (or one file)")
    a.add_argument("path", help="directory tree, file, or .tar.gz/.tgz/.zip with the job's logs, dumps and snapshots")
    a.add_argument("--format", choices=("text", "json", "html"), default=None,
                   help="output format (default: from the -o extension .json/.html/.txt, else text)")
    a.add_argument("-o", "--output", help="write the report to this file instead of stdout")
    a.add_argument("--jobs", "-j", type=int, default=None, help="parser processes (default: cores, when it pays)")
    a.add_argument("--rules", action="append", default=None, metavar="RULE_ID", help="run only these rule ids (unknown ids are an error)")
    a.add_argument("--plugin", action="append", default=None, metavar="FILE_OR_DIR",
                   help="load extra rules from a .py file or directory")
    a.add_argument("--engine", choices=("local", "dask"), default="local", help="where to run the parse stage")
    a.add_argument("--scheduler", default=None, help="dask scheduler address (with --engine dask)")
    a.add_argument("--lang", choices=("en", "zh"), default="en", help="language of the HTML report")
    a.add_argument("--baseline", default=None, metavar="GOOD_RUN",
                   help="logs of a run of the same job that worked: lines it printed are not odd")
    a.add_argument("--quiet", "-q", action="store_true", help="no progress output on stderr")
    c = sub.add_parser("collect", help="run a training command unchanged and capture the evidence a post-mortem needs",
                       description="Run COMMAND (torchrun, accelerate launch, deepspeed, python ...) unchanged, "
                                   "capturing its output, stacks on stall, nvidia-smi history and the kernel log "
                                   "into OUT/<node>/; then print the verdict. Exit status is the job's.")
    c.add_argument("--out", required=True, help="evidence directory (each node writes OUT/<node>/)")
    c.add_argument("--stall-after", type=float, default=None, metavar="SECONDS",
                   help="take py-spy dumps when the job has printed nothing for this long (default 300; 0: never)")
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

    Raises ValueError when --format contradicts the extension (`--format json -o report.html`)."""
    implied = FORMAT_BY_SUFFIX.get(os.path.splitext(output or "")[1].lower())
    if fmt and implied and fmt != implied:
        raise ValueError(f"--format {fmt} contradicts the extension of {output} ({implied}); "
                         f"drop --format or name the file *.{'txt' if fmt == 'text' else fmt}")
    return fmt or implied or "text"


def check_rule_ids(wanted: list[str], known: list[str]) -> None:
    """Raise ValueError naming the ids of `wanted` that no rule has."""
    unknown = [r for r in wanted if r not in set(known)]
    if unknown:
        raise ValueError(f"unknown rule id{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)} "
                         f"(`postmortem rules` lists the ids)")


def _rules(args) -> int:
    from postmortem.rules import all_rules, load_plugins
    if args.plugin:
        load_plugins(args.plugin, entry_points=False)
    for r in all_rules():
        print(f"{r.id:34} {r.category:22} {r.severity:8} {r.title}")
    return 0


def _collect(args) -> int:
    from postmortem.collect import DEFAULT_SMI_INTERVAL, DEFAULT_STALL_AFTER, collect, exit_like
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        print("postmortem collect: error: no command given (postmortem collect --out DIR -- COMMAND ...)",
              file=sys.stderr)
        return 2
    try:
        rc = collect(command, args.out,
                     stall_after=DEFAULT_STALL_AFTER if args.stall_after is None else args.stall_after,
                     smi_interval=DEFAULT_SMI_INTERVAL if args.smi_interval is None else args.smi_interval,
                     analyze=not args.no_analyze, node=args.node, py_spy=args.py_spy, quiet=args.quiet)
    except OSError as exc:  # the evidence directory cannot be made: said before the job starts
        print(f"postmortem collect: error: {exc}", file=sys.stderr)
        return 2
    return exit_like(rc)


def _analyze(args) -> int:
    from postmortem.api import analyze
    from postmortem.engines import EngineError
    from postmortem.rules import all_rules, load_plugins
    for what in (args.path, args.baseline):
        if what is not None and not os.path.exists(what):
            print(f"postmortem: error: no such file or directory: {what}", file=sys.stderr)
            return 2
    try:
        fmt = output_format(args.format, args.output)
        if args.plugin:
            load_plugins(args.plugin, entry_points=False)
        if args.rules:
            check_rule_ids(args.rules, [r.id for r in all_rules()])
    except ValueError as exc:
        print(f"postmortem analyze: error: {exc}", file=sys.stderr)
        return 2
    try:
        analysis = analyze(args.path, jobs=args.jobs, rules=args.rules, engine=args.engine,
                           scheduler=args.scheduler, plugin_paths=None, quiet=args.quiet, html=fmt == "html",
                           baseline=args.baseline)
    except (FileNotFoundError, EngineError) as exc:
        print(f"postmortem: error: {exc}", file=sys.stderr)
        return 2
    if analysis.verdict is None and fmt == "text":
        print(f"postmortem: error: no readable files under {args.path}", file=sys.stderr)
        return 2
    if fmt == "json":
        text = analysis.to_json()
    elif fmt == "html":
        text = analysis.to_html(lang=args.lang)
    else:
        text = analysis.to_text()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
        if fmt != "json" and not args.quiet:
            print(analysis.to_text(), end="")
            print(f"report written to {args.output}")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


if __name__ == "__main__":
    run()
