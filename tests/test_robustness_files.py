"""Adversarial input files: every byte is untrusted, and the analysis still gives the best answer the rest supports."""
from __future__ import annotations

import errno
import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import postmortem
from postmortem.ingest import discover as discover_mod
from postmortem.ingest import textio

OOM = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.35 GiB total capacity)"
TRACEBACK = textwrap.dedent("""\
    Traceback (most recent call last):
      File "/work/train.py", line 42, in <module>
        main()
      File "/work/train.py", line 30, in main
        loss.backward()
    ValueError: corrupt sample at step 3
    """)


def _analyze(path) -> postmortem.Analysis:
    return postmortem.analyze(str(path), jobs=1)


def _row(analysis, name: str) -> dict:
    df = analysis.tables.sources
    hit = df[df["source"] == name]
    assert len(hit) == 1, f"{name!r} not listed once in sources: {list(df['source'])}"
    # Missing values come back as NaN from pandas' string columns: normalise them to None.
    return {k: (None if not isinstance(v, (list, dict)) and pd.isna(v) else v) for k, v in hit.iloc[0].to_dict().items()}


def _in_subprocess(code: str, timeout: float = 120) -> dict:
    """Run code in a fresh interpreter (so peak RSS is its own) and return the JSON it prints last."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


_RSS_PRELUDE = """
    import json, resource, sys
    import postmortem, pandas
    from postmortem.ingest import textio
    from postmortem.api import analyze
    analyze({warm!r}, jobs=1)  # imports, rule modules and caches first: only the big file's cost is measured
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""


# ------------------------------------------------------------------------------------------------ encodings

def test_invalid_utf8_bytes_are_replaced_and_the_rest_is_parsed(tmp_path):
    (tmp_path / "rank0.log").write_bytes(b"step 1 \xc3\x28 ok\n\xff\xfe\xfd garbage \xed\xa0\x80\n" + OOM.encode()
                                         + b" \x80\x81\n" + b"tail \xf4\x90\x80\x80\n")
    a = _analyze(tmp_path)
    row = _row(a, "rank0.log")
    assert row["lines"] == 4 and row["problem"] is None
    oom = a.tables.events[a.tables.events["kind"] == "oom"]
    assert len(oom) == 1 and int(oom.iloc[0]["line"]) == 3 and oom.iloc[0]["rank"] == 0
    assert a.verdict.category == "gpu_oom"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_logs_with_and_without_bom_are_text(tmp_path, encoding):
    text = "starting\n" + TRACEBACK + "done\n"
    (tmp_path / "rank1.log").write_bytes(text.encode(encoding))
    a = _analyze(tmp_path)
    row = _row(a, "rank1.log")
    assert row["kind"] == "rank_log" and row["problem"] is None, row
    assert row["lines"] == text.count("\n")
    tb = a.tables.tracebacks
    assert list(tb["exc_type"]) == ["ValueError"] and tb.iloc[0]["exc_message"] == "corrupt sample at step 3"


def test_truncated_utf16_and_lone_surrogates_do_not_stop_reading(tmp_path):
    data = ("a\n" + OOM + "\n").encode("utf-16-le") + b"\x00\xd8" + "b\n".encode("utf-16-le") + b"\x41"
    (tmp_path / "rank2.log").write_bytes(b"\xff\xfe" + data)
    a = _analyze(tmp_path)
    assert (a.tables.events["kind"] == "oom").any()
    assert _row(a, "rank2.log")["lines"] == 4


def test_nul_bytes_and_binary_junk(tmp_path):
    # A DataLoader signal handler writes a NUL into normal text; a core dump is binary.
    (tmp_path / "rank0.log").write_bytes(b"ERROR: Unexpected bus error encountered in worker.\x00\n" + OOM.encode() + b"\n")
    (tmp_path / "core.1234").write_bytes(bytes(range(256)) * 64)
    a = _analyze(tmp_path)
    assert _row(a, "rank0.log")["problem"] is None
    assert (a.tables.events["kind"] == "oom").any()
    core = _row(a, "core.1234")
    assert core["kind"] == "binary" and "binary" in core["problem"]


