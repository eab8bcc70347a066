"""manifest.json: what `postmortem collect` captured on one node, what it could not, and why."""
from __future__ import annotations

import json
import os

from postmortem import __version__

MANIFEST_NAME = "manifest.json"
MARKER = "postmortem-collect"   # the `collector` value: lets tools recognise a node directory


def captured_files(node_dir: str) -> list[dict]:
    """Every file under the node directory with the kind the analyzer will see it as."""
    from postmortem.ingest.discover import discover
    out = []
    for src in discover(node_dir):
        if src.source == MANIFEST_NAME:
            continue
        out.append({"path": src.source, "kind": src.kind, "bytes": src.bytes, "rank": src.rank,
                    "problem": src.problem})
    return out


def write_manifest(node_dir: str, record: dict) -> str:
    """Write the manifest (the record plus the captured file list); returns its path."""
    body = {"collector": MARKER, "version": __version__, **record, "files": captured_files(node_dir)}
    path = os.path.join(node_dir, MANIFEST_NAME)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(body, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def remove_empty_dirs(node_dir: str) -> None:
    """Drop evidence folders nothing was written to (bottom-up), keeping the node directory itself."""
    for root, dirs, files in os.walk(node_dir, topdown=False):
        if root != node_dir and not os.listdir(root):
            try:
                os.rmdir(root)
            except OSError:
                pass
