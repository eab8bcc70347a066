"""Speed and scale benchmark: `postmortem analyze` against `grep` on generated failure trees, side by side.

For each tree (see make_tree.py) it measures, in one run and on the same files:
- `postmortem analyze TREE --format json -o report.json --quiet`: wall time, peak RSS (largest single process, as
  /usr/bin/time reports it, and the sum over the process tree sampled every 20 ms), and whether the verdict is the
  planted failure (category, phase, culprit rank);
- `grep -c -E '<the trigger set>' -r TREE`: wall time (the floor: reading the bytes once, in C). The trigger set is
  the analyzer's error triggers: every literal that makes the prefilter hand a line to the parser as an event
  (format triggers, the line parser's own, NCCL facts, traceback/summary windows; caseless ones in three spellings);
- the ratio analyze/grep, and for scale the time a bare Python `for line in file` loop takes over the same tree;
- for transparency, grep with the wider set that also holds the progress/step words (`step`, `iter`, `batch`, `{'`):
  those match early on nearly every progress line, so grep skips the rest of each line and runs several times
  faster than with the error triggers; the analyzer does not search for them (it samples progress lines).
Default rows: 128 / 512 / 2,048 ranks at 1 GiB, and 0.25 / 1 / 4 GiB at 512 ranks. Trees are deleted after use.

    python benchmarks/run.py                       # the full table (needs ~5 GiB free under --workdir)
    python benchmarks/run.py --rows 512:256MiB     # one quick row
    python benchmarks/run.py --json results.json   # also write the numbers
    python benchmarks/run.py --ranks --repeats 3   # the rank-count table (1,024 to 16,384 ranks; ~7 GiB free)
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import make_tree  # noqa: E402
import mix_tree  # noqa: E402

DEFAULT_ROWS = ["128:1GiB", "512:1GiB", "2048:1GiB", "512:256MiB", "512:4GiB"]
# MIX:RANKS:SIZE (mix_tree.py): every line mix at 512 ranks / 1 GiB, the error flood, many ranks, and 4 GiB
DEFAULT_MIX_ROWS = ["realistic:512:1GiB", "nccl:512:1GiB", "redraw:512:1GiB", "hfdict:512:1GiB", "warning:512:1GiB",
                    "short:512:1GiB", "errors:64:120MiB", "realistic:2048:4GiB", "realistic:512:4GiB"]
# MIX:RANKS:SIZE, the rank-count table (issue 25): the realistic mix from 1,024 ranks of 1 MiB to 16,384 of 64 KiB
# (1 GiB each), and 16,384 ranks of 256 KiB (4 GiB)
DEFAULT_RANK_ROWS = ["realistic:1024:1GiB", "realistic:2048:1GiB", "realistic:4096:1GiB", "realistic:8192:1GiB",
                     "realistic:16384:1GiB", "realistic:16384:4GiB"]
# The yardstick: `grep -c -E` of eight error triggers (what a person greps a failed job's logs for).
GREP8 = ["Traceback", "Error", "out of memory", "Watchdog caught", "NCCL WARN", "Killed", "Segmentation fault",
         "timed out"]


def trigger_set() -> list[str]:
    """The analyzer's error triggers: the literals its prefilter looks for in every byte to find event lines."""
    from postmortem.parsers import textlog
    trig = textlog._prefilter_triggers()
    words = set(trig.pattern_text)
    for w in textlog.LINE_TRIGGERS_NOCASE:
        words.update({w, w.capitalize(), w.upper()})
    return sorted(words)


def wide_trigger_set() -> list[str]:
    """The error triggers plus the progress/step words (the set earlier versions of this benchmark grepped for)."""
    from postmortem.parsers import textlog
    words = set(trigger_set())
    for w in textlog.STEP_TRIGGERS_NOCASE:
        words.update({w, w.capitalize(), w.upper()})
    words.update(textlog.STEP_TRIGGERS)
    return sorted(words)


