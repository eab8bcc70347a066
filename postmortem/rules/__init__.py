"""The rule registry: each rule is metadata plus a pure `check(tables) -> Iterable[Finding]`."""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable

from postmortem.verdict.findings import CATEGORIES, SEVERITIES, Finding

BUILTIN_FAMILIES = ("memory", "collectives", "hangs", "io", "numerics", "hardware", "crash", "endstate", "flight",
                    "asymmetry", "timing", "stopped", "loggers")


@dataclass(frozen=True)
class Rule:
    """A rule's mandatory metadata and its check function."""
    id: str
    title: str
    category: str
    severity: str
    description: str
    remediation: str
    check: Callable
    references: tuple[str, ...] = ()
    false_positives: tuple[str, ...] = ()
    tags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self):
        if not self.id or self.id != self.id.lower() or " " in self.id or "_" in self.id:
            raise ValueError(f"rule id must be kebab-case: {self.id!r}")
        if self.category not in CATEGORIES:
            raise ValueError(f"rule {self.id}: unknown category {self.category}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"rule {self.id}: unknown severity {self.severity}")
        for name in ("title", "description", "remediation"):
            if not getattr(self, name):
                raise ValueError(f"rule {self.id}: missing {name}")


class Registry:
    """Rules by id; built-ins and plugins register the same way."""

    def __init__(self):
        self._rules: dict[str, Rule] = {}

    def add(self, rule: Rule) -> Rule:
        if rule.id in self._rules:
            raise ValueError(f"duplicate rule id {rule.id}")
        self._rules[rule.id] = rule
        return rule

    def rules(self) -> list[Rule]:
        return [self._rules[k] for k in sorted(self._rules)]

    def get(self, rule_id: str) -> Rule:
        return self._rules[rule_id]


REGISTRY = Registry()


def rule(*, id: str, title: str, category: str, severity: str, description: str, remediation: str,
         references: Iterable[str] = (), false_positives: Iterable[str] = ()):
    """Decorator that registers a check function as a built-in rule with its metadata."""
    def deco(fn: Callable) -> Callable:
        REGISTRY.add(Rule(id=id, title=title, category=category, severity=severity, description=description,
                          remediation=remediation, check=fn, references=tuple(references),
                          false_positives=tuple(false_positives)))
        return fn
    return deco


_loaded = False


def load_builtin() -> None:
    """Import the built-in rule families (idempotent)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for fam in BUILTIN_FAMILIES:
        importlib.import_module(f"postmortem.rules.{fam}")


def load_plugins(paths: Iterable[str] = (), entry_points: bool = True) -> None:
    """Load user rules from files/directories and from the `postmortem.rules` entry-point group."""
    for path in paths:
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(path, f) for f in os.listdir(path) if f.endswith(".py"))
        for f in files:
            name = "postmortem_user_rules_" + os.path.splitext(os.path.basename(f))[0]
            spec = importlib.util.spec_from_file_location(name, f)
            if spec and spec.loader:
                mod = importlib.util.module_from_spec(spec)
                sys.modules[name] = mod
                spec.loader.exec_module(mod)
    if entry_points:
        from importlib.metadata import entry_points as eps
        for ep in eps(group="postmortem.rules"):
            ep.load()


def all_rules() -> list[Rule]:
    """Every registered rule, sorted by id."""
    load_builtin()
    return REGISTRY.rules()


def run_rules(tables, rules: list[Rule] | None = None) -> list[Finding]:
    """Run rules over the tables; a rule that raises is reported as a finding-free problem, never a crash."""
    out: list[Finding] = []
    for r in rules if rules is not None else all_rules():
        try:
            for f in r.check(tables) or ():
                if f.severity is None:
                    f.severity = r.severity
                out.append(f)
        except Exception as exc:  # a buggy (user) rule must not take the analysis down
            if os.environ.get("POSTMORTEM_STRICT_RULES") == "1":  # the test suite: a rule that raises is a bug
                raise
            tables.meta.setdefault("rule_errors", []).append(f"{r.id}: {type(exc).__name__}: {exc}")
    return out
