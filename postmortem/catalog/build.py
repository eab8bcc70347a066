"""Builds the message catalog from library sources (run by hand, never in CI; see postmortem/catalog/README.md).

    python -m postmortem.catalog.build extract --torch DIR ... --wheel LIB=FILE ... --git LIB=GITDIR@REV,REV ...
        --out FULL.jsonl.gz          every in-scope message of every release, versions merged
    python -m postmortem.catalog.build assemble --extract FULL.jsonl.gz
        writes postmortem/catalog/families.json and tests/catalog_data/extract.jsonl.gz (the strings the
        families cover plus a bounded sample of the rest); `--extract tests/catalog_data/extract.jsonl.gz`
        re-assembles from the saved extract after a change to curated.py.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import sys
from collections import defaultdict

from postmortem.catalog import extract as ex
from postmortem.catalog import sources as src
from postmortem.catalog.records import load_extract, version_key  # noqa: F401 - load_extract re-exported

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FAMILIES_JSON = os.path.join(HERE, "families.json")
SAVED_EXTRACT = os.path.join(REPO, "tests", "catalog_data", "extract.jsonl.gz")
SAMPLE_REST = 1500   # uncovered strings kept in the saved extract (the negative material of the tests)


class Collector:
    """Messages and exception classes merged across releases."""

    def __init__(self):
        self.msgs: dict[tuple, dict] = {}
        self.classes: dict[tuple, dict] = {}

    def add(self, version: str, msgs: list[ex.Msg], classes: list[ex.ExcClass] = ()) -> None:
        for m in msgs:
            rec = self.msgs.get(m.key())
            if rec is None:
                rec = self.msgs[m.key()] = {"lib": m.lib, "file": m.file, "kind": m.kind, "level": m.level,
                                            "exc": m.exc, "text": m.text, "versions": []}
            if version not in rec["versions"]:
                rec["versions"].append(version)
        for c in classes:
            k = (c.lib, c.file, c.name, tuple(c.bases))
            rec = self.classes.setdefault(k, {"lib": c.lib, "file": c.file, "name": c.name, "bases": c.bases,
                                              "versions": []})
            if version not in rec["versions"]:
                rec["versions"].append(version)

    def python(self, lib: str, version: str, files) -> int:
        n = 0
        for path, text in files:
            msgs, classes = ex.python_messages(lib, path, text)
            self.add(version, msgs, classes)
            n += 1
        return n


def _norm_file(lib: str, path: str) -> str:
    """One name for a file across layouts (Lightning's src/ and package renames)."""
    if lib == "lightning":
        path = re.sub(r"^src/", "", path)
        path = re.sub(r"^(?:pytorch_lightning|lightning/pytorch)/", "pytorch/", path)
        path = re.sub(r"^(?:lightning_fabric|lightning/fabric)/", "fabric/", path)
    if lib == "accelerate":
        path = re.sub(r"^src/", "", path)
    if lib == "numpy":
        path = path.replace("numpy/core/", "numpy/_core/")
    return path


def run_extract(args) -> None:
    col = Collector()
    for root in args.torch or []:
        version = os.path.basename(os.path.normpath(root))
        n = col.python("torch", version, torch_files(root))
        for lib_file, lines in src.torch_strings(root):
            col.add(version, ex.cstring_messages(lib_file, lines))
        print(f"torch {version}: {n} python files", file=sys.stderr)
    for spec in args.wheel or []:
        lib, path = spec.split("=", 1)
        version = re.match(r"[^-]+-([^-]+)-", os.path.basename(path)).group(1)
        files = ((_norm_file(lib, p), t) for p, t in src.wheel_files(path, lib))
        n = col.python(lib, version, files)
        print(f"{lib} {version}: {n} python files", file=sys.stderr)
    for root in args.stdlib or []:
        version = os.path.basename(os.path.normpath(root)).replace("python", "") or "stdlib"
        version = args.stdlib_version or version
        n = col.python("cpython", version, src.stdlib_files(root))
        print(f"cpython {version}: {n} python files", file=sys.stderr)
    for spec in args.git or []:
        lib, rest = spec.split("=", 1)
        git_dir, revs = rest.rsplit("@", 1)
        for rev in revs.split(","):
            rev, _, label = rev.partition(":")
            label = label or rev
            n = 0
            for path, text in src.git_files(git_dir, rev, lib):
                n += 1
                if lib == "nccl":
                    col.add(label, ex.nccl_messages(path, text))
                elif lib == "gloo":
                    col.add(label, ex.gloo_messages(path, text))
                else:
                    msgs, classes = ex.python_messages(lib, _norm_file(lib, path), text)
                    for m in msgs:
                        m.file = _norm_file(lib, m.file)
                    col.add(label, msgs, classes)
            print(f"{lib} {label}: {n} files", file=sys.stderr)
    with gzip.open(args.out, "wt", encoding="utf-8") as fh:
        for rec in sorted(col.msgs.values(), key=lambda r: (r["lib"], r["file"], r["text"], r["kind"])):
            rec["versions"].sort(key=version_key)
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        for rec in sorted(col.classes.values(), key=lambda r: (r["lib"], r["file"], r["name"])):
            rec["versions"].sort(key=version_key)
            fh.write(json.dumps({"class": True, **rec}, ensure_ascii=False) + "\n")
    print(f"{len(col.msgs)} messages, {len(col.classes)} classes -> {args.out}", file=sys.stderr)


def torch_files(root: str):
    return src.torch_tree_files(root)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m postmortem.catalog.build")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract")
    e.add_argument("--torch", action="append", help="unpacked torch release dir (py/ and strings/), name = version")
    e.add_argument("--wheel", action="append", help="LIB=path/to/wheel.whl")
    e.add_argument("--git", action="append", help="LIB=GITDIR@REV[:LABEL],REV...")
    e.add_argument("--stdlib", action="append", help="CPython standard library dir (pickle, zipfile, ...)")
    e.add_argument("--stdlib-version", help="label of the --stdlib release")
    e.add_argument("--out", required=True)
    a = sub.add_parser("assemble")
    a.add_argument("--extract", required=True)
    a.add_argument("--torch", action="append", help="unpacked torch release dir: its strings verify the joins")
    a.add_argument("--blob", action="append", help="LIB@VERSION.txt.gz strings dump that verifies joins")
    a.add_argument("--families-out", default=FAMILIES_JSON)
    a.add_argument("--extract-out", default=SAVED_EXTRACT)
    args = p.parse_args(argv)
    if args.cmd == "extract":
        run_extract(args)
    else:
        from postmortem.catalog import assemble
        assemble.run(args)


if __name__ == "__main__":
    main()