def grep_pattern(words: list[str]) -> str:
    """An ERE alternation of literal words."""
    return "|".join("".join("\\" + c if c in ".[]()*+?{}|^$\\" else c for c in w) for w in words)


def machine() -> dict:
    """What the numbers were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as fh:
            mem = int(fh.readline().split()[1]) // 1024 // 1024
    except (OSError, ValueError, IndexError):
        pass
    grep_v = subprocess.run(["grep", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": mem, "python": platform.python_version(),
            "os": platform.platform(), "grep": grep_v, "load_before": load}


def _hwm(pid: int) -> int:
    """Peak RSS (bytes) of one process so far: VmHWM, the high-water mark of its own memory since its exec."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _tree_rss(root_pid: int, hwm: dict | None = None) -> int:
    """Summed RSS (bytes) of a process and its descendants, from /proc; `hwm` collects each one's peak RSS."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            pid, ppid, pages = int(name), int(fields[1]), int(fields[21])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(pid)
        rss[pid] = pages * os.sysconf("SC_PAGE_SIZE")
    total, stack = 0, [root_pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        if hwm is not None and p in rss:
            hwm[p] = max(hwm.get(p, 0), _hwm(p))
        stack.extend(children.get(p, []))
    return total


def run_measured(cmd: list[str], stdout=subprocess.DEVNULL, cwd: str | None = None) -> dict:
    """Wall time, exit code, max single-process RSS and peak summed tree RSS of a command.

    The single-process peak is the largest VmHWM sampled (every 20 ms) over the command's processes, and at least
    wait4's ru_maxrss where that is smaller: Linux starts a forked child's ru_maxrss at its parent's RSS, so wait4
    alone reports this benchmark's own size (it builds the trees) for a small command."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, cwd=cwd)
    peak = [0]
    hwm: dict[int, int] = {}
    done = threading.Event()

    def sample():
        while not done.is_set():
            try:
                peak[0] = max(peak[0], _tree_rss(proc.pid, hwm))
            except OSError:
                pass
            done.wait(0.02)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    t.join()
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    sampled = max(hwm.values(), default=0)
    max_rss = min(usage.ru_maxrss * 1024, sampled) if sampled else usage.ru_maxrss * 1024
    return {"wall_s": wall, "rc": proc.returncode, "max_rss_mb": max_rss / 1024 / 1024,
            "tree_rss_mb": peak[0] / 1024 / 1024, "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
            "stderr": err[-2000:]}


# The floor for any Python reader: iterate the tree's lines once, nothing else (one process).
PY_FLOOR = ("import os,sys\nn=0\nfor d,_,fs in os.walk(sys.argv[1]):\n for f in fs:\n  with open(os.path.join(d,f),'rb') as h:\n"
            "   for line in h:\n    n+=1\nprint(n)")


def warm(tree: str) -> int:
    """Read every file once so both contenders start from the page cache."""
    total = 0
    for dirpath, _, files in os.walk(tree):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                while True:
                    b = fh.read(1 << 22)
                    if not b:
                        break
                    total += len(b)
    return total


