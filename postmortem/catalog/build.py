"""Builds the message catalog from library sources (run by hand, never in CI; see postmortem/catalog/README.md).

    python -m postmortem.catalog.build extract --manifest postmortem/catalog/manifest.json --root SRC
        --mirrors /work/.mirror --out DIR [--only LIB ...]
        every string of every release of the manifest, versions merged: DIR/LIB.jsonl.gz (and the strings of
        the binaries that verify joins: DIR/blobs/LIB@VERSION.txt.gz)
    python -m postmortem.catalog.build strings --extract DIR
        writes postmortem/catalog/strings.jsonl.gz: every extracted string with where it is raised (committed)
    python -m postmortem.catalog.build assemble --extract DIR [--blob DIR/blobs/...]
        writes postmortem/catalog/families.json and tests/catalog_data/extract.jsonl.gz (the strings the
        families cover plus a bounded sample of the rest); `--extract tests/catalog_data/extract.jsonl.gz`
        re-assembles from the saved extract after a change to curated.json.
    python -m postmortem.catalog.build index
        writes postmortem/catalog/derived.json.gz: the derived labels the analyzer matches (derive.py)
"""
from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import re
import sys

from postmortem.catalog import extract as ex
from postmortem.catalog import extract_c as exc
from postmortem.catalog import extract_go as exgo
from postmortem.catalog import sources as src
from postmortem.catalog.records import load_extract, version_key, write_jsonl_gz

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FAMILIES_JSON = os.path.join(HERE, "families.json")
STRINGS = os.path.join(HERE, "strings.jsonl.gz")
SAVED_EXTRACT = os.path.join(REPO, "tests", "catalog_data", "extract.jsonl.gz")
MAX_FILES = 3   # files named per string (a string raised in many files keeps the count)


class Collector:
    """Messages and exception classes merged across files and releases: one record per (library, kind, level,
    exception class, text) with the files that raise it and the releases that contain it."""

    def __init__(self):
        self.msgs: dict[tuple, dict] = {}
        self.classes: dict[tuple, dict] = {}

    def add(self, version: str, msgs: list[ex.Msg], classes: list[ex.ExcClass] = ()) -> None:
        for m in msgs:
            k = (m.lib, m.kind, m.level, m.exc, m.text)
            rec = self.msgs.get(k)
            if rec is None:
                rec = self.msgs[k] = {"lib": m.lib, "file": m.file, "kind": m.kind, "level": m.level,
                                      "exc": m.exc, "text": m.text, "versions": [], "files": [m.file]}
            if m.file not in rec["files"]:
                rec["files"].append(m.file)
            if version not in rec["versions"]:
                rec["versions"].append(version)
        for c in classes:
            k = (c.lib, c.name, tuple(c.bases))
            rec = self.classes.setdefault(k, {"lib": c.lib, "file": c.file, "name": c.name, "bases": c.bases,
                                              "versions": []})
            if version not in rec["versions"]:
                rec["versions"].append(version)

    def files(self, lib: str, version: str, files) -> int:
        """Reads (path, text) pairs with the reader their path calls for; the number of files read."""
        n = 0
        for path, text in files:
            path = _norm_file(lib, path)
            reader = src.reader_of(lib, path) or src.reader_of(lib, _raw_path(lib, path)) or "python"
            if reader == "python":
                msgs, classes = ex.python_messages(lib, path, text)
                self.add(version, msgs, classes)
            elif reader == "c":
                if lib in ("nccl", "rccl"):
                    self.add(version, exc.nccl_messages(path, text, lib))
                elif lib == "gloo":
                    self.add(version, exc.gloo_messages(path, text))
                else:
                    self.add(version, exc.c_messages(src.C_DIALECT.get(lib, lib), path, text))
            elif reader == "help":
                self.add(version, exc.help_messages(lib, path, text))
            elif reader == "go":
                self.add(version, exgo.go_messages(lib, path, text))
            n += 1
        return n

    def records(self) -> list[dict]:
        out = []
        for rec in dedupe_assigned(sorted(self.msgs.values(), key=lambda r: (r["lib"], r["file"], r["text"],
                                                                             r["kind"]))):
            rec["versions"].sort(key=version_key)
            rec["nfiles"] = len(rec["files"])
            rec["files"] = sorted(rec["files"])[:MAX_FILES]
            rec["lib"] = rec["lib"]
            out.append(rec)
        for rec in sorted(self.classes.values(), key=lambda r: (r["lib"], r["file"], r["name"])):
            rec["versions"].sort(key=version_key)
            out.append({"class": True, **rec})
        return out


def dedupe_assigned(records: list[dict]) -> list[dict]:
    """Drops a message found assigned to a variable (`msg = f"..."`) when the same library also raises, logs or
    prints that text: the assignment was only the way to it, and the raise says more (its class, its level)."""
    used = {(r["lib"], r["text"]) for r in records if r["kind"] != "assign"}
    return [r for r in records if r["kind"] != "assign" or (r["lib"], r["text"]) not in used]


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


def _raw_path(lib: str, path: str) -> str:
    """The in-scope form of a normalised path (for the reader choice)."""
    if lib == "lightning":
        return "src/lightning/" + path
    if lib == "accelerate":
        return "src/" + path
    return path


def _wheel_version(path: str) -> str:
    return re.match(r"[^-]+-([^-]+)-", os.path.basename(path)).group(1)


