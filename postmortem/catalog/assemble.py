"""Assembles families.json from the curated families and an extract of library messages (build time only).

Also used by the tests: `fill` turns a template into a printable sample, `select` finds a family's evidence."""
from __future__ import annotations

import gzip
import json
import os
import random
import re
import sys
from collections import defaultdict

from postmortem.catalog import curated
from postmortem.catalog.extract import PH_CLOSE, PH_OPEN, PLACEHOLDER_RE, ph
from postmortem.catalog.records import load_extract, version_key

SCHEMA = 1
SAMPLE_REST = 1500
NUMERIC_HINT = re.compile(
    r"(?i)%[diouxXzl]|rank|size|count|num|world|timeout|seq|step|\bid\b|_id|port|pid|len|idx|index|worker|iter|"
    r"epoch|code|\bms\b|_ms|seconds|secs|bytes|nbytes|\bn\b|\bi\b|time|cur_|scale|overflow|window|hysteresis|"
    r"total|joined|dev|signal|exitcode|attempt|retr|limit|version")
PATH_HINT = re.compile(r"(?i)path|file|dir|ckpt|checkpoint|folder|url|load_from|resume|tag|save")
FLOAT_HINT = re.compile(r"(?i)%[fgeE]|scale|norm|loss|lr\b|ratio|frac|threshold")


def _smart(hint: str) -> str:
    if hint == "|":  # a boundary between C++ string fragments: nothing is printed there
        return ""
    if hint.startswith("FILE "):  # where a C++ macro expands __FILE__:__LINE__ (gloo prints the build path)
        return "../third_party/gloo/" + hint[5:]
    if FLOAT_HINT.search(hint):
        return "65536.0"
    if NUMERIC_HINT.search(hint):
        return "7"
    if PATH_HINT.search(hint):
        return "/ckpt/run/checkpoint-500/pytorch_model.bin"
    if re.search(r"(?i)addr|host|ip\b", hint):
        return "10.0.0.7"
    return "foo"


FILLERS = {
    "smart": _smart,
    "number": lambda h: "" if h == "|" else "7",
    "word": lambda h: "" if h == "|" else "foo",
    "path": lambda h: "" if h == "|" else "/ckpt/run/checkpoint-500/pytorch_model.bin",
}
# Coverage (which families match a string whatever fills it) uses values that say nothing by themselves: a path
# sample would make every "file not found" string look like a checkpoint message.
NEUTRAL = {"neutral": lambda h: "" if h == "|" else "7" if NUMERIC_HINT.search(h) else "foo"}


def fill(text: str, strategy: str = "smart") -> str:
    """A template with its placeholders replaced by sample values."""
    f = FILLERS.get(strategy) or NEUTRAL[strategy]
    return PLACEHOLDER_RE.sub(lambda m: f(m.group(1)), text)


def fills(text: str, value: str | None = None) -> list[str]:
    """The template filled by every strategy (a pattern must match at least one); `value`: a sample the curator
    gave for what the placeholders hold (a CUDA error string, a peer address), tried first."""
    out = []
    if value is not None:
        out.append(PLACEHOLDER_RE.sub(lambda m: "" if m.group(1) == "|" else value, text))
    for s in FILLERS:
        t = fill(text, s)
        if t not in out:
            out.append(t)
    return out


def join_template(j: str) -> str:
    """A curated join (`{}` values, `{|}` boundaries between fragments) as an extract template."""
    return j.replace("{|}", ph("|")).replace("{}", ph("{}"))


def join_pieces(template: str) -> list[str]:
    """The literal pieces of a template worth looking up in a binary's strings (>= 4 characters)."""
    return [p.strip() for p in PLACEHOLDER_RE.split(template)[::2] if len(p.strip()) >= 4]


def compile_family(f: dict) -> re.Pattern:
    return re.compile(f["pattern"], re.I if "i" in f.get("flags", "") else 0)


def select(records: list[dict], selectors: list[list[str]]) -> list[tuple[dict, str | None]]:
    """(record, sample value) for the records of the given libraries whose template matches one of the selectors'
    regexes (a selector is [lib, regex] or [lib, regex, sample value for the placeholders])."""
    out = []
    by_lib = defaultdict(list)
    for sel in selectors:
        by_lib[sel[0]].append((re.compile(sel[1]), sel[2] if len(sel) > 2 else None))
    for r in records:
        for rx, value in by_lib.get(r["lib"], ()):
            if rx.search(r["text"]):
                out.append((r, value))
                break
    return out