# ------------------------------------------------------------------------------------------------ huge lines

def test_200mb_single_line_is_cut_with_a_marker_in_bounded_memory(tmp_path):
    path = tmp_path / "rank0.log"
    with open(path, "wb") as fh:
        fh.write(b"step 1 ok\n" + OOM.encode() + b" ")
        chunk = b"x" * (1 << 20)
        for _ in range(200):
            fh.write(chunk)
        fh.write(b"\nafter the runaway print\n")
    _mkwarm(tmp_path)
    out = _in_subprocess(_RSS_PRELUDE.format(warm=str(tmp_path / "warm")) + f"""
    a = analyze({str(path)!r}, jobs=1)
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    src = a.tables.sources.iloc[0]
    lines = list(textio.iter_lines({str(path)!r}))
    ev = a.tables.events
    print(json.dumps({{"grew_kib": grew, "lines": int(src["lines"]), "problem": src["problem"],
                      "n_lines": len(lines), "line2_len": len(lines[1][1]), "line2_end": lines[1][1][-40:],
                      "line3": lines[2][1], "oom": int((ev["kind"] == "oom").sum())}}))
    """, timeout=300)
    assert out["grew_kib"] < 96 * 1024, f"peak RSS grew by {out['grew_kib']} KiB reading a 200 MB line"
    assert out["lines"] == 3 and out["n_lines"] == 3
    assert out["line2_len"] == textio.MAX_LINE_CHARS + len(textio.TRUNCATION_MARK)
    assert out["line2_end"].endswith(textio.TRUNCATION_MARK)
    assert out["line3"] == "after the runaway print"
    assert "truncated" in out["problem"]
    assert out["oom"] == 1  # the start of the cut line still counts


def _mkwarm(tmp_path) -> bool:
    warm = tmp_path / "warm"
    warm.mkdir(exist_ok=True)
    (warm / "rank0.log").write_text(OOM + "\n")
    return True


# ------------------------------------------------------------------------------------------------ gzip

def test_gzip_bomb_stops_at_the_documented_expansion_bound(tmp_path):
    # Multi-member gzip: each member is 16 MiB of 1 KiB lines (~35 KB compressed); 24 members expand to 384 MiB.
    member = gzip.compress((b"A" * 1023 + b"\n") * (16 << 10), compresslevel=9, mtime=0)
    path = tmp_path / "rank0.log.gz"
    with open(path, "wb") as fh:
        fh.write(gzip.compress((OOM + "\n").encode(), mtime=0))
        for _ in range(24):
            fh.write(member)
    size = path.stat().st_size
    bound = textio.expansion_bound(size)
    assert bound == textio.MIN_EXPANSION_BYTES == 256 << 20  # max(256 MiB, 250 x ~0.85 MB)
    _mkwarm(tmp_path)
    out = _in_subprocess(_RSS_PRELUDE.format(warm=str(tmp_path / "warm")) + f"""
    from postmortem.ingest.discover import discover
    from postmortem.parsers import parse_source
    src = [s for s in discover({str(tmp_path)!r}) if s.source == "rank0.log.gz"][0]
    res = parse_source(src)
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    print(json.dumps({{"grew_kib": grew, "bytes": res.bytes, "problems": res.problems, "compression": src.compression,
                      "oom": sum(1 for r in res.rows.get("events", []) if r["kind"] == "oom")}}))
    """, timeout=300)
    assert out["compression"] == "gzip"
    assert out["bytes"] == bound, "decompression must stop exactly at the bound"
    assert any("gzip expansion bound" in p for p in out["problems"]), out["problems"]
    assert out["oom"] == 1
    assert out["grew_kib"] < 96 * 1024


