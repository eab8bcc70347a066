"""Transforms of the real NCCL flight-recorder dumps (tests/fixtures/fr_nvrx) that model other faults and other dump
shapes honestly; each says what it models. Dumps are read with the product's restricted unpickler only."""
from __future__ import annotations

import ast
import copy
import json
import os
import pickle
import re

from postmortem.parsers.flight_recorder import load_dump

NVRX = os.path.join(os.path.dirname(__file__), "fixtures", "fr_nvrx")
CASES = {"gpu_error_1st": [12, 14], "lock_gil_1st": [9, 14]}  # the injected ranks (fault_injection.log)


def load_case(name: str) -> dict[int, dict]:
    """rank -> dump of one capture."""
    folder = os.path.join(NVRX, name)
    out = {}
    for f in os.listdir(folder):
        m = re.fullmatch(r"_dump_(\d+)", f)
        if m:
            with open(os.path.join(folder, f), "rb") as fh:
                out[int(m.group(1))] = load_dump(fh.read())
    return out


def write(folder, dumps: dict[int, dict], as_json: bool = False) -> str:
    """One `_dump_<rank>` per rank, pickled like torch's writer (or its JSON writer's shape)."""
    os.makedirs(folder, exist_ok=True)
    for rank, dump in dumps.items():
        path = os.path.join(str(folder), f"_dump_{rank}")
        with open(path, "wb") as fh:
            fh.write(json.dumps(dump).encode() if as_json else pickle.dumps(dump, protocol=4))
    return str(folder)


def drop(dumps: dict[int, dict], ranks) -> dict[int, dict]:
    """SIGKILL / SEGFAULT / a lost node: the process died before the watchdog's dump, so it left no file (or a
    bystander's dump was not collected)."""
    return {r: d for r, d in dumps.items() if r not in set(ranks)}


def strip_entries(dumps: dict[int, dict]) -> dict[int, dict]:
    """A dump written without the collective entries (torch's `_dump_nccl_trace(includeCollectives=False)`): only
    pg_config and pg_status, so group names come from order alone and send/recv groups are not marked."""
    out = {}
    for r, d in dumps.items():
        d = copy.deepcopy(d)
        d["entries"] = []
        out[r] = d
    return out


def _groups(dumps):
    groups = {}
    for d in dumps.values():
        for name, cfg in d["pg_config"].items():
            groups[name] = (cfg["desc"], tuple(sorted(ast.literal_eval(cfg["ranks"]))))
    return groups


def relabel(dumps: dict[int, dict], perm: dict[int, int]) -> dict[int, dict]:
    """The same fault on other ranks: rename ranks by a permutation that maps the job's process groups onto its
    process groups (e.g. swapping the two members of every tensor-parallel pair). Group names follow their rank
    sets, `ranks` lists and send/recv positions are rewritten; each dump keeps its own local pg ids."""
    groups = _groups(dumps)
    by_set = {v: k for k, v in groups.items()}
    rename = {}
    for name, (desc, ranks) in groups.items():
        target = (desc, tuple(sorted(perm[r] for r in ranks)))
        assert target in by_set, f"the permutation does not map group {name} {ranks} onto a group"
        rename[name] = by_set[target]

    def move(op: str, name: str) -> str:
        old = groups[name][1]
        new = groups[rename[name]][1]

        def at(i: str) -> str:
            return str(new.index(perm[old[int(i)]]))
        return re.sub(r"(\d+)\s*(->|<-)\s*(\d+)", lambda m: f"{at(m.group(1))}{m.group(2)}{at(m.group(3))}", op)

    out = {}
    for r, d in dumps.items():
        d = copy.deepcopy(d)
        d["pg_config"] = {rename[n]: {**cfg, "name": rename[n], "ranks": str(list(groups[rename[n]][1]))}
                          for n, cfg in d["pg_config"].items()}
        for e in d["entries"]:
            name = e["process_group"][0]
            if e.get("is_p2p"):
                e["profiling_name"] = move(e["profiling_name"], name)
            e["process_group"] = (rename[name], e["process_group"][1])
        out[perm[r]] = d
    return out


def swap_pairs(n: int = 16) -> dict[int, int]:
    """rank r <-> r ^ 1: the two members of every tensor-parallel pair trade places."""
    return {r: r ^ 1 for r in range(n)}


def swap_halves(n: int = 16) -> dict[int, int]:
    """rank r <-> (r + n/2) mod n: the pipeline stages trade places (where the job has two)."""
    return {r: (r + n // 2) % n for r in range(n)}