def measure_row(ranks: int, size: int, seed: int, workdir: str, pattern: str, repeats: int, keep: bool,
                wide_pattern: str | None = None) -> dict:
    tree = os.path.join(workdir, f"tree_{ranks}r_{size >> 20}MiB_s{seed}")
    if os.path.exists(tree):
        shutil.rmtree(tree)
    t0 = time.perf_counter()
    manifest = make_tree.make_tree(tree, ranks=ranks, size=size, seed=seed)
    gen_s = time.perf_counter() - t0
    row = {"ranks": ranks, "size": size, "bytes": manifest["bytes"], "files": manifest["files"], "gen_s": gen_s,
           "expected": manifest["expected"]}
    try:
        warm(tree)
        greps, analyses = [], []
        report = os.path.join(workdir, "report.json")
        for _ in range(repeats):
            with tempfile.TemporaryFile() as out:  # grep stops early when its output is /dev/null: keep it real
                g = run_measured(["grep", "-c", "-E", pattern, "-r", tree], stdout=out)
            greps.append(g)
            a = run_measured([sys.executable, "-m", "postmortem.cli", "analyze", tree, "--format", "json",
                              "-o", report, "--quiet"])
            if a["rc"] != 0:
                raise RuntimeError(f"analyze failed (rc {a['rc']}): {a['stderr']}")
            analyses.append(a)
        floor = min((run_measured([sys.executable, "-c", PY_FLOOR, tree]) for _ in range(repeats)),
                    key=lambda r: r["wall_s"])
        wide = None
        if wide_pattern:
            with tempfile.TemporaryFile() as out:
                wide = min((run_measured(["grep", "-c", "-E", wide_pattern, "-r", tree], stdout=out)
                            for _ in range(repeats)), key=lambda r: r["wall_s"])
        with open(report, encoding="utf-8") as fh:
            result = json.load(fh)
        g = min(greps, key=lambda r: r["wall_s"])
        a = min(analyses, key=lambda r: r["wall_s"])
        v = result.get("verdict") or {}
        exp = manifest["expected"]
        row.update({"grep_s": g["wall_s"], "analyze_s": a["wall_s"], "ratio": a["wall_s"] / g["wall_s"],
                    "grep_cpu_s": g["user_s"] + g["sys_s"], "analyze_cpu_s": a["user_s"] + a["sys_s"],
                    "py_lines_s": floor["wall_s"],
                    "grep_wide_s": wide["wall_s"] if wide else None,
                    "max_rss_mb": a["max_rss_mb"],
                    "tree_rss_mb": max(r["tree_rss_mb"] for r in analyses),
                    "verdict": {k: v.get(k) for k in ("category", "phase", "culprit_ranks", "step", "confidence",
                                                      "rule")},
                    "planted_found": (v.get("category") == exp["category"] and v.get("phase") == exp["phase"]
                                      and v.get("culprit_ranks") == exp["culprit_ranks"]),
                    "all_analyze_s": [r["wall_s"] for r in analyses], "all_grep_s": [r["wall_s"] for r in greps]})
    finally:
        if not keep:
            shutil.rmtree(tree, ignore_errors=True)
    return row


def _stats(values: list[float]) -> tuple[float, float]:
    v = sorted(values)
    return v[0], v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def measure_mix_row(spec: str, seed: int, workdir: str, repeats: int, keep: bool, code: str | None = None,
                    html: bool = True) -> dict:
    """One MIX:RANKS:SIZE tree: grep (8 triggers), analyze --format json, analyze -o report.html, interleaved
    `repeats` times on the page-cached tree; min and median of each, peak RSS, the verdict and its JSON size."""
    mix, ranks, size = spec.split(":")
    ranks, size = int(ranks), make_tree.parse_size(size)
    tree = os.path.join(workdir, f"mix_{mix}_{ranks}r_{size >> 20}MiB_s{seed}")
    if os.path.exists(tree):
        shutil.rmtree(tree)
    manifest = mix_tree.make_mix_tree(tree, mix, ranks, size, seed)
    row = {"spec": spec, "mix": mix, "ranks": ranks, "bytes": manifest["bytes"], "files": manifest["files"],
           "expected": manifest["expected"]}
    pattern = grep_pattern(GREP8)
    out_json = os.path.join(workdir, "out.json")
    out_html = os.path.join(workdir, "report.html")
    try:
        warm(tree)
        runs: dict[str, list[dict]] = {"grep": [], "json": [], "html": []} if html else {"grep": [], "json": []}
        for _ in range(repeats):
            with tempfile.TemporaryFile() as out:
                runs["grep"].append(run_measured(["grep", "-c", "-E", pattern, "-r", tree], stdout=out))
            for fmt, cmd in (("json", ["--format", "json", "-o", out_json]), ("html", ["-o", out_html])):
                if fmt not in runs:
                    continue
                a = run_measured([sys.executable, "-m", "postmortem.cli", "analyze", tree, *cmd, "--quiet"], cwd=code)
                if a["rc"] != 0:
                    raise RuntimeError(f"analyze failed (rc {a['rc']}): {a['stderr']}")
                runs[fmt].append(a)
        with open(out_json, encoding="utf-8") as fh:
            text = fh.read()
        v = json.loads(text).get("verdict") or {}
        exp = manifest["expected"]
        for k, rs in runs.items():
            row[k + "_s"] = _stats([r["wall_s"] for r in rs])
            row[k + "_rss_mb"] = max(r["max_rss_mb"] for r in rs)
            row[k + "_tree_rss_mb"] = max(r["tree_rss_mb"] for r in rs)
        ratios = {k: sorted(a["wall_s"] / g["wall_s"] for a, g in zip(runs[k], runs["grep"]))
                  for k in ("json", "html") if k in runs}
        for k, rs in ratios.items():
            row[k + "_ratio"] = _stats(rs)
        row.update({"json_bytes": len(text.encode()),
                    "verdict": {k: v.get(k) for k in ("category", "phase", "culprit_ranks", "confidence")},
                    "planted_found": v.get("category") == exp["category"] and v.get("culprit_ranks") == exp["culprit_ranks"]})
    finally:
        if not keep:
            shutil.rmtree(tree, ignore_errors=True)
    return row


