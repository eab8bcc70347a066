"""Extract records on disk (build time and tests): reading an extract file and ordering release labels."""
from __future__ import annotations

import glob
import gzip
import json
import os
import re


def version_key(v: str):
    """Sort key of a release label: `v2.10.3-1` after `v2.7.8-1`, `core_v0.19.0` after `core_v0.5.0`."""
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"[.\-+_]", v.lstrip("v"))]


def load_extract(path: str) -> tuple[list[dict], list[dict]]:
    """(messages, classes) of an extract: a file of gzipped JSON lines (a class record has `"class": true`), or a
    directory of per-library files."""
    paths = sorted(glob.glob(os.path.join(path, "*.jsonl.gz"))) if os.path.isdir(path) else [path]
    msgs, classes = [], []
    for p in paths:
        with gzip.open(p, "rt", encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                (classes if rec.pop("class", False) else msgs).append(rec)
    return msgs, classes


def write_jsonl_gz(path: str, records) -> None:
    """Records as gzipped JSON lines, byte-identical for identical input (no timestamp in the gzip header)."""
    with gzip.GzipFile(path, "wb", mtime=0) as gz:
        for r in records:
            gz.write((json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n").encode())
