"""The fast literal matcher (parsers/literal_scan.py): any literal, caseless literals and raw regexes."""
from __future__ import annotations

import pytest

from postmortem.parsers import literal_scan

pytestmark = pytest.mark.skipif(not literal_scan.available(), reason="hyperscan not installed")


def test_finds_literals_caseless_literals_and_regexes():
    s = literal_scan.LiteralSet([b"Traceback (most recent", b"Error"], [b"timeout"], [rb"NCCL INFO \w+\.cc:\d+ ->"])
    assert s.search(b"x" * 100_000 + b"RuntimeError: boom")
    assert s.search(b"socket TimeOut after 30s")
    assert s.search(b"host:1:2 [0] NCCL INFO net.cc:640 -> 2")
    assert not s.search(b"error in lower case is not the literal Error's spelling"[:14])
    assert not s.search(b"Steps: 12%|#  | 120/1000 [00:01<00:10, loss=0.1]" * 1000)
    assert not s.search(b"")


def test_an_empty_set_finds_nothing():
    assert not literal_scan.LiteralSet([], []).search(b"anything")
