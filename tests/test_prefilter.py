"""The bytes-level prefilter (parsers/prefilter.py): exact on small files, bounded summaries on big ones."""
from __future__ import annotations

import gzip
import os

import pytest

from postmortem.parsers import parse_source, prefilter, textlog
from postmortem.parsers import literal_scan, scan_limits
from postmortem.ingest import textio
from postmortem.ingest.discover import discover

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared")
TEXT_KINDS = ("rank_log", "nccl_log", "unknown", "dmesg", "pyspy", "nvidia_smi", "stack_dump")
BAR = "Steps: {pct:3d}%|{bar:<10}| {n}/20000 [1:02:03<2:03:04,  2.71it/s, loss=2.31, lr=0.0003]"


def _line_by_line(monkeypatch):
    def refuse(*a, **k):
        raise prefilter.NotStreamable("test")
    monkeypatch.setattr(prefilter, "LineScanner", refuse)


def _rows(res):
    return {t: [tuple(sorted((k, str(v)) for k, v in r.items())) for r in rows] for t, rows in res.rows.items()}


def _fixture_sources():
    dirs = [os.path.join(ROOT, "samples"), os.path.join(ROOT, "tests", "rules"), os.path.join(ROOT, "tests", "fixtures"),
            os.path.join(SHARED, "captured"), os.path.join(SHARED, "corpus")]
    out = []
    for d in dirs:
        if os.path.isdir(d):
            out += [s for s in discover(d) if s.kind in TEXT_KINDS and not s.problem]
    return out


def test_small_files_give_exactly_what_a_line_by_line_reader_gives(monkeypatch):
    sources = _fixture_sources()
    assert len(sources) > 50
    fast = [textlog.parse_textlog(s) for s in sources]
    _line_by_line(monkeypatch)
    slow = [textlog.parse_textlog(s) for s in sources]
    for s, a, b in zip(sources, fast, slow):
        assert _rows(a) == _rows(b), s.source
        assert (a.lines, a.problems) == (b.lines, b.problems), s.source


