"""Per library: how many strings were extracted, how many have a derived role and category, by what they were
derived, how many a curated family matches, and how many the analyzer matches (derived.json.gz).

    python -m postmortem.catalog coverage [--strings FILE] [--markdown]
"""
from __future__ import annotations

import argparse
import os
from collections import Counter, defaultdict

from postmortem.catalog import ROLES, ancestors, families_of
from postmortem.catalog.assemble import fill
from postmortem.catalog.derive import derive
from postmortem.catalog.index import informative, matchable
from postmortem.catalog.records import load_extract

STRINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "strings.jsonl.gz")
CATEGORIES = frozenset({"gpu_oom", "host_oom", "dataloader_failure", "barrier_skew", "straggler", "logging_blocking",
                        "checkpoint_corruption", "nccl_error", "gpu_hardware", "nan_inf", "ddp_usage_error",
                        "rank_crash", "collective_timeout", "job_stopped", "no_failure"})
# how a label was derived, from its rule id
BASES = ("words", "class", "subsystem", "level", "default")


def basis(rule: str) -> str:
    """words | class | subsystem | level | default for a derive.py rule id."""
    if rule.startswith("class:"):
        return "class"
    if rule.startswith(("subsystem:", "library:")):
        return "subsystem"
    if rule.startswith("tier:") or rule in ("symbol",):
        return "level"
    if rule in ("default", "usage-class"):
        return "default"
    return "words"


def table(records: list[dict], labels: list | None = None) -> list[dict]:
    """One row per library (and a total): extracted, labelled, per basis, curated, indexed (`labels`: the
    records' derived labels when already computed)."""
    rows: dict[str, Counter] = defaultdict(Counter)
    for n, r in enumerate(records):
        lab = labels[n] if labels is not None else derive(r, ancestors)
        row = rows[r["lib"]]
        row["extracted"] += 1
        if lab.role in ROLES and lab.category in CATEGORIES:
            row["labelled"] += 1
        row[basis(lab.rule)] += 1
        row[lab.role] += 1
        if r.get("kind") != "symbol" and families_of(fill(r["text"], "neutral")):
            row["curated"] += 1
        if informative(lab) and matchable(r["text"]) and r.get("kind") != "symbol":
            row["indexed"] += 1
    total = Counter()
    for row in rows.values():
        total.update(row)
    out = [{"lib": lib, **rows[lib]} for lib in sorted(rows)]
    out.append({"lib": "all", **total})
    return out


COLUMNS = ("extracted", "labelled") + BASES + ROLES + ("curated", "indexed")


def render(rows: list[dict], markdown: bool = False) -> str:
    """The table as text (aligned columns) or markdown."""
    head = ["library", *COLUMNS, "labelled %"]
    body = [[r["lib"], *(str(r.get(c, 0)) for c in COLUMNS),
             f"{100.0 * r.get('labelled', 0) / max(1, r.get('extracted', 0)):.1f}"] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(b) + " |" for b in body]
        return "\n".join(lines)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*row) for row in [head, *body])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m postmortem.catalog coverage")
    p.add_argument("--strings", default=STRINGS)
    p.add_argument("--markdown", action="store_true")
    a = p.parse_args(argv)
    records, _ = load_extract(a.strings)
    print(render(table(records), a.markdown))