def test_truncated_gzip_keeps_what_decompressed(tmp_path):
    body = ("".join(f"step {i} loss 0.5\n" for i in range(2000)) + OOM + "\n" +
            "".join(f"more {i}\n" for i in range(20000))).encode()
    z = gzip.compress(body, mtime=0)
    (tmp_path / "rank0.log.gz").write_bytes(z[: len(z) // 2])
    (tmp_path / "rank1.log.gz").write_bytes(z[:5])  # cut inside the gzip header
    a = _analyze(tmp_path)
    r0 = _row(a, "rank0.log.gz")
    assert "truncated or corrupt compressed data" in r0["problem"]
    assert 2001 <= r0["lines"] < 22001
    assert (a.tables.events["kind"] == "oom").any()
    r1 = _row(a, "rank1.log.gz")
    assert r1["problem"], r1


# ------------------------------------------------------------------------------------------------ tree shapes

def test_symlink_loops_are_listed_not_followed(tmp_path):
    (tmp_path / "rank0.log").write_text(OOM + "\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "up").symlink_to("..")            # directory loop
    (tmp_path / "self").symlink_to("self")   # a link to itself
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "dangling").symlink_to("does-not-exist")
    (tmp_path / "alias.log").symlink_to("rank0.log")  # same file twice: read once
    a = _analyze(tmp_path)
    names = set(a.tables.sources["source"])
    assert {"rank0.log", "self", "a", "b", "dangling", "alias.log"} <= names
    for name in ("self", "a", "b"):
        assert "loop" in _row(a, name)["problem"]
    assert "dangling" in _row(a, "dangling")["problem"] or "vanished" in _row(a, "dangling")["problem"]
    assert "not read twice" in _row(a, "alias.log")["problem"]
    assert len(a.tables.events[a.tables.events["kind"] == "oom"]) == 1


def _run_with_deadline(fn, seconds: float = 60):
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s: blocked on a FIFO or an endless device?"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_and_dev_zero_never_block_or_read_forever(tmp_path):
    (tmp_path / "rank0.log").write_text(OOM + "\n")
    os.mkfifo(tmp_path / "rank1.log")
    (tmp_path / "rank2.log").symlink_to("/dev/zero")
    a = _run_with_deadline(lambda: _analyze(tmp_path))
    assert "FIFO" in _row(a, "rank1.log")["problem"]
    assert "device" in _row(a, "rank2.log")["problem"]
    assert a.verdict.category == "gpu_oom"
    # The same files named directly, and the low-level readers: refused, never opened for reading.
    for name in ("rank1.log", "rank2.log"):
        with pytest.raises(textio.InputProblem):
            _run_with_deadline(lambda: list(textio.iter_lines(str(tmp_path / name))))
        srcs = _run_with_deadline(lambda: discover_mod.discover(str(tmp_path / name)))
        assert srcs[0].problem and "not a regular file" in srcs[0].problem
    assert _run_with_deadline(lambda: textio.read_head(str(tmp_path / "rank1.log"))) == b""


def test_symlink_out_of_the_tree_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.log").write_text(OOM + "\n")
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "rank0.log").write_text("step 1\n")
    (root / "etc").symlink_to(outside)
    (root / "rank1.log").symlink_to(outside / "secret.log")
    a = _analyze(root)
    assert "outside the analysed tree" in _row(a, "etc")["problem"]
    assert "outside the analysed tree" in _row(a, "rank1.log")["problem"]
    assert not (a.tables.events["kind"] == "oom").any()


def _deny(monkeypatch, victim: str, when=lambda: True):
    """Make opening `victim` fail with EACCES, as it does for a non-root user (root bypasses mode bits)."""
    real_open = os.open

    def fake_open(path, flags, *args, **kwargs):
        if os.fspath(path) == victim and when():
            raise PermissionError(errno.EACCES, "Permission denied", victim)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)