def matches(pattern: re.Pattern, text: str, value: str | None = None) -> bool:
    """Whether some filling of the template matches."""
    return any(pattern.search(t) for t in fills(text, value))


def verify_joins(families: list[dict], sources: dict[str, dict[str, str]], saved: list[dict]) -> list[dict]:
    """Join records (kind 'join') with the releases whose strings hold every piece. `sources`: lib -> version ->
    strings text; libraries absent there keep the releases of the saved extract."""
    saved_by = {(r["lib"], r["text"]): r for r in saved if r["kind"] == "join"}
    out = []
    for f in families:
        for sel in f["joins"]:
            lib, j = sel[0], sel[1]
            t = join_template(j)
            missing = []
            if lib in sources:
                pieces = join_pieces(t)
                versions = [v for v, text in sources[lib].items() if all(p in text for p in pieces)]
                if not versions:
                    missing = sorted({p for p in pieces for text in sources[lib].values() if p not in text})
            else:
                versions = saved_by.get((lib, t), {}).get("versions", [])
            out.append({"lib": lib, "file": "(strings)", "kind": "join", "level": "", "exc": "", "text": t,
                        "versions": versions, "family": f["id"], "value": sel[2] if len(sel) > 2 else None,
                        "missing": missing})
    return out


MEMORY_BASES = {"MemoryError"}


def exception_classes(classes: list[dict]) -> dict[str, dict]:
    """Exception classes of the extract with their bases and the builtin exceptions they derive from."""
    bases_of: dict[str, set[str]] = defaultdict(set)
    where: dict[str, set[str]] = defaultdict(set)
    for c in classes:
        for b in c["bases"]:
            bases_of[c["name"]].add(b.split(".")[-1])
        where[c["name"]].add(f'{c["lib"]}:{c["file"]}')
    builtin = {n for n in dir(__builtins__ if isinstance(__builtins__, dict) else __builtins__)} \
        if False else set(dir(__import__("builtins")))
    builtin_exc = {n for n in builtin if isinstance(getattr(__import__("builtins"), n), type)
                   and issubclass(getattr(__import__("builtins"), n), BaseException)}

    def ancestors(name: str, seen=None) -> set[str]:
        seen = seen or set()
        out = set()
        for b in bases_of.get(name, ()):
            if b in seen:
                continue
            seen.add(b)
            out.add(b)
            out |= ancestors(b, seen)
        return out
    out = {}
    for name in sorted(bases_of):
        anc = ancestors(name)
        roots = sorted(a for a in anc if a in builtin_exc)
        if not roots:
            continue
        out[name] = {"bases": sorted(bases_of[name]), "builtin": roots, "defined_in": sorted(where[name])[:4]}
    return out