def mix_table(rows: list[dict]) -> str:
    head = ("| mix | ranks | size | files | grep s (min / med) | JSON s | ÷ grep (min / med) | HTML s | ÷ grep (min / med) "
            "| peak RSS MB JSON / HTML (largest process) | whole tree MB | JSON bytes | verdict |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
    out = []
    for r in rows:
        v = r["verdict"]
        verdict = (f"{v['category']}/{v['phase']} {v['culprit_ranks']} {v['confidence']}"
                   + (" ✓" if r["planted_found"] else " ✗")
                   + ("" if "verdict_unchanged" not in r else " same as before" if r["verdict_unchanged"]
                      else " CHANGED"))
        html = (f"{r['html_s'][1]:.2f} | {r['html_ratio'][0]:.1f}x / {r['html_ratio'][1]:.1f}x"
                if "html_s" in r else "- | -")
        out.append(f"| {r['mix']} | {r['ranks']} | {r['bytes'] / 2**30:.2f} GiB | {r['files']} | "
                   f"{r['grep_s'][0]:.2f} / {r['grep_s'][1]:.2f} | {r['json_s'][1]:.2f} | "
                   f"{r['json_ratio'][0]:.1f}x / {r['json_ratio'][1]:.1f}x | {html} | "
                   f"{r['json_rss_mb']:.0f} / {r.get('html_rss_mb', 0):.0f} | {r['json_tree_rss_mb']:.0f} | "
                   f"{r['json_bytes']} | {verdict} |")
    by = {r["spec"]: r for r in rows}
    small, big = by.get("realistic:512:1GiB"), by.get("realistic:512:4GiB")
    tail = ""
    if small and big:
        tail = (f"\nRSS growth from 1 to 4 GiB (realistic, 512 ranks, largest process): {small['json_rss_mb']:.0f} → "
                f"{big['json_rss_mb']:.0f} MB ({100 * (big['json_rss_mb'] / small['json_rss_mb'] - 1):+.0f} %)\n")
    return head + "\n".join(out) + "\n" + tail


def table(rows: list[dict]) -> str:
    head = ("| ranks | size | files | grep s | Python line loop s | analyze s | ratio | CPU s grep / analyze | peak RSS "
            "MB (largest process / whole tree) | verdict | grep s, wide set (ratio) |\n"
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n")
    out = []
    for r in rows:
        v = r.get("verdict", {})
        verdict = (f"{v.get('category')}/{v.get('phase')} ranks {v.get('culprit_ranks')} step {v.get('step')}"
                   + (" ✓" if r.get("planted_found") else " ✗"))
        out.append(f"| {r['ranks']} | {r['bytes'] / 2**30:.2f} GiB | {r['files']} | {r['grep_s']:.2f} | "
                   f"{r['py_lines_s']:.2f} | "
                   f"{r['analyze_s']:.2f} | {r['ratio']:.1f}x | {r['grep_cpu_s']:.2f} / {r['analyze_cpu_s']:.2f} | "
                   f"{r['max_rss_mb']:.0f} / {r['tree_rss_mb']:.0f} | "
                   f"{verdict} | "
                   + (f"{r['grep_wide_s']:.2f} ({r['analyze_s'] / r['grep_wide_s']:.1f}x) |" if r.get("grep_wide_s")
                      else "- |"))
    return head + "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="*", default=DEFAULT_ROWS, help="RANKS:SIZE pairs (default: the scaling table)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2, help="runs of each contender per tree (best is reported)")
    ap.add_argument("--workdir", default=None, help="where trees are built (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the trees")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--mix", nargs="*", default=None, metavar="MIX:RANKS:SIZE",
                    help="line-mix trees (mix_tree.py) instead of the scaling table; no value: " + " ".join(DEFAULT_MIX_ROWS))
    ap.add_argument("--verdicts", help="with --mix: a JSON file of verdicts per tree; compared when it exists, "
                                       "written when it does not")
    ap.add_argument("--code", help="with --mix: run analyze from this source checkout (e.g. the code before a change)")
    ap.add_argument("--ranks", nargs="*", default=None, metavar="MIX:RANKS:SIZE",
                    help="the rank-count table (mix trees, worst row first, RSS fitted as base + per rank); "
                         "no value: " + " ".join(DEFAULT_RANK_ROWS))
    ap.add_argument("--no-html", action="store_true", help="with --mix/--ranks: skip the -o report.html runs")
    args = ap.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="pm-bench-")
    os.makedirs(workdir, exist_ok=True)
    if args.ranks is not None:
        args.mix = args.ranks or DEFAULT_RANK_ROWS
        return main_mix(args, workdir, by_ranks=True)
    if args.mix is not None:
        return main_mix(args, workdir)
    pattern = grep_pattern(trigger_set())
    wide_pattern = grep_pattern(wide_trigger_set())
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['mem_gib']} GiB, Python {info['python']}, "
          f"{info['grep']}, load {info['load_before']}", flush=True)
    rows = []
    for spec in args.rows:
        ranks, size = spec.split(":")
        need = make_tree.parse_size(size) * 1.1
        free = shutil.disk_usage(workdir).free
        if free < need:
            print(f"skip {spec}: {free >> 30} GiB free in {workdir}", flush=True)
            continue
        row = measure_row(int(ranks), make_tree.parse_size(size), args.seed, workdir, pattern, args.repeats,
                          args.keep, wide_pattern)
        row["load_after"] = os.getloadavg()[0]
        rows.append(row)
        print(f"{spec}: grep {row['grep_s']:.2f}s analyze {row['analyze_s']:.2f}s ratio {row['ratio']:.1f}x "
              f"rss {row['max_rss_mb']:.0f}/{row['tree_rss_mb']:.0f} MB verdict {row['verdict']}", flush=True)
    print()
    print(table(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "rows": rows, "trigger_count": len(trigger_set()),
                       "wide_trigger_count": len(wide_trigger_set())}, fh, indent=2)
    if not args.workdir and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def rss_fit(rows: list[dict]) -> tuple[float, float]:
    """(base MB, KB per rank): least squares of the largest process's peak RSS (JSON run) over the rank count."""
    xs = [r["ranks"] for r in rows]
    ys = [r["json_rss_mb"] for r in rows]
    n = len(xs)
    if n < 2 or len(set(xs)) < 2:
        return (ys[0] if ys else 0.0), 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope * 1024


