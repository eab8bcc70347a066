"""Read a .tar.gz/.tgz/.tar/.zip bundle in place: its members are copied, with guards, into a private temporary dir."""
from __future__ import annotations

import os
import shutil
import stat
import tarfile
import tempfile
import zipfile

from postmortem.ingest import textio

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
MAX_MEMBERS = 100_000          # members beyond this are not read (a zip of a million empty files is an attack)
CHUNK = 1024 * 1024


class ArchiveError(ValueError):
    """The file looks like an archive but cannot be opened as one."""


class Extracted(list):
    """The members as (display name, path on disk or None, problem or None); owns the temporary directory, which
    is removed when this object is collected (so an Analysis that keeps it can still show context lines)."""

    def __init__(self, tmp: tempfile.TemporaryDirectory):
        super().__init__()
        self.tmp = tmp
        self.root = tmp.name


def is_archive(path: str) -> bool:
    """True for a regular file whose name ends in one of ARCHIVE_SUFFIXES."""
    return path.lower().endswith(ARCHIVE_SUFFIXES) and os.path.isfile(path)


def size_bound(archive_bytes: int) -> int:
    """The most bytes all members together may expand to (the same bound as one .gz file)."""
    return textio.expansion_bound(archive_bytes)


def safe_name(name: str) -> str | None:
    """The member name as a relative path inside the archive, or None when it is absolute or climbs out (`..`)."""
    name = name.replace("\\", "/")
    if not name or name.startswith("/") or (len(name) > 1 and name[1] == ":") or "\x00" in name:
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return "/".join(parts)


def extract(path: str) -> Extracted:
    """Copy the regular-file members of the archive at `path` into a new temporary directory.

    Links, devices and FIFOs are never created, names that are absolute or contain `..` are refused, and the
    copy stops at MAX_MEMBERS members or `size_bound(archive size)` bytes; every member not copied is returned
    with its reason. Raises ArchiveError when the file is not a readable archive."""
    budget = size_bound(os.path.getsize(path))
    tmp = tempfile.TemporaryDirectory(prefix="postmortem-archive-")
    out = Extracted(tmp)
    try:
        if path.lower().endswith(".zip"):
            _from_zip(path, out, budget)
        else:
            _from_tar(path, out, budget)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        if not out:
            tmp.cleanup()
            raise ArchiveError(f"cannot read {path} as an archive: {exc}") from exc
        out.append(("(rest of the archive)", None, f"archive truncated or corrupt here: {exc}"))
    return out


class _Budget:
    def __init__(self, total: int):
        self.left = total
        self.members = 0


def _copy(src, dest_root: str, name: str, budget: _Budget) -> str | None:
    """Stream one member to dest_root/name; None when the size budget ran out (the partial file is removed)."""
    dest = os.path.join(dest_root, *name.split("/"))
    if os.path.exists(dest):
        return "duplicate member name; the first copy is read"
    try:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        fh = open(dest, "xb")
    except OSError as exc:  # e.g. a member named like a directory another member already is
        return f"cannot be copied out of the archive ({exc.strerror or exc}); not read"
    with fh:
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                break
            budget.left -= len(chunk)
            if budget.left < 0:
                fh.close()
                os.unlink(dest)
                return "archive expands past the size limit; not read"
            fh.write(chunk)
    return None


def _admit(name: str, budget: _Budget) -> tuple[str | None, str | None]:
    budget.members += 1
    if budget.members > MAX_MEMBERS:
        return None, f"more than {MAX_MEMBERS} members in the archive; not read"
    safe = safe_name(name)
    if safe is None:
        return None, "member name is absolute or leaves the archive (..); not read"
    return safe, None


def _from_tar(path: str, out: Extracted, total: int) -> None:
    budget = _Budget(total)
    with tarfile.open(path, mode="r:*") as tf:
        while True:
            member = tf.next()
            if member is None:
                break
            if member.isdir():
                continue
            name = _display_name(member.name)
            safe, problem = _admit(member.name, budget)
            if problem is None and not member.isreg():
                problem = "link, device or FIFO inside the archive; not followed"
            if problem is None and budget.left <= 0:
                problem = "archive expands past the size limit; not read"
            if problem is None:
                src = tf.extractfile(member)
                problem = _copy(src, out.root, safe, budget) if src is not None else "not a regular file; not read"
            out.append((safe or name, None if problem else os.path.join(out.root, *safe.split("/")), problem))
            if budget.members > MAX_MEMBERS:
                break


def _from_zip(path: str, out: Extracted, total: int) -> None:
    budget = _Budget(total)
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            name = _display_name(info.filename)
            safe, problem = _admit(info.filename, budget)
            mode = info.external_attr >> 16
            if problem is None and mode and not stat.S_ISREG(mode) and stat.S_IFMT(mode):
                problem = "link, device or FIFO inside the archive; not followed"
            if problem is None and info.flag_bits & 0x1:
                problem = "encrypted member; not read"
            if problem is None and budget.left <= 0:
                problem = "archive expands past the size limit; not read"
            if problem is None:
                with zf.open(info) as src:
                    problem = _copy(src, out.root, safe, budget)
            out.append((safe or name, None if problem else os.path.join(out.root, *safe.split("/")), problem))
            if budget.members > MAX_MEMBERS:
                break


def _display_name(name: str) -> str:
    """A member name safe to print (control characters escaped, as for file names on disk)."""
    return textio.display_path(name)


def cleanup(extracted: Extracted) -> None:
    """Remove the temporary copy now (it is removed anyway when `extracted` is collected)."""
    shutil.rmtree(extracted.root, ignore_errors=True)