def assemble(msgs: list[dict], classes: list[dict], joins_src: dict[str, dict[str, str]], log=print) -> tuple[
        dict, list[dict]]:
    """(families.json content, records to save)."""
    fams = curated.FAMILIES
    joins = verify_joins(fams, joins_src, msgs)
    msgs = [m for m in msgs if m["kind"] != "join"]
    compiled = {f["id"]: compile_family(f) for f in fams}
    problems = []
    # coverage of every extracted message by every family (a message may be matched by several)
    covered: dict[int, list[str]] = {}
    for i, r in enumerate(msgs):
        texts = [fill(r["text"], "neutral")]
        hit = [fid for fid, rx in compiled.items() if any(rx.search(t) for t in texts)]
        if hit:
            covered[i] = hit
    out_fams = []
    for f in fams:
        rx = compiled[f["id"]]
        ev_sel = select(msgs, f["evidence"])
        ev = [r for r, _v in ev_sel]
        parts = [r for r, _v in select(msgs, f["parts"])]
        fj = [j for j in joins if j["family"] == f["id"]]
        for r, value in ev_sel:
            if not matches(rx, r["text"], value):
                problems.append(f'{f["id"]}: evidence not matched: {r["lib"]} {r["file"]}: {r["text"][:160]!r}')
        for j in fj:
            if not j["versions"]:
                problems.append(f'{f["id"]}: join not found in any release: {j["lib"]}: {j["text"][:120]!r} '
                                f'(pieces missing: {j.get("missing")})')
            elif not matches(rx, j["text"], j.get("value")):
                problems.append(f'{f["id"]}: join not matched: {j["text"][:120]!r}')
        join_texts = [fill(j["text"], "word") for j in fj]
        for p in parts:
            lit = PLACEHOLDER_RE.sub("", p["text"]).strip()
            if not any(lit in jt for jt in join_texts) and not matches(rx, p["text"]):
                problems.append(f'{f["id"]}: part in no join: {p["text"][:120]!r}')
        if not (ev or parts or fj) and not f["external"]:
            problems.append(f'{f["id"]}: no evidence')
        libs: dict[str, set[str]] = defaultdict(set)
        counts: dict[str, int] = defaultdict(int)
        for r in ev + parts + [j for j in fj if j["versions"]] + [msgs[i] for i, h in covered.items()
                                                                   if f["id"] in h]:
            libs[r["lib"]].update(r["versions"])
        seen = set()
        for r in ev + parts + [j for j in fj if j["versions"]]:
            k = (r["lib"], r["file"], r["text"])
            if k not in seen:
                seen.add(k)
                counts[r["lib"]] += 1
        out_fams.append({
            "id": f["id"], "category": f["category"], "role": f["role"], "implies": f["implies"],
            "pattern": f["pattern"], "flags": f.get("flags", ""), "needs": f["needs"],
            "description": f["description"], "external": f["external"],
            "libraries": {lib: {"releases": sorted(v, key=version_key), "strings": counts.get(lib, 0)}
                          for lib, v in sorted(libs.items())},
        })
    for p in problems:
        log("PROBLEM " + p)
    # what to save: every covered or curated record, joins, and a bounded sample of the rest
    pos = {id(r): i for i, r in enumerate(msgs)}
    keep_idx = set(covered)
    for f in fams:
        for r, _v in select(msgs, f["evidence"]) + select(msgs, f["parts"]):
            i = pos[id(r)]
            keep_idx.add(i)
            if f["id"] not in covered.setdefault(i, []):  # built from it (a sample value, or a C++ fragment)
                covered[i].append(f["id"])
    rest = [i for i in range(len(msgs)) if i not in keep_idx]
    rng = random.Random(23)
    sample = set(rng.sample(rest, min(SAMPLE_REST, len(rest))))
    saved = [dict(msgs[i], family=covered.get(i, [])) for i in sorted(keep_idx | sample)] + \
        [{**{k: v for k, v in j.items() if k != "missing"}, "family": [j["family"]]} for j in joins]
    exc = exception_classes(classes)
    data = {
        "schema": SCHEMA,
        "families": out_fams,
        "exception_classes": exc,
        "memory_error_subclasses": sorted(n for n, c in exc.items() if "MemoryError" in c["builtin"]),
    }
    return data, saved, problems


def releases_of(msgs: list[dict]) -> dict[str, list[str]]:
    """lib -> releases seen in the extract."""
    out: dict[str, set[str]] = defaultdict(set)
    for m in msgs:
        if m["kind"] != "join":
            out[m["lib"]].update(m["versions"])
    return {k: sorted(v, key=version_key) for k, v in sorted(out.items())}


def run(args) -> None:
    from postmortem.catalog import sources as src
    msgs, classes = load_extract(args.extract)
    joins_src: dict[str, dict[str, str]] = {}
    for root in args.torch or []:
        v = os.path.basename(os.path.normpath(root))
        joins_src.setdefault("torch", {})[v] = "\n".join("".join(lines) for _lib, lines in src.torch_strings(root))
    for p in args.blob or []:
        name = os.path.basename(p).replace(".txt.gz", "")
        lib, _, v = name.partition("@")
        joins_src.setdefault(lib, {})[v] = src.blob_strings(p)
    data, saved, problems = assemble(msgs, classes, joins_src, log=lambda s: print(s, file=sys.stderr))
    data["releases"] = releases_of(msgs + [s for s in saved if s["kind"] == "join"])
    with open(args.families_out, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, ensure_ascii=False, sort_keys=False)
        fh.write("\n")
    os.makedirs(os.path.dirname(args.extract_out), exist_ok=True)
    if os.path.abspath(args.extract_out) != os.path.abspath(args.extract):
        with gzip.GzipFile(args.extract_out, "wb", mtime=0) as gz:
            for r in saved:
                gz.write((json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n").encode())
            for c in classes:
                if c["name"] in data["exception_classes"]:
                    gz.write((json.dumps({"class": True, **c}, ensure_ascii=False, sort_keys=True) + "\n").encode())
    print(f"{len(data['families'])} families, {len(saved)} strings saved, {len(problems)} problems",
          file=sys.stderr)
