"""More collector shapes than ../shared/tools/perturb_corpus.py knows: every case's logs re-written the way journald,
`docker compose logs`, `kubectl logs --prefix`, Azure ML's per-process files, a SageMaker/mpirun launcher, kubelet's
CRI container logs, Docker's json-file driver and Cloud Logging's JSON export keep them, then scored by
score_corpus.py's rule. The incident is the same, so the verdict must be.

usage: python benchmarks/reshape_collectors.py CASES_DIR [--only SHAPE] [-j JOBS] [--keep DIR] [--every N] [-v]
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import sys
import tempfile

SHAPES = ("journald", "compose", "kubectl", "azureml", "sagemaker", "cri", "dockerjson", "gcp")
SKIP_DIRS = ("pyspy", "fr")        # dumps are files of their own, not lines a collector re-prefixes
RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:")


def _is_log(path: str) -> bool:
    name = os.path.basename(path)
    parts = set(path.replace(os.sep, "/").split("/"))
    return (name != "case.json" and not name.endswith((".json", ".gz", ".py", ".sh", ".ipynb"))
            and not parts & set(SKIP_DIRS))


def _prefix_lines(text: str, prefix) -> str:
    return "\n".join(prefix(i, ln) for i, ln in enumerate(text.split("\n")))


def reshape(case: str, shape: str, out: str) -> bool:
    """Copy `case` to `out` re-written as `shape` keeps it; False when the shape changes nothing."""
    shutil.copytree(case, out)
    changed = False
    logs = sorted(os.path.join(dp, f) for dp, _, fns in os.walk(out) for f in fns if _is_log(os.path.join(dp, f)))
    for k, path in enumerate(logs):
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        if shape == "journald":
            # (one stamp for every line: the case's own times say when things happened, a made-up arrival time
            # per line would reorder the ranks)
            new = _prefix_lines(text, lambda i, ln: f"Nov 27 04:58:10 gpu-node-3 python3[{41000 + k}]: {ln}")
        elif shape == "compose":
            new = _prefix_lines(text, lambda i, ln: f"trainer-{k + 1}  | {ln}")
        elif shape == "kubectl":
            new = _prefix_lines(text, lambda i, ln: f"[pod/train-worker-{k}/pytorch] {ln}")
        elif shape == "sagemaker":
            new = _prefix_lines(text, lambda i, ln: RANK_PREFIX.sub(
                lambda m: f"[1,mpirank:{m.group(1)},algo-1]<stdout>:", ln))
        elif shape == "cri":
            # kubelet's container log files (/var/log/containers/*.log): `<RFC 3339 time> <stream> <P|F> <line>`
            new = _prefix_lines(text, lambda i, ln: f"2026-11-27T04:58:10.{i % 1000000:09d}Z stdout F {ln}")
        elif shape == "dockerjson":
            # Docker's json-file driver: one JSON object per line, the line (with its newline) under "log"
            new = "\n".join(json.dumps({"log": ln + "\n", "stream": "stdout",
                                        "time": f"2026-11-27T04:58:10.{i % 1000000:09d}Z"})
                            for i, ln in enumerate(text.split("\n")))
        elif shape == "gcp":
            # Cloud Logging's export: textPayload, timestamp, severity, the pod in labels
            new = "\n".join(json.dumps({"textPayload": ln, "timestamp": f"2026-11-27T04:58:10.{i % 1000000:06d}Z",
                                        "severity": "INFO", "labels": {"pod": f"train-worker-{k}"}})
                            for i, ln in enumerate(text.split("\n")))
        elif shape == "azureml":
            # one file per process: user_logs/std_log_process_<N>.txt, for torchrun's attempt_K/<N>/ files
            m = re.search(r"attempt_\d+/(\d+)/std(out|err)\.log$", path.replace(os.sep, "/"))
            if not m:
                continue
            dest = os.path.join(out, "user_logs", f"std_log_process_{m.group(1)}.txt")
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "a", encoding="utf-8") as fh:
                fh.write(text)
            os.remove(path)
            changed = True
            continue
        else:
            raise ValueError(shape)
        if new != text:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(new)
            changed = True
    return changed


def _judge(path: str) -> tuple[bool, str]:
    """score_corpus.py's rule on one case: (right, what the verdict said)."""
    import subprocess
    with open(os.path.join(path, "case.json"), encoding="utf-8") as fh:
        expect = json.load(fh)["expect"]
    try:
        out = subprocess.run(["postmortem", "analyze", path, "--format", "json"], capture_output=True, text=True,
                             timeout=300)
        result = json.loads(out.stdout)
        v = result.get("verdict") or {}
    except Exception as exc:  # noqa: BLE001 - no JSON is a wrong answer
        result, v = {}, {"category": f"no-json ({type(exc).__name__})"}
    conf = v.get("confidence") if isinstance(v.get("confidence"), (int, float)) else 0.0
    ok = v.get("category") in expect["categories"] and ("phase" not in expect or v.get("phase") in expect["phase"])
    if "culprit_ranks" in expect:
        ok = ok and sorted(v.get("culprit_ranks") or []) == sorted(expect["culprit_ranks"])
    if "max_confidence" in expect:
        ok = ok and conf <= expect["max_confidence"]
    if expect.get("needs_gaps"):
        ok = ok and bool(result.get("evidence_gaps"))
    return ok, f"{v.get('category')}/{v.get('phase')} ranks={v.get('culprit_ranks')} conf={conf:.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases")
    ap.add_argument("--only", choices=SHAPES)
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--keep")
    ap.add_argument("-v", action="store_true")
    ap.add_argument("--every", type=int, default=1, help="every Nth case only (a sample of a big set)")
    a = ap.parse_args(argv)
    names = sorted(d for d in os.listdir(a.cases) if os.path.isfile(os.path.join(a.cases, d, "case.json")))
    names = names[::max(1, a.every)]
    root = a.keep or tempfile.mkdtemp(prefix="pm-reshape-")
    with cf.ThreadPoolExecutor(a.j) as pool:
        base = dict(zip(names, pool.map(lambda n: _judge(os.path.join(a.cases, n)), names)))
        worst = 1.0
        for shape in ([a.only] if a.only else SHAPES):
            todo = [n for n in names if reshape(os.path.join(a.cases, n), shape, os.path.join(root, shape, n))]
            got = dict(zip(todo, pool.map(lambda n: _judge(os.path.join(root, shape, n)), todo)))
            kept = [n for n in todo if base[n][0]]
            lost = [n for n in kept if not got[n][0]]
            share = 1 - len(lost) / len(kept) if kept else 1.0
            worst = min(worst, share)
            print(f"{shape:10} {sum(got[n][0] for n in todo)}/{len(todo)} right; kept {len(kept) - len(lost)}/"
                  f"{len(kept)} right originals")
            for n in lost:
                print(f"    lost {n} -> {got[n][1]}")
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)
    print(f"right verdicts kept under every shape: worst {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