def test_permission_denied_file_is_listed_with_its_problem(tmp_path, monkeypatch):
    (tmp_path / "rank0.log").write_text(OOM + "\n")
    locked = tmp_path / "rank1.log"
    locked.write_text("Traceback (most recent call last):\nValueError: hidden\n")
    locked.chmod(0)
    try:
        if os.geteuid() == 0:
            _deny(monkeypatch, str(locked))
        a = _analyze(tmp_path)
    finally:
        locked.chmod(0o644)
    row = _row(a, "rank1.log")
    assert row["problem"] == "permission denied" and not row["parsed_ok"]
    assert row["bytes"] == locked.stat().st_size
    assert "rank1.log" not in set(a.tables.tracebacks["source"])
    assert a.verdict.category == "gpu_oom"


def test_file_that_becomes_unreadable_after_discovery(tmp_path, monkeypatch):
    (tmp_path / "rank0.log").write_text(OOM + "\n")
    victim = tmp_path / "rank1.log"
    victim.write_text("step 3\n")
    sources = discover_mod.discover(str(tmp_path))
    _deny(monkeypatch, str(victim))
    from postmortem.parsers import parse_source
    res = parse_source([s for s in sources if s.source == "rank1.log"][0])
    assert res.problems == ["permission denied"]


def test_100000_tiny_files_are_all_listed(tmp_path):
    # Creating 100,000 files is disk-bound: use RAM-backed /dev/shm where there is one.
    shm = "/dev/shm"
    base = tempfile.mkdtemp(prefix="pm-many-", dir=shm) if os.access(shm, os.W_OK) else str(tmp_path)
    try:
        _many_files(Path(base) / "many")
    finally:  # removed whether the test passes or fails (it is outside the session's temporary folder)
        shutil.rmtree(base, ignore_errors=True)


def _many_files(root: Path) -> None:
    root.mkdir()
    n = 0
    for d in range(100):
        sub = root / f"node{d:03d}"
        sub.mkdir()
        for f in range(1000):
            fd = os.open(sub / f"rank{n}.log", os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"step 1\n")
            os.close(fd)
            n += 1
    (root / "node000" / "rank0.log").write_text(OOM + "\n")
    sources = discover_mod.discover(str(root))
    assert len(sources) == 100_000
    assert len({s.source for s in sources}) == 100_000
    assert not [s for s in sources if s.problem]
    assert sum(1 for s in sources if s.rank is not None) == 100_000


def test_500_deep_directories(tmp_path):
    deep = tmp_path.joinpath(*(["d"] * 500))
    deep.mkdir(parents=True)
    (deep / "rank3.log").write_text(OOM + "\n")
    a = _analyze(tmp_path)
    row = _row(a, "d/" * 500 + "rank3.log")
    assert row["problem"] is None and row["rank"] == 3
    assert a.verdict.category == "gpu_oom"


