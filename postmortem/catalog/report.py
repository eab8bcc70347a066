"""Which cases of a corpus contain lines each family matches (a maintenance report, not used by the analyzer).

    python -m postmortem.catalog.report /work/shared/corpus [--markdown] [--lines]
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

from postmortem.catalog import families, families_of

MAX_BYTES = 64 << 20   # per file read for the report


def scan_case(case_dir: str) -> dict[str, list[tuple[str, int, str]]]:
    """family id -> [(file, line number, line)] for every text file under a case directory."""
    hits: dict[str, list[tuple[str, int, str]]] = defaultdict(list)
    for root, _dirs, files in os.walk(case_dir):
        for name in sorted(files):
            if name == "case.json" or name.endswith((".py", ".json", ".png", ".gz")):
                continue
            path = os.path.join(root, name)
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    data = fh.read(MAX_BYTES)
            except OSError:
                continue
            for n, line in enumerate(data.splitlines(), 1):
                for f in families_of(line):
                    hits[f.id].append((os.path.relpath(path, case_dir), n, line[:300]))
    return hits


def scan(corpus: str) -> dict[str, dict[str, list]]:
    """case name -> family id -> hits, for every case folder of a corpus."""
    out = {}
    for name in sorted(os.listdir(corpus)):
        d = os.path.join(corpus, name)
        if os.path.isdir(d):
            out[name] = scan_case(d)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m postmortem.catalog.report")
    p.add_argument("corpus")
    p.add_argument("--markdown", action="store_true", help="family -> cases table for the README")
    p.add_argument("--lines", action="store_true", help="print the first matching line per case and family")
    a = p.parse_args(argv)
    res = scan(a.corpus)
    by_family: dict[str, list[str]] = defaultdict(list)
    for case, hits in res.items():
        for fid in hits:
            by_family[fid].append(case)
    if a.markdown:
        print("| family | role | cases |")
        print("|---|---|---|")
        for f in families():
            cases = by_family.get(f.id, [])
            print(f"| `{f.id}` | {f.role} | {len(cases)}: {', '.join(cases) if cases else '-'} |")
        return
    for case, hits in res.items():
        print(f"{case}: {', '.join(sorted(hits)) or '-'}")
        if a.lines:
            for fid, lines in sorted(hits.items()):
                src, n, text = lines[0]
                print(f"    {fid} ({len(lines)}) {src}:{n}: {text[:200]}")
    print(f"\n{sum(1 for h in res.values() if h)}/{len(res)} cases with a family match", file=sys.stderr)


if __name__ == "__main__":
    main()
