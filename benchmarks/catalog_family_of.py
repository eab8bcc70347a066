"""Cost of postmortem.catalog.family_of per line: the Hyperscan and token prefilters against running every family's
pattern, on the real lines of a corpus and on a progress-bar line.

    python benchmarks/catalog_family_of.py /work/shared/corpus /work/shared/realruns
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from postmortem import catalog
from postmortem.catalog import _candidates


def lines_of(dirs: list[str]) -> list[str]:
    out = []
    for d in dirs:
        for p in sorted(Path(d).rglob("*")):
            if p.is_file() and p.suffix not in (".json", ".py", ".gz", ".png") and p.stat().st_size < 32 << 20:
                out += p.read_text(errors="replace").splitlines()
    return out


def main() -> None:
    lines = lines_of(sys.argv[1:] or ["/work/shared/corpus", "/work/shared/realruns"])
    fams = catalog.families()

    def first(line: str, fast: bool):
        line = line[:catalog.MAX_LINE]
        return next((fams[i] for i in _candidates(line, fast) if fams[i].regex.search(line)), None)

    def naive(line: str):
        return next((f for f in fams if f.regex.search(line)), None)
    bar = "Epoch 3: 100%|##########| 50/50 [00:03<00:00, 14.2it/s, loss=0.412, lr=1e-4, grad_norm=0.93]"
    sets = {"real lines": lines, "progress bar": [bar] * 3000}
    modes = {"hyperscan": lambda x: first(x, True), "tokens": lambda x: first(x, False), "naive": naive}
    res: dict[tuple[str, str], list[float]] = {}
    for _ in range(7):
        for name, ls in sets.items():
            for mode, fn in modes.items():
                t = time.perf_counter()
                for x in ls:
                    fn(x)
                res.setdefault((name, mode), []).append((time.perf_counter() - t) / len(ls) * 1e6)
    print(f"{len(lines)} real lines, {sum(1 for x in lines if catalog.family_of(x))} matching; hyperscan "
          f"{'on' if catalog._hyperscan() else 'off'}")
    for (name, mode), v in res.items():
        print(f"{name:13s} {mode:9s} min {min(v):7.2f} us/line   median {statistics.median(v):7.2f}")


if __name__ == "__main__":
    main()