def _extract_source(col: Collector, s: dict, root: str, mirrors: str, blobs: str) -> None:
    lib, kind = s["lib"], s["kind"]
    if kind == "torch":
        for version in s["releases"]:
            d = os.path.join(root, s["dir"], version)
            if not os.path.isdir(d):
                print(f"torch {version}: MISSING {d}", file=sys.stderr)
                continue
            n = col.files("torch", version, src.torch_tree_files(d))
            dump = []
            for lib_file, lines in src.torch_strings(d):
                col.add(version, exc.cstring_messages("torch", lib_file, lines))
                dump.extend(lines)
            _write_blob(blobs, "torch", version, "".join(dump))
            print(f"torch {version}: {n} python files", file=sys.stderr)
    elif kind == "git":
        git_dir = os.path.join(mirrors, s["repo"], "repo")
        for rev in s["revs"]:
            rev, _, label = rev.partition(":")
            n = col.files(lib, label or rev, src.git_files(git_dir, rev, lib))
            print(f"{lib} {label or rev}: {n} files", file=sys.stderr)
    elif kind == "wheel":
        for path in sorted(glob.glob(os.path.join(root, s["glob"]))):
            version = _wheel_version(path)
            n = col.files(lib, version, src.wheel_files(path, lib))
            if s.get("binaries"):
                keys = re.compile(s["keys"]) if s.get("keys") else None
                dump = []
                for member, data in src.wheel_binaries(path, s["binaries"]):
                    lines = src.strings_of(data)
                    col.add(version, exc.cstring_messages(lib, os.path.basename(member), lines, keys))
                    dump.extend(lines)
                _write_blob(blobs, lib, version, "\n".join(dump))
            print(f"{lib} {version}: {n} files", file=sys.stderr)
    elif kind == "tarball":
        for path in sorted(glob.glob(os.path.join(root, s["glob"]))):
            n = col.files(lib, s["version"], src.tarball_files(path, lib))
            print(f"{lib} {s['version']}: {n} files", file=sys.stderr)
    elif kind == "stdlib":
        n = col.files(lib, s["version"], src.stdlib_files(s["path"]))
        print(f"{lib} {s['version']}: {n} files", file=sys.stderr)


def _write_blob(blobs: str, lib: str, version: str, text: str) -> None:
    os.makedirs(blobs, exist_ok=True)
    with gzip.open(os.path.join(blobs, f"{lib}@{version}.txt.gz"), "wt", encoding="utf-8", compresslevel=3) as fh:
        fh.write(text)


def run_extract(args) -> None:
    with open(args.manifest, encoding="utf-8") as fh:
        manifest = json.load(fh)["sources"]
    os.makedirs(args.out, exist_ok=True)
    libs = sorted({s["lib"] for s in manifest if not args.only or s["lib"] in args.only})
    for lib in libs:
        col = Collector()
        for s in manifest:
            if s["lib"] == lib:
                _extract_source(col, s, args.root, args.mirrors, os.path.join(args.out, "blobs"))
        recs = col.records()
        if lib == "torch":
            recs = exc.drop_toolchain_only(recs)
        write_jsonl_gz(os.path.join(args.out, f"{lib}.jsonl.gz"), recs)
        print(f"{lib}: {len(col.msgs)} strings, {len(col.classes)} classes", file=sys.stderr)


# What the committed strings file keeps of a record (where it is raised, in which releases).
STRING_FIELDS = ("lib", "file", "nfiles", "kind", "level", "exc", "text", "versions")


def run_strings(args) -> None:
    msgs, _classes = load_extract(args.extract)
    recs = [{k: m[k] for k in STRING_FIELDS if k in m} for m in dedupe_assigned(msgs) if m["kind"] != "join"]
    recs.sort(key=lambda r: (r["lib"], r["file"], r["text"], r["kind"]))
    write_jsonl_gz(args.out, recs)
    print(f"{len(recs)} strings -> {args.out} ({os.path.getsize(args.out) >> 10} KiB)", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m postmortem.catalog.build")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract")
    e.add_argument("--manifest", default=os.path.join(HERE, "manifest.json"))
    e.add_argument("--root", required=True, help="downloaded sources: torch/V, pypi/*.whl, k8s/*.tar.gz")
    e.add_argument("--mirrors", default="/work/.mirror", help="bare git mirrors: OWNER+NAME/repo")
    e.add_argument("--only", action="append", help="only this library (repeatable)")
    e.add_argument("--out", required=True, help="directory of per-library extract files")
    s = sub.add_parser("strings")
    s.add_argument("--extract", required=True)
    s.add_argument("--out", default=STRINGS)
    a = sub.add_parser("assemble")
    a.add_argument("--extract", required=True)
    a.add_argument("--torch", action="append", help="unpacked torch release dir: its strings verify the joins")
    a.add_argument("--blob", action="append", help="LIB@VERSION.txt.gz strings dump that verifies joins")
    a.add_argument("--families-out", default=FAMILIES_JSON)
    a.add_argument("--extract-out", default=SAVED_EXTRACT)
    i = sub.add_parser("index")
    i.add_argument("--strings", default=STRINGS)
    args = p.parse_args(argv)
    if args.cmd == "extract":
        run_extract(args)
    elif args.cmd == "strings":
        run_strings(args)
    elif args.cmd == "index":
        from postmortem.catalog import index
        index.run(args)
    else:
        from postmortem.catalog import assemble
        assemble.run(args)


if __name__ == "__main__":
    main()