def test_tree_deeper_than_path_max_is_reported_not_fatal(tmp_path):
    (tmp_path / "rank0.log").write_text(OOM + "\n")
    # Build 500 levels of 9-char names (~5,000 chars, past PATH_MAX) with dir_fd: no single path reaches the bottom.
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(500):
            os.mkdir("ddddddddd", dir_fd=fd)
            nfd = os.open("ddddddddd", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        wfd = os.open("rank9.log", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(wfd, b"hello\n")
        os.close(wfd)
    finally:
        os.close(fd)
    try:
        a = _analyze(tmp_path)
        problems = a.tables.sources["problem"].dropna()
        assert problems.str.contains("too long|cannot", regex=True).any()
        assert a.verdict.category == "gpu_oom"
    finally:
        shutil.rmtree(tmp_path / "ddddddddd")


NASTY_NAMES = ["rank0\n.log", "$(touch PWNED).log", "`touch PWNED2`;rm -rf x|&.log", "a'b\"c.log",
               "\x1b[2J\x1b]0;evil\x07.log", "<img src=x onerror=alert(1)>.log", " lead space.log", "-rf.log"]


def test_file_names_with_newlines_and_shell_characters(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "bundle"
    root.mkdir()
    for name in NASTY_NAMES:
        (root / name).write_text(OOM + "\n")
    raw = os.fsencode(str(root)) + b"/rank\xff\xfe.log"  # not valid UTF-8
    with open(raw, "wb") as fh:
        fh.write(OOM.encode() + b"\n")
    a = _analyze(root)
    shown = list(a.tables.sources["source"])
    assert len(shown) == len(NASTY_NAMES) + 1
    assert "rank0\\n.log" in shown and "rank\\xff\\xfe.log" in shown
    assert "\\x1b[2J\\x1b]0;evil\\x07.log" in shown
    for s in shown:
        assert not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 for c in s), repr(s)
    assert int(a.tables.sources["lines"].sum()) == len(shown)
    assert not list(tmp_path.rglob("PWNED*"))
    out = a.to_json()
    json.loads(out)
    out.encode("utf-8")  # no lone surrogates
    text = a.to_text()
    assert "\x1b" not in text and "\x07" not in text
    html = a.to_html()
    assert "<img src=x onerror=alert(1)>" not in html


# ------------------------------------------------------------------------------------------------ structured

class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [0, 2, 4])
def test_pickle_that_would_run_os_system_is_refused(tmp_path, protocol):
    marker = tmp_path / "EXECUTED"
    root = tmp_path / "bundle"
    root.mkdir()
    payload = pickle.dumps({"version": "2.10", "entries": [_Evil(str(marker))]}, protocol=protocol)
    (root / "nccl_trace_rank_0").write_bytes(payload)
    (root / "fr_rank_1.pkl").write_bytes(pickle.dumps(_Evil(str(marker)), protocol=protocol))
    (root / "rank0.log").write_text("step 1\n")
    a = _analyze(root)
    assert not marker.exists(), "a pickle from the input was executed"
    for name in ("nccl_trace_rank_0", "fr_rank_1.pkl"):
        row = _row(a, name)
        if protocol >= 2:  # binary pickles are flight-recorder dumps to discovery, and the loader refuses them
            assert row["kind"] == "flight_recorder", row
            assert row["problem"] and "system" in row["problem"] and "not loaded" in row["problem"], row
    a.to_json()
    assert not marker.exists()


PRODUCT_DIRS = ("postmortem", "parsers", "reports")


def _product_sources():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for d in PRODUCT_DIRS:
        for dirpath, _dirs, files in os.walk(os.path.join(root, d)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    with open(path, encoding="utf-8") as fh:
                        yield os.path.relpath(path, root), fh.read()


_UNPICKLERS = {("pickle", "load"), ("pickle", "loads"), ("cPickle", "load"), ("cPickle", "loads"), ("dill", "load"),
               ("dill", "loads"), ("joblib", "load"), ("marshal", "load"), ("marshal", "loads"), ("torch", "load"),
               ("pickle", "Unpickler"), ("shelve", "open")}
_XML_MODULES = {"ET", "ElementTree", "etree", "minidom", "sax", "expat", "lxml", "pulldom", "xmlrpc"}
_XML_CALLS = {"parse", "fromstring", "XML", "iterparse", "XMLParser", "parseString", "ParserCreate", "make_parser",
              "XMLPullParser", "fromstringlist"}


def test_no_stock_unpickler_or_unhardened_xml_in_product_code():
    import ast
    offenders = []
    for rel, text in _product_sources():
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            what = None
            if isinstance(f, ast.Name) and f.id in ("eval", "exec"):
                what = f"{f.id}() of data"
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                pair = (f.value.id, f.attr)
                if pair in _UNPICKLERS:
                    what = "stock unpickler"
                elif f.value.id in _XML_MODULES and f.attr in _XML_CALLS:
                    what = "XML parser without the hardened wrapper"
                elif pair == ("yaml", "load") and not any(k.arg == "Loader" for k in node.keywords):
                    what = "yaml.load without SafeLoader"
            if what and not (rel.endswith("safeload.py") and "eval" not in what):
                # safeload.py is the one place that wraps them (no-globals unpickler, entity-refusing XML).
                offenders.append(f"{rel}:{node.lineno}: {what}")
    assert not offenders, "\n".join(offenders)


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<nvidia_smi_log><driver_version>&lol9;</driver_version><gpu id="00000000:3B:00.0"><minor_number>0</minor_number>
<fb_memory_usage><total>81920 MiB</total><used>100 MiB</used></fb_memory_usage></gpu></nvidia_smi_log>
"""

XXE = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [ <!ENTITY xxe SYSTEM "file:///etc/passwd"> ]>
<nvidia_smi_log><driver_version>&xxe;</driver_version><gpu id="00000000:3B:00.0"><minor_number>0</minor_number>
<product_name>&xxe;</product_name></gpu></nvidia_smi_log>
"""


def test_xml_entity_expansion_and_external_entities_are_refused(tmp_path):
    (tmp_path / "nvidia_smi.xml").write_text(BILLION_LAUGHS)
    (tmp_path / "nvidia_smi_q.xml").write_text(XXE)
    (tmp_path / "rank0.log").write_text(OOM + "\n")
    a = _run_with_deadline(lambda: _analyze(tmp_path), 60)
    for name in ("nvidia_smi.xml", "nvidia_smi_q.xml"):
        row = _row(a, name)
        assert row["kind"] == "nvidia_smi", row
        assert row["problem"] and "entit" in row["problem"].lower(), row
    everything = a.to_json() + a.to_text() + a.to_html()
    assert "root:x:0:0" not in everything and "lollollol" not in everything
    assert a.tables.gpu.empty or not a.tables.gpu["bus_id"].astype(str).str.contains("lol").any()


DEEP = 200_000


@pytest.mark.parametrize("name,head,tail,kind", [
    ("logs/attempt_0/0/error.json", '{"message": {"message": "x", "extraInfo": {"py_callstack": "T", "deep": ', "}}}",
     "torchrun_error"),
    ("pyspy_rank0.json", '[{"thread_id": 1, "thread_name": "MainThread", "frames": ', "}]", "pyspy_json"),
    ("fr_rank_0.json", '{"version": "2.10", "pg_config": {}, "entries": ', "}", "flight_recorder"),
    ("config.json", '{"a": ', "}", None),
])
def test_deeply_nested_json(tmp_path, name, head, tail, kind):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head + "[" * DEEP + "]" * DEEP + tail)
    (tmp_path / "rank0.log").write_text(OOM + "\n")
    a = _analyze(tmp_path)
    row = _row(a, name)
    assert row["bytes"] == path.stat().st_size
    if kind:  # the structured parser met it, and refused it with a reason instead of recursing
        assert row["kind"] == kind, row
        assert row["problem"] and ("nest" in row["problem"] or "deep" in row["problem"]), row
    assert a.verdict.category == "gpu_oom"
    json.loads(a.to_json())


# ------------------------------------------------------------------------------------------------ live files

def test_file_that_grows_while_being_read_is_read_as_a_snapshot(tmp_path):
    path = tmp_path / "rank0.log"
    path.write_text("".join(f"step {i}\n" for i in range(1000)))
    stats = textio.ReadStats()
    it = textio.iter_lines(str(path), stats)
    first = next(it)
    with open(path, "a") as fh:
        fh.write("".join(f"later {i}\n" for i in range(5000)))
    rest = list(it)
    assert first == (1, "step 0") and len(rest) == 999 and rest[-1] == (1000, "step 999")
    assert stats.lines == 1000
    assert any("grew while being read" in p for p in stats.problems)


def test_analysis_finishes_while_a_writer_keeps_appending(tmp_path):
    path = tmp_path / "rank0.log"
    # the OOM ends the training steps (steps after it would say the program went on: a handled OOM)
    path.write_text("".join(f"step {i}\n" for i in range(20000)) + OOM + "\n")
    stop = threading.Event()
    deadline = time.monotonic() + 60

    def writer():
        with open(path, "a") as fh:
            i = 0
            while not stop.is_set() and time.monotonic() < deadline:
                fh.write("".join(f"tail {i} {j}\n" for j in range(2000)))
                fh.flush()
                i += 1

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        a = _analyze(tmp_path)
        still_writing = t.is_alive()
    finally:
        stop.set()
        t.join()
    assert still_writing, "the analysis only finished when the writer stopped: it followed the growing file"
    assert a.verdict.category == "gpu_oom"
    assert _row(a, "rank0.log")["lines"] >= 20001


# ------------------------------------------------------------------------------------------------ fuzz finds

def test_long_line_with_a_progress_bar_is_linear_not_quadratic(tmp_path):
    # Found by fuzz/run.py: TQDM_RE's lazy description rescanned the line from every start (a 70 KB line took
    # 20 s; this one would take minutes). Ten such lines must parse in well under the deadline.
    line = "loss " + "a" * 20000 + " 45%|" + "b" * 20000
    (tmp_path / "rank0.log").write_text((line + "\n") * 10 + OOM + "\n")
    a = _run_with_deadline(lambda: _analyze(tmp_path), 60)
    assert a.verdict.category == "gpu_oom"


def test_csv_line_with_a_quote_and_carriage_return(tmp_path):
    # Found by fuzz/run.py: csv.reader raised csv.Error on an unquoted field holding a quote and a CR.
    (tmp_path / "nvidia-smi.csv").write_bytes(
        b"timestamp, index, memory.used [MiB], memory.total [MiB]\n"
        b"2026/11/21 13:00:00.000, 0, 40000 MiB, 81920 MiB\n"
        b'2026/11/21 13:00:05.000, 0, x"y\rz, 81920 MiB\n')
    a = _analyze(tmp_path)
    problem = _row(a, "nvidia-smi.csv")["problem"] or ""
    assert " failed: " not in problem, problem


@pytest.mark.skipif(__import__("multiprocessing").get_start_method() != "fork",
                    reason="the patched parser reaches worker processes only through fork")
def test_a_parser_process_that_dies_is_named_and_the_rest_parsed(tmp_path, monkeypatch):
    """A file that kills its parser process (OOM killer, a crash in C code) costs that file only."""
    import signal as signal_mod
    from postmortem.parsers import base
    for r in range(4):
        (tmp_path / f"rank{r}.log").write_text(OOM + "\n" if r == 3 else "step 1\n")
    (tmp_path / "poison.log").write_text("step 2\n")

    def killer(source):
        if source.path.endswith("poison.log") and os.getpid() != parent:
            os.kill(os.getpid(), signal_mod.SIGKILL)
        return base.ParseResult()

    parent = os.getpid()
    monkeypatch.setitem(base._REGISTRY, "rank_log", [*base._REGISTRY.get("rank_log", []), killer])
    a = postmortem.analyze(str(tmp_path), jobs=2)  # worker processes (fork) inherit the patched registry
    assert "parser process died" in _row(a, "poison.log")["problem"]
    for r in range(4):
        assert _row(a, f"rank{r}.log")["problem"] is None
    assert a.verdict.category == "gpu_oom" and a.verdict.culprit_ranks == [3]


def test_free_output_with_an_absurd_number(tmp_path):
    # Found by fuzz/run.py: a 400-digit "size" became float('inf') and round() raised OverflowError.
    (tmp_path / "free.txt").write_text(
        "               total        used        free      shared  buff/cache   available\n"
        "Mem:            62Gi        20Gi        40Gi       101Mi  " + "9" * 400 + "Gi        41Gi\n"
        "Swap:          8.0Gi          0B       8.0Gi\n")
    a = _analyze(tmp_path)
    problem = _row(a, "free.txt")["problem"] or ""
    assert " failed: " not in problem, problem


def test_terminal_escapes_in_log_text_cannot_drive_the_terminal(tmp_path):
    # A full terminal reset, a C1 CSI (clear screen), a bell and a backspace inside the evidence line itself.
    evil = "\x1bc\u009b2J\x07\x08"
    (tmp_path / "rank0.log").write_text(f"{evil}{OOM}{evil}\n")
    a = _analyze(tmp_path)
    assert a.verdict.category == "gpu_oom"
    text = a.to_text()
    for ch in ("\x1b", "\x07", "\u009b", "\x08"):
        assert ch not in text, repr(ch)
    assert "\\x1bc" in text  # shown, escaped
    json.loads(a.to_json())



def test_tiny_pickle_naming_a_huge_memo_index_costs_no_memory(tmp_path):
    # Found by fuzz/run.py: `LONG_BINPUT 150000000` in an 822-byte pickle made the C unpickler allocate and zero
    # a 1.2 GB memo array (an index near 2**32 would take 32 GB). The loader now uses a dict-backed memo.
    import struct
    payload = b"\x80\x02}(X\x07\x00\x00\x00versionq\x00X\x04\x00\x00\x002.10q\x01X\x07\x00\x00\x00entries]r" + \
        struct.pack("<I", 150_000_000) + b"u."
    (tmp_path / "nccl_trace_rank_0").write_bytes(payload)
    (tmp_path / "fr_rank_1").write_bytes(b"\x80\x05\x96" + struct.pack("<Q", 1 << 40) + b"xyz.")  # BYTEARRAY8 of 1 TiB
    _mkwarm(tmp_path)
    out = _in_subprocess(_RSS_PRELUDE.format(warm=str(tmp_path / "warm")) + f"""
    from postmortem.ingest.discover import discover
    from postmortem.parsers import parse_source
    res = {{s.source: parse_source(s).problems for s in discover({str(tmp_path)!r})
           if s.source in ("nccl_trace_rank_0", "fr_rank_1")}}
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    print(json.dumps({{"grew_kib": grew, "problems": res}}))
    """)
    assert out["grew_kib"] < 64 * 1024, out
    assert out["problems"]["nccl_trace_rank_0"] == [], out  # loads: an empty dump
    assert "bytearrays" in out["problems"]["fr_rank_1"][0], out  # refused


def test_unterminated_json_string_is_scanned_in_linear_time(tmp_path):
    # Found reviewing the depth guard: stripping strings with a regex retried an unterminated string from every
    # later quote, quadratic in the file size (a 200 KB error.json took minutes, 2 MB hours).
    (tmp_path / "logs" / "attempt_0" / "0").mkdir(parents=True)
    (tmp_path / "logs" / "attempt_0" / "0" / "error.json").write_text(
        '{"message": {"message": "x", "extraInfo": {"py_callstack": "' + '\\"' * 1_000_000)
    (tmp_path / "rank0.log").write_text(OOM + "\n")
    a = _run_with_deadline(lambda: _analyze(tmp_path), 60)
    assert a.verdict.category == "gpu_oom"


@pytest.mark.parametrize("payload", [b"\x80\x02}r\x01", b"\x80\x02G\x40\x09", b"\x80\x02]q", b"\x80\x05\x95\x10"])
def test_truncated_pickles_are_problems_not_parser_failures(tmp_path, payload):
    # Found by fuzz/run.py after the loader became the pure-Python unpickler: a cut-off opcode argument raised
    # struct.error, which the loader did not translate.
    (tmp_path / "nccl_trace_rank_0").write_bytes(payload)
    a = _analyze(tmp_path)
    row = _row(a, "nccl_trace_rank_0")
    assert row["kind"] == "flight_recorder"
    assert row["problem"] and " failed: " not in row["problem"], row
