"""Nothing lost: every input file appears in `sources` once, with its bytes and the lines read — checked against
`wc -l` (and `gzip -dc | wc -l`) on the bundled samples, the test fixtures and, where present, the shared captures."""
from __future__ import annotations

import gzip
import os
import shutil
import subprocess

import pytest

import postmortem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREES = [os.path.join(ROOT, "samples"), os.path.join(ROOT, "tests", "fixtures"),
         "/work/shared/captured", "/work/shared/corpus"]
SKIPPED_KINDS = ("binary", "json")  # listed with a reason, not read


def _wc_lines(paths: list[str]) -> dict[str, int]:
    """Physical lines per file as `wc -l` counts them, plus one for a last line without a newline."""
    out: dict[str, int] = {}
    for path in paths:
        if _is_gzip(path):
            proc = subprocess.run(f"gzip -dc {_q(path)} | wc -l", shell=True, capture_output=True, check=True)
            with gzip.open(path, "rb") as fh:
                data_tail = _tail(fh)
        else:
            proc = subprocess.run(["wc", "-l", path], capture_output=True, check=True)
            with open(path, "rb") as fh:
                data_tail = _tail(fh)
        n = int(proc.stdout.split()[0])
        out[path] = n + (1 if data_tail not in (b"", b"\n") else 0)
    return out


def _tail(fh) -> bytes:
    last = b""
    while True:
        chunk = fh.read(1 << 20)
        if not chunk:
            return last
        last = chunk[-1:]


def _q(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def _files(tree: str) -> list[str]:
    out = []
    for dirpath, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if d not in (".git", "__pycache__")]
        out.extend(os.path.join(dirpath, f) for f in files)
    return sorted(out)


@pytest.mark.skipif(shutil.which("wc") is None, reason="needs wc")
@pytest.mark.parametrize("tree", [t for t in TREES if os.path.isdir(t)])
def test_every_file_is_accounted_for_with_bytes_and_lines(tree):
    a = postmortem.analyze(tree, jobs=1)
    df = a.tables.sources
    by_path = {s.path: (s, row) for s, (_, row) in zip(a.sources, df.iterrows())}
    files = _files(tree)
    missing = [f for f in files if f not in by_path]
    assert not missing, f"files not in sources: {missing[:5]}"
    assert len(df) == len(files) == len(set(df["source"]))
    readable = [f for f in files if by_path[f][0].problem is None and by_path[f][0].kind not in SKIPPED_KINDS]
    wc = _wc_lines(readable)
    wrong = []
    for f in files:
        src, row = by_path[f]
        if int(row["bytes"]) != os.path.getsize(f):
            wrong.append(f"{src.source}: bytes {row['bytes']} != {os.path.getsize(f)}")
        if f in wc and int(row["lines"]) != wc[f]:
            wrong.append(f"{src.source} ({src.kind}): lines {row['lines']} != wc -l {wc[f]}")
    assert not wrong, "\n".join(wrong[:20])
    assert len(readable) > 0


def test_a_gzip_and_a_file_without_final_newline_are_counted_like_wc(tmp_path):
    (tmp_path / "rank0.log").write_text("a\nb\nc")  # wc -l says 2; three lines were read
    (tmp_path / "rank1.log.gz").write_bytes(gzip.compress(b"x\r\ny\n\nz\n", mtime=0))
    (tmp_path / "empty.log").write_bytes(b"")
    a = postmortem.analyze(str(tmp_path), jobs=1)
    lines = dict(zip(a.tables.sources["source"], a.tables.sources["lines"]))
    assert lines == {"empty.log": 0, "rank0.log": 3, "rank1.log.gz": 4}
    wc = _wc_lines([str(tmp_path / n) for n in ("rank0.log", "rank1.log.gz", "empty.log")])
    assert wc == {str(tmp_path / "rank0.log"): 3, str(tmp_path / "rank1.log.gz"): 4, str(tmp_path / "empty.log"): 0}