def rank_table(rows: list[dict]) -> str:
    """The rank-count table, worst ratio to grep first, and the RSS fit."""
    head = ("| ranks × per-rank size | files | grep s (min / med) | JSON s (min / med) | JSON ÷ grep (min / med) "
            "| HTML − JSON s (med) | peak RSS MB, largest process (JSON / HTML) | whole tree MB | verdict |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
    out = []
    for r in sorted(rows, key=lambda r: -r["json_ratio"][1]):
        v = r["verdict"]
        verdict = f"{v['category']}/{v['phase']} {v['culprit_ranks']}" + (" ✓" if r["planted_found"] else " ✗")
        per = r["bytes"] / r["ranks"]
        html = f"{r['html_s'][1] - r['json_s'][1]:+.2f}" if "html_s" in r else "-"
        out.append(f"| {r['ranks']:,} × {per / 1024:,.0f} KiB | {r['files']:,} | {r['grep_s'][0]:.2f} / {r['grep_s'][1]:.2f} | "
                   f"{r['json_s'][0]:.2f} / {r['json_s'][1]:.2f} | {r['json_ratio'][0]:.1f}x / {r['json_ratio'][1]:.1f}x | "
                   f"{html} | {r['json_rss_mb']:.0f} / {r.get('html_rss_mb', 0):.0f} | {r['json_tree_rss_mb']:.0f} | "
                   f"{verdict} |")
    base, per_rank = rss_fit(rows)
    return (head + "\n".join(out) + f"\n\nPeak RSS (largest process, JSON) fitted over the rows: {base:.0f} MB + "
            f"{per_rank:.1f} KB per rank\n")


def main_mix(args, workdir: str, by_ranks: bool = False) -> int:
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['mem_gib']} GiB, Python {info['python']}, "
          f"{info['grep']}, load {info['load_before']}; grep -c -E of {len(GREP8)} triggers", flush=True)
    before = None
    if args.verdicts and os.path.exists(args.verdicts):
        with open(args.verdicts) as fh:
            before = json.load(fh)
    rows = []
    for spec in args.mix or DEFAULT_MIX_ROWS:
        size = make_tree.parse_size(spec.split(":")[2])
        if shutil.disk_usage(workdir).free < size * 1.1:
            print(f"skip {spec}: not enough free space in {workdir}", flush=True)
            continue
        try:
            row = measure_mix_row(spec, args.seed, workdir, args.repeats, args.keep, args.code, not args.no_html)
        except Exception as exc:  # noqa: BLE001 - one failing tree must not lose the others' numbers
            print(f"{spec}: failed: {exc}", flush=True)
            continue
        if before is not None and spec in before:
            row["verdict_unchanged"] = before[spec] == row["verdict"]
        rows.append(row)
        print(f"{spec}: grep {row['grep_s'][1]:.2f}s json {row['json_s'][1]:.2f}s ({row['json_ratio'][1]:.1f}x) "
              + (f"html {row['html_s'][1]:.2f}s ({row['html_ratio'][1]:.1f}x) " if "html_s" in row else "")
              + f"rss {row['json_rss_mb']:.0f}/{row.get('html_rss_mb', 0):.0f} MB json {row['json_bytes']} B "
              f"verdict {row['verdict']}"
              + ("" if "verdict_unchanged" not in row else f" unchanged={row['verdict_unchanged']}"), flush=True)
    print()
    print(rank_table(rows) if by_ranks else mix_table(rows))
    if args.verdicts and before is None:
        with open(args.verdicts, "w") as fh:
            json.dump({r["spec"]: r["verdict"] for r in rows}, fh, indent=1)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "rows": rows, "grep_triggers": GREP8}, fh, indent=2)
    if not args.workdir and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if all(r["planted_found"] and r.get("verdict_unchanged", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
