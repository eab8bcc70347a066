"""Archives read in place: members copied into a private temporary dir with guards, named as in the archive."""
from __future__ import annotations

import gc
import io
import os
import tarfile
import zipfile

import pytest

import postmortem
from postmortem.ingest import archive

LOG = b"[rank0]: step 1 loss 0.5\n[rank0]: Traceback (most recent call last):\n[rank0]: ValueError: boom\n"


def _add(tf: tarfile.TarFile, name: str, data: bytes = LOG, **kw) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    tf.addfile(info, io.BytesIO(data) if info.isreg() else None)


def test_safe_name_refuses_absolute_and_climbing_names():
    assert archive.safe_name("logs/./rank0.log") == "logs/rank0.log"
    for bad in ("/etc/passwd", "../x", "logs/../../x", "C:/x", "..", ""):
        assert archive.safe_name(bad) is None


def test_malicious_tar_writes_nothing_outside_and_says_why(tmp_path):
    evil = tmp_path / "evil.tar.gz"
    outside = tmp_path / "escaped"
    with tarfile.open(evil, "w:gz") as tf:
        _add(tf, "logs/rank0.log")
        _add(tf, "../escaped")
        _add(tf, str(outside))
        _add(tf, "logs/link", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        _add(tf, "logs/hard", type=tarfile.LNKTYPE, linkname="../../etc/passwd")
        _add(tf, "logs/fifo", type=tarfile.FIFOTYPE)
    a = postmortem.analyze(str(evil), quiet=True)
    assert not outside.exists() and not (tmp_path.parent / "escaped").exists()
    by_name = {s.source: s.problem for s in a.sources}
    assert by_name["logs/rank0.log"] is None
    assert "leaves the archive" in by_name["../escaped"]
    assert "link" in by_name["logs/link"] and "link" in by_name["logs/hard"] and "FIFO" in by_name["logs/fifo"]
    assert a.verdict.category == "rank_crash"


def test_zip_symlink_and_traversal_are_refused(tmp_path):
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("rank0.log", LOG)
        zf.writestr("../../escaped.log", LOG)
        link = zipfile.ZipInfo("link.log")
        link.external_attr = (0o120777 << 16)
        zf.writestr(link, "/etc/passwd")
    a = postmortem.analyze(str(evil), quiet=True)
    by_name = {s.source: s.problem for s in a.sources}
    assert by_name["rank0.log"] is None and "link" in by_name["link.log"]
    assert any("leaves the archive" in (p or "") for p in by_name.values())
    assert not (tmp_path.parent.parent / "escaped.log").exists()


def test_bounded_size_and_member_count(tmp_path, monkeypatch):
    bomb = tmp_path / "bomb.tgz"
    with tarfile.open(bomb, "w:gz") as tf:
        _add(tf, "a.log", b"x" * 3_000_000)
        for i in range(5):
            _add(tf, f"m{i}.log")
    monkeypatch.setattr(archive, "size_bound", lambda n: 1_000_000)
    ex = archive.extract(str(bomb))
    assert dict((n, p) for n, _, p in ex)["a.log"] == "archive expands past the size limit; not read"
    monkeypatch.setattr(archive, "MAX_MEMBERS", 3)
    ex = archive.extract(str(bomb))
    problems = [p for _, _, p in ex]
    assert sum(p is None for p in problems) <= 3 and any("more than 3 members" in (p or "") for p in problems)


def test_not_an_archive_is_said_not_raised(tmp_path):
    fake = tmp_path / "fake.tgz"
    fake.write_bytes(b"this is not gzip")
    a = postmortem.analyze(str(fake), quiet=True)
    assert "cannot read" in a.sources[0].problem


def test_the_temporary_copy_lives_as_long_as_the_analysis(tmp_path):
    ok = tmp_path / "ok.tgz"
    with tarfile.open(ok, "w:gz") as tf:
        _add(tf, "logs/rank0.log")
    a = postmortem.analyze(str(ok), quiet=True)
    root = a.sources.extracted.root
    assert os.path.isdir(root)
    assert "ValueError" in a.to_html()  # context lines are read from the copy at render time
    del a
    gc.collect()
    assert not os.path.exists(root)


@pytest.mark.parametrize("suffix", [".tar.gz", ".tgz", ".zip"])
def test_is_archive(tmp_path, suffix):
    p = tmp_path / f"x{suffix}"
    p.write_bytes(b"")
    assert archive.is_archive(str(p)) and not archive.is_archive(str(tmp_path))


def test_a_member_clashing_with_a_directory_is_skipped_not_fatal(tmp_path):
    clash = tmp_path / "clash.tgz"
    with tarfile.open(clash, "w:gz") as tf:
        _add(tf, "logs")
        _add(tf, "logs/rank0.log")
        _add(tf, "rank1.log")
    by_name = {s.source: s.problem for s in postmortem.analyze(str(clash), quiet=True).sources}
    assert "cannot be copied" in by_name["logs/rank0.log"] and by_name["rank1.log"] is None


def test_an_archive_inside_a_tree_gets_a_hint(tmp_path):
    (tmp_path / "rank0.log").write_bytes(LOG)
    with tarfile.open(tmp_path / "old_run.tar.gz", "w:gz") as tf:
        _add(tf, "rank1.log")
    by_name = {s.source: s.problem for s in postmortem.analyze(str(tmp_path), quiet=True).sources}
    assert "postmortem analyze old_run.tar.gz" in by_name["old_run.tar.gz"]