def _bar(n):
    pct = n * 100 // 20000
    return "\r" + BAR.format(pct=pct, bar="█" * (pct // 10), n=n)


def _big_log(tmp_path, name="rank5.log", steps=20000, tail=""):
    """A raw rank log: NCCL init lines, 20,000 tqdm redraws on one physical line, then the tail."""
    head = "".join(f"node-1:4242:4300 [5] NCCL INFO Channel {c:02d}/0 : 5[5] -> 6[6] via P2P/IPC/read\n" for c in range(32))
    head += "node-1:4242:4300 [5] NCCL INFO comm 0x5a rank 5 nranks 8 cudaDev 5 busId 9a000 - Init COMPLETE\n"
    body = "".join(_bar(n) for n in range(1, steps + 1))
    p = tmp_path / name
    p.write_text(head + body + tail, encoding="utf-8")
    assert p.stat().st_size > prefilter.EXACT_JOB_BYTES  # more than a job of this one file reads exactly
    return p


def _summarised(path) -> "Source":
    """The source of a file of a job with many files: its share of the exact budget is nothing."""
    [src] = discover(str(path))
    src.exact_bytes = 0
    return src


def test_big_file_progress_is_sampled_but_the_last_step_and_the_glued_error_are_exact(tmp_path):
    tail = ("[rank5]:[E601 12:53:10.735151211 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043 "
            "milliseconds before timing out.\n")
    p = _big_log(tmp_path, tail=tail)
    [src] = discover(str(p))
    res = parse_source(src)
    steps = res.rows["steps"]
    assert len(steps) <= scan_limits.MAX_SAMPLES + 4           # bounded, however long the run
    assert steps[-1]["step"] == 20000 and steps[-1]["rank"] == 5
    assert [s["step"] for s in steps] == sorted(s["step"] for s in steps)
    wd = [e for e in res.rows["events"] if e["kind"] == "watchdog_timeout"]
    assert len(wd) == 1 and wd[0]["details"]["seq"] == 77       # glued to a 1.9 MB line: a line reader cut it off
    assert src.source in res.meta["summarised"]


def test_nccl_topology_lines_are_counted_and_init_lines_kept(tmp_path):
    p = _big_log(tmp_path)
    [src] = discover(str(p))
    res = parse_source(src)
    assert res.meta["nccl_counts"][src.source]["channel"] == 32
    [init] = res.rows["nccl"]
    assert init["nccl_rank"] == 5 and init["nranks"] == 8


def test_repeated_redraws_of_an_event_bar_are_one_run(tmp_path):
    sampling = "".join(f"\rSampling: {k * 2:3d}%|{'█' * (k // 5):<10}| {k}/50 [00:{k:02d}<00:10,  1.90s/it]"
                       for k in range(51))
    p = _big_log(tmp_path, tail="\n" + sampling + "\n")
    res = parse_source(_summarised(p))
    starts = [e for e in res.rows["events"] if e["kind"] == "sample_start"]
    assert 1 <= len(starts) <= 3
    sample_steps = [s for s in res.rows["steps"] if s["phase"] == "sample"]
    assert sample_steps[-1]["step"] == 50
    # and the training bar's state right before the sampling phase is there
    train = [s for s in res.rows["steps"] if s["phase"] == "train"]
    assert train[-1]["step"] == 20000 and train[-1]["line"] < sample_steps[0]["line"]


def test_shape_keys_keep_every_trigger():
    line = b"12:03:04 step 1234 | [rank3]:[E0601 1.2 ProcessGroupNCCL.cpp:632] Watchdog caught \xe2\x96\x88 x"
    key = prefilter.normalise(line)
    for trigger in ("Watchdog caught", "ProcessGroupNCCL.cpp:", "[rank"):
        assert prefilter.normalise(trigger) in key
    assert prefilter.normalise(b"a 1\t2#b") == b"ab"


def test_gzip_big_file_and_utf16_file(tmp_path):
    p = _big_log(tmp_path, tail="RuntimeError: CUDA error: an illegal memory access was encountered\n")
    gz = tmp_path / "rank6.log.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    p.unlink()
    [src] = discover(str(gz))
    res = parse_source(src)
    assert any(e["kind"] == "cuda_error" for e in res.rows["events"])
    assert res.rows["steps"][-1]["step"] == 20000
    u16 = tmp_path / "win.log"
    u16.write_bytes("step 3 loss 1.5\r\nRuntimeError: CUDA error: an illegal memory access was encountered\r\n"
                    .encode("utf-16"))
    [src] = discover(str(u16))
    res = parse_source(src)
    assert any(e["kind"] == "cuda_error" for e in res.rows["events"])


def test_nul_ansi_and_crlf_in_a_big_file(tmp_path):
    noise = "".join(f"\x1b[32mINFO\x1b[0m heartbeat {i}\r\n" for i in range(20000))
    p = tmp_path / "x.log"
    p.write_bytes((noise + "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
                   "shared memory (shm).\x00\r\n").encode())
    [src] = discover(str(p))
    res = parse_source(src)
    [ev] = [e for e in res.rows["events"] if e["kind"] == "dataloader"]
    assert ev["line"] == 20001 and "\x00" not in ev["message"] and res.lines == 20001


def test_a_line_without_breaks_is_cut_not_held(tmp_path, monkeypatch):
    monkeypatch.setattr(scan_limits, "LONG_LINE", 1 << 16)
    monkeypatch.setattr(scan_limits, "CHUNK", 1 << 14)
    p = tmp_path / "runaway.log"
    p.write_bytes(b"x" * (1 << 18) + b"\nRuntimeError: CUDA error: an illegal memory access was encountered\n")
    stats = textio.ReadStats()
    sc = prefilter.LineScanner(str(p), stats, p.stat().st_size, textlog._prefilter_triggers(), exact_bytes=0)
    items = list(sc)
    assert [ln for ln, _, _ in items] == [2] and stats.lines == 2
    assert stats.truncated_lines == 1 and any("truncated" in pr for pr in stats.problems)


@pytest.mark.parametrize("text", ["", "\n", "a\nb", "a\nb\n"])
def test_line_counts_match_the_line_reader(tmp_path, text):
    p = tmp_path / "c.log"
    p.write_text(text)
    stats = textio.ReadStats()
    list(prefilter.LineScanner(str(p), stats, len(text), textlog._prefilter_triggers()))
    assert stats.lines == textio.count_lines(str(p))


def _scan_items(path, fast: bool, monkeypatch):
    trig = textlog._prefilter_triggers()
    if not fast:
        monkeypatch.setattr(trig, "fast_events", lambda: None)
    stats = textio.ReadStats()
    items = list(prefilter.LineScanner(str(path), stats, os.path.getsize(path), trig))
    monkeypatch.undo()
    return items, stats.lines


@pytest.mark.skipif(not literal_scan.available(), reason="hyperscan not installed")
@pytest.mark.parametrize("glued", ["", "Traceback (most recent call last):", "RuntimeError: CUDA out of memory.",
                                  "[W reducer.cpp:1] Warning: x", "Loss is NaN at step 12, TIMEOUT"])
def test_long_bar_lines_skip_normalising_and_give_what_the_key_path_gives(tmp_path, monkeypatch, glued):
    """The fast matcher judges a long redraw line on its raw bytes; an event anywhere in it still sends it down the
    exact path, so the handed-over event lines are the same with and without Hyperscan, and so is the last step
    (the progress samples in between may differ: one path samples by bar bytes, the other by file bytes)."""
    body = "".join(_bar(n) for n in range(1, 10001))
    mid = "".join(_bar(n) for n in range(10001, 20001))
    p = tmp_path / "rank5.log"
    p.write_text("start\n" + body + ("\r" + glued if glued else "") + mid + "\nend step 3\n", encoding="utf-8")
    trig = textlog._prefilter_triggers()
    fast, lines_fast = _scan_items(p, True, monkeypatch)
    slow, lines_slow = _scan_items(p, False, monkeypatch)
    assert [i for i in fast if not i[2]] == [i for i in slow if not i[2]] and lines_fast == lines_slow == 3
    assert len(fast) <= scan_limits.MAX_SAMPLES + 6
    for items in (fast, slow):
        assert any("20000/20000" in text for _, text, steps_only in items if steps_only)  # the last step, exact
    if glued and "Warning" not in glued:  # a bare warning far from any traceback frame is no event in a big file
        assert any(glued.split(":")[0] in text for _, text, steps_only in fast if not steps_only)
    assert trig.fast_events() is not None


def _random_log(rng) -> bytes:
    """Bars (runs long enough to be spans), events glued or not, sampling bars, NCCL lines, CRLF, blank lines."""
    parts = []
    step = 0
    for _ in range(rng.randint(20, 60)):
        pick = rng.random()
        if pick < 0.35:
            for _ in range(rng.choice([3, 200, 2500])):
                step += 1
                parts.append(_bar(step % 20000 or 1))
            parts.append(rng.choice(["\n", "", "\r\n"]))
        elif pick < 0.5:
            parts.append(rng.choice([
                "[rank3]:[E601 12:53:10.7 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation "
                "timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
                "600043 milliseconds before timing out.\n",
                "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    main()\n"
                "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
                "{'loss': 0.25, 'learning_rate': 1e-05, 'epoch': 0.5, 'step': %d}\n" % step,
                "config: sample_every=2000 eval_every=500\n"]))
        elif pick < 0.65:
            redraws = [f"\rSampling: {k * 2:3d}%|{'#' * (k // 5):<10}| {k}/50 [00:{k:02d}<00:10]"
                       for k in range(rng.randint(1, 51))]
            for _ in range(rng.choice([0, 0, 1, 2])):  # what makes a bar line more than one run of one bar
                redraws.insert(rng.randrange(len(redraws) + 1), rng.choice([
                    "\r", "\r   ", "\r123", "\rValidation: 10%|#  | 1/9 [00:01<00:08]", "\rloss is nan",
                    "\r\x0c", "\rSampling: done", "\rSampling:  5%|#  | 1/20 [00:01<00:08]RuntimeError: boom"]))
            parts.append("".join(redraws) + "\n")
        elif pick < 0.8:
            parts.append("".join(f"node-1:42:43 [3] NCCL INFO Channel {c:02d}/0 : 3[3] -> 4[4] via P2P/IPC\n"
                                 for c in range(rng.randint(1, 40))))
        elif pick < 0.9:
            parts.append("\n" * rng.randint(1, 3))
        else:
            parts.append("x" * rng.randint(1, 90000) + rng.choice(["\n", "Error: glued at the end\n"]))
    return "".join(parts).encode()


@pytest.mark.skipif(not literal_scan.available(), reason="hyperscan not installed")
@pytest.mark.parametrize("seed", range(24))
def test_random_big_logs_give_the_same_event_lines_on_the_fast_and_the_exact_path(tmp_path, monkeypatch, seed):
    import random
    p = tmp_path / "rank3.log"
    p.write_bytes(_random_log(random.Random(seed)))
    monkeypatch.setattr(scan_limits, "CHUNK", 1 << 16)           # many block boundaries, lines cut between redraws
    trig = textlog._prefilter_triggers()
    outs = []
    for fast in (True, False):
        if not fast:
            monkeypatch.setattr(trig, "fast_events", lambda: None)
            monkeypatch.setattr(prefilter.LineScanner, "_one_bar_run", lambda self, line: None)
            monkeypatch.setattr(scan_limits, "SPAN_MIN", 1 << 40)  # and every line copied out, as before spans
        stats = textio.ReadStats()
        sc = prefilter.LineScanner(str(p), stats, p.stat().st_size, trig, exact_bytes=0)
        items = list(sc)
        outs.append(([i for i in items if not i[2]], stats.lines, sc.nccl_counts))
        assert len([i for i in items if i[2]]) <= 4 * scan_limits.MAX_SAMPLES + 2 * len(outs[-1][0])
    # whole-block scanning hands over exactly the event lines a line-by-line judge does (it counts NCCL INFO lines
    # in the head only)
    assert outs[0][:2] == outs[1][:2]
    assert all(outs[0][2][k] <= outs[1][2][k] for k in outs[1][2])
    assert outs[0][1] == textio.count_lines(str(p))


@pytest.mark.parametrize("seed", range(40))
def test_head_lines_decoded_at_once_equal_a_decode_per_line(tmp_path, seed):
    """head_lines decodes the head in one go where nothing needs cleaning: the same strings as the per-line path,
    whatever the head holds (long lines cut at 1024 bytes, broken or cut UTF-8, CRs, escapes, NULs)."""
    import random
    rnd = random.Random(seed)
    pieces = [b"[rank3]: step 12 loss 0.5", "é€日本".encode(), b"\xe2\x82", b"\xff", b"x" * 1030, b"\r", b"\x1b[31m",
              b"\x00", b"NCCL INFO Channel 00/0 : 0[0] -> 1[1]", b" " * 3, "€".encode() * 400]
    weights = [20, 3, 1, 1, 1, 2, 0 if seed % 2 else 1, 0 if seed % 3 else 1, 10, 3, 1]
    lines = [b"".join(rnd.choices(pieces, weights, k=rnd.randint(0, 6))) for _ in range(rnd.randint(1, 60))]
    data = b"\n".join(lines) + (b"\n" if seed % 4 else b"")
    path = tmp_path / "rank0.log"
    path.write_bytes(data)
    scanner = prefilter.LineScanner(str(path), textio.ReadStats(), len(data), textlog._prefilter_triggers())
    try:
        for n in (1, 7, 400):
            want = [textio.clean(p[:1024].decode("utf-8", "replace")) for p in data.split(b"\n", n)[:n]]
            assert scanner.head_lines(n) == want
    finally:
        scanner.close()


@pytest.mark.parametrize("seed", range(12))
def test_every_handed_over_line_is_numbered_where_it_is(tmp_path, monkeypatch, seed):
    """Sampled progress/step lines and event lines of the whole-block scan carry their own line numbers (the counts
    between them are summed span by span, not recounted from a region's start)."""
    import random
    p = tmp_path / "rank3.log"
    data = _random_log(random.Random(seed))
    p.write_bytes(data)
    monkeypatch.setattr(scan_limits, "CHUNK", 1 << 16)
    monkeypatch.setattr(scan_limits, "MAX_SAMPLES", 64)  # many stride marks per region
    sc = prefilter.LineScanner(str(p), textio.ReadStats(), len(data), textlog._prefilter_triggers(), exact_bytes=0)
    lines = data.decode("utf-8", "replace").split("\n")
    items = list(sc)
    assert sum(1 for i in items if i[2]) > 8
    for lineno, text, _ in items:
        tail = text.replace(textio.TRUNCATION_MARK, "")[-16:].rstrip("\r")
        assert tail in lines[lineno - 1], (lineno, text[:80])


@pytest.mark.parametrize("seed", range(30))
def test_cap_key_equals_its_definition(seed):
    """_cap_key skips the rank search for shapes without `rank`: same keys as the plain
    definition (stream prefix, else the first `rank N` within 200 bytes) on random error-flood lines."""
    import random
    rnd = random.Random(seed)

    def reference(key, line):
        head = line[:200]
        sid = prefilter._stream_id(head)
        if sid and not sid.isalpha():
            return key, sid
        m = prefilter._RANK_DIGITS_RE.search(head)
        return key, sid, m and m.group(1)
    heads = [b"[rank3]:", b"[default0]:", b"[1,3]<stdout>:", b"[abc]:", b" 3: ", b"12: ", b"  ", b"", b"[",
             b"[x" * 30 + b"]:", b"   7 : ", b"\t4: "]
    bodies = [b"File \"/w/train.py\", line 3, in step", b"RuntimeError: boom", b"[Rank 7] Watchdog caught",
              b"RANK=12 timed out", b"ra nk 5", b"x" * 190 + b" rank 9", b"rank", b"Traceback (most recent call last):",
              b"loss.backward()", "é rank 4".encode()]
    for _ in range(300):
        line = rnd.choice(heads) + rnd.choice([b"", b" "]) + rnd.choice(bodies) + rnd.choice([b"", b" seq 1007"])
        key = line.translate(None, prefilter.DELETE)
        assert prefilter._cap_key(key, line) == reference(key, line), line


@pytest.mark.parametrize("seed", range(10))
def test_rfind_pair_equals_bytes_rfind(seed):
    """The last `%|` / `{'` before an error line is found by its first byte (memrchr): same answer as bytes.rfind
    on random buffers, ranges and runs of lone first bytes."""
    import random
    rnd = random.Random(seed)
    for _ in range(3000):
        n = rnd.randint(0, 400)
        alphabet = rnd.choice([b"%|{'ab", b"%%%%%a|", b"ab{'", b"abcdef", b"%" * 20 + b"|"])
        buf = bytes(rnd.choice(alphabet) for _ in range(n))
        a, b = rnd.randint(0, n), rnd.randint(0, n + 3)
        for pair in (b"%|", b"{'"):
            assert prefilter._rfind_pair(buf, pair, a, b) == buf.rfind(pair, a, b), (buf, pair, a, b)


def test_exact_shares_split_the_budget_and_leave_small_files_whole():
    sizes = [10, 5000, 10, 300, 10 ** 6, 10 ** 6]
    shares = prefilter.exact_shares(sizes, budget=4000)
    assert sum(shares) <= 4000
    assert shares[0] == shares[2] == 10 and shares[3] == 300      # smaller than a share: read whole
    assert max(shares[1], shares[4], shares[5]) - min(shares[1], shares[4], shares[5]) <= 1  # the rest split evenly
    assert shares[1] < 5000
    assert prefilter.exact_shares(sizes, budget=10 ** 9) == sizes    # a big enough budget reads everything
    many = prefilter.exact_shares([64 * 1024] * 16384)
    assert max(many) * 16384 <= prefilter.EXACT_JOB_BYTES and max(many) < 64


def test_a_small_file_of_a_big_job_is_summarised_like_a_big_one(tmp_path):
    """What a file keeps exactly is its share of the job's budget, not its size: a 20 KB rank log of a job of
    thousands of files has its NCCL INFO lines counted and its progress sampled, as a big log does."""
    lines = [f"node-1:42:43 [3] NCCL INFO Channel {c % 32:02d}/0 : 3[3] -> 4[4] via P2P/IPC/read" for c in range(200)]
    lines += [f"{{'loss': {1 + i / 1000:.4f}, 'learning_rate': 1e-05, 'epoch': {i / 100:.2f}}}" for i in range(200)]
    lines.append("RuntimeError: CUDA error: an illegal memory access was encountered")
    p = tmp_path / "rank3.log"
    p.write_text("\n".join(lines) + "\n")
    [alone] = discover(str(p))
    res_alone = parse_source(alone)
    assert len(res_alone.rows["nccl"]) == 200 and len(res_alone.rows["steps"]) == 200  # a job of one file: exact
    many = [alone] + [discover(str(p))[0] for _ in range(4095)]
    textlog.share_exact_budget(many)
    assert alone.exact_bytes < 200
    res = parse_source(alone)
    assert "nccl" not in res.rows and res.meta["nccl_counts"][alone.source]["channel"] == 200
    assert len(res.rows["steps"]) <= scan_limits.MAX_SAMPLES + 2 and res.rows["steps"][-1]["loss"] == 1.199
    assert [e["kind"] for e in res.rows["events"]] == ["cuda_error"] and res.lines == 401


@pytest.mark.parametrize("seed", range(16))
def test_the_exact_part_is_what_a_line_reader_gives_for_those_lines(tmp_path, monkeypatch, seed):
    """A file read partly exactly: every line of the exact part (the lines that start in the file's last
    `exact_bytes`) is handed over as the whole-file exact path hands it over, after what the summarised part holds
    back; line numbers and the line count stay right whatever the share."""
    import random
    rnd = random.Random(seed)
    data = _random_log(rnd)
    p = tmp_path / "rank3.log"
    p.write_bytes(data)
    monkeypatch.setattr(scan_limits, "CHUNK", 1 << 16)
    trig = textlog._prefilter_triggers()
    share = rnd.randrange(0, len(data) + 1)
    whole = list(prefilter.LineScanner(str(p), textio.ReadStats(), len(data), trig, exact_bytes=len(data)))
    stats = textio.ReadStats()
    part = list(prefilter.LineScanner(str(p), stats, len(data), trig, exact_bytes=share))
    assert stats.lines == textio.count_lines(str(p))
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10]
    first_exact = next((n + 1 for n, off in enumerate(starts) if off >= len(data) - share and off < len(data)), None)
    if first_exact is None:
        return
    exact_items = [it for it in whole if it[0] >= first_exact]
    plain_before = [it for it in whole if it[0] < first_exact]  # a line reader's "line before an event"
    got = [it for it in part if it[0] >= first_exact]
    assert got[-len(exact_items):] == exact_items if exact_items else True
    assert len(got) - len(exact_items) <= len(plain_before)
    lines = data.decode("utf-8", "replace").split("\n")
    for lineno, text, _ in part:
        tail = text.replace(textio.TRUNCATION_MARK, "")[-16:].rstrip("\r")
        assert tail in lines[lineno - 1], (lineno, text[:80])


def test_the_last_lines_are_those_of_a_split_of_the_whole_window():
    """prefilter._last_parts splits only the last n lines off a file's end: the same lines as splitting it all."""
    import random
    from postmortem.parsers.prefilter import _last_parts

    def whole_split(data, n, whole):
        parts = data.split(b"\n")
        if parts and parts[-1] == b"":
            parts.pop()
        if not whole and parts:
            parts.pop(0)  # the first line is cut
        return parts[-n:]
    rng = random.Random(3)
    for _ in range(20000):
        data = bytes(rng.choice(b"ab\n") for _ in range(rng.randrange(0, 14)))
        n, whole = rng.randrange(0, 6), rng.random() < 0.5
        assert _last_parts(data, n, whole) == whole_split(data, n, whole), (data, n, whole)


def test_last_split_is_the_tail_of_a_whole_split():
    """scan_text.last_split (a file's last lines for its prefix scheme and last lines) equals splitting it all."""
    import random
    from postmortem.parsers.scan_text import last_split
    rng = random.Random(5)
    for _ in range(20000):
        data = bytes(rng.choice(b"ab\n") for _ in range(rng.randrange(0, 14)))
        n, drop_first = rng.randrange(0, 6), rng.random() < 0.5
        parts = data.split(b"\n")
        if drop_first and parts:
            parts.pop(0)
        assert last_split(data, n, drop_first) == parts[-n:], (data, n, drop_first)


def test_a_small_file_is_not_opened_again_for_its_last_lines(tmp_path, monkeypatch):
    """A log with no prefix in its head learns one from its end: from the bytes the scanner holds, not a new read."""
    from postmortem.ingest.discover import discover
    from postmortem.parsers import textlog
    lines = [f"loading shard {i}" for i in range(450)] + \
        [f"2026-11-29 06:00:{i:02d} | trainer-3 | step {i} loss 0.5" for i in range(30)]
    (tmp_path / "rank3.log").write_text("\n".join(lines) + "\n")
    src = discover(str(tmp_path))[0]
    reads = []
    real = textlog._end_lines
    monkeypatch.setattr(textlog, "_end_lines", lambda path, n, whole=None: reads.append(whole) or real(path, n, whole))
    textlog.parse_textlog(src)
    assert reads and reads[0] is not None                       # the scanner's bytes were handed over
    assert real(src.path, 20, reads[0]) == real(src.path, 20)   # and give the lines a new read gives
