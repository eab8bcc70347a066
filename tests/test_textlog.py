"""The text-log parser on real captured output and on the line shapes FORMATS.md documents."""
from __future__ import annotations

import gzip
import os

import postmortem
from postmortem.parsers import parse_source
from postmortem.ingest.discover import discover

SHARED = os.path.join(os.path.dirname(__file__), "rules")


def _parse(tmp_path, name, text, mode="w"):
    p = tmp_path / name
    if mode == "wb":
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    [src] = discover(str(p))
    return parse_source(src)


def test_rank_prefixed_traceback_and_torchrun_root_cause():
    res = parse_source(discover(os.path.join(SHARED, "first-exception", "fire", "torchrun_record_raise.txt"))[0])
    tbs = res.rows["tracebacks"]
    val = [t for t in tbs if t["exc_type"] == "ValueError"][0]
    assert val["rank"] == 1 and val["exc_message"] == "corrupt sample at step 3"
    assert val["last_user_frame"]["func"] == "load_batch"
    roots = [e for e in res.rows["events"] if e["kind"] == "torchrun_failure" and e["details"]["root"]]
    assert [e["rank"] for e in roots] == [1]


def test_progress_bar_glued_to_watchdog_line_is_split(tmp_path):
    line = ("Running tokenizer on dataset:   9%|███▊   | 280000/2969526 [29:55<4:48:08, 155.57 examples/s]"
            "[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800328 milliseconds before timing out.\n")
    res = _parse(tmp_path, "c.log", line)
    wd = [e for e in res.rows["events"] if e["kind"] == "watchdog_timeout"][0]
    assert wd["rank"] == 2 and wd["details"]["seq"] == 2 and wd["details"]["timeout_ms"] == 1800000
    step = res.rows["steps"][0]
    assert step["rank"] is None and step["phase"] == "data" and step["step"] == 280000
    assert res.rows["collectives"][0]["op"] == "ALLREDUCE"


def test_carriage_return_segments_nul_and_ansi(tmp_path):
    data = (b"\x1b[32mEpoch 0:  10%|#  | 1/10 [00:00<00:01, 9.0it/s]\rEpoch 0:  20%|## | 2/10 [00:00<00:01, 9.0it/s]\n"
            b"ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\x00\n")
    res = _parse(tmp_path, "x.log", data, mode="wb")
    assert res.lines == 2
    assert [s["step"] for s in res.rows["steps"]] == [2] or [s["step"] for s in res.rows["steps"]][-1] == 2
    assert any(e["kind"] == "dataloader" for e in res.rows["events"])


def test_srun_labels_give_ranks(tmp_path):
    text = "".join(f"{r}: step {s} loss 1.0\n" for s in range(3) for r in range(2))
    text += "1: RuntimeError: boom\n"
    res = _parse(tmp_path, "slurm-123.out", text)
    assert {s["rank"] for s in res.rows["steps"]} == {0, 1}
    assert [t["rank"] for t in res.rows["tracebacks"]] == [1]


def test_pdsh_host_prefix_and_nccl_rank_mapping(tmp_path):
    text = "".join(
        f"node-{h}: node-{h}:{100 + r}:{200 + r} [{r}] NCCL INFO comm 0x55 rank {2 * h + r} nranks 4 cudaDev {r} busId 1000 - Init COMPLETE\n"
        for h in range(2) for r in range(2))
    text += "node-1: node-1:101:201 [1] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'\n"
    p = tmp_path / "ds.log"
    p.write_text(text)
    a = postmortem.analyze(str(p))
    warn = a.tables.events[a.tables.events["kind"] == "nccl_warn"].iloc[0]
    assert warn["host"] == "node-1" and int(warn["rank"]) == 3
    assert a.tables.meta["world_size"] == 4 and not a.tables.meta["world_size_inferred"]


def test_cjk_lines_and_gzip(tmp_path):
    raw = "[Rank 3] 处理最后一个批次 (62/62)...\n[Rank 3] RuntimeError: 训练失败\n".encode()
    p = tmp_path / "rank3.log.gz"
    p.write_bytes(gzip.compress(raw))
    [src] = discover(str(p))
    assert src.compression == "gzip" and src.rank == 3
    res = parse_source(src)
    assert res.rows["tracebacks"][0]["exc_message"] == "训练失败" and res.lines == 2


def test_interleaved_unprefixed_frames_form_one_traceback(tmp_path):
    text = ('  File "a.py", line 3, in f\n  File "a.py", line 3, in f\n    x()\n'
            "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=21, OpType=BROADCAST)\n")
    res = _parse(tmp_path, "c.log", text)
    assert len(res.rows["tracebacks"]) == 1 and len(res.rows["tracebacks"][0]["frames"]) == 2


# ---- per-line helpers with literal gates decide as their plain regexes

_GATE_LINES = [
    "config: per_device_train_batch_size=8 eval_every=1250 save_every=12500", "timeout: WorkNCCL(x) Timeout(ms)=600000",
    "watchdog timeout then timeout=5", "--num_workers 8", "EPOCHS: 3", "Save_Steps = '500'", "PERIOD:", "x every y",
    "interval\u00a05", "ba\u0131ch_size=4", "\u017fave_\u017fteps=5", "TIMEOUT=\u0661\u0662", "plain line", "",
    "[Rank 3] x", "[PG 0 Rank 12] x", "GLOBAL_RANK: 7, MEMBER: 8/16", "rank=5 ready", "(rank:4)", "RANK 3",
    "[7] is setting up NCCL communicator and retrieving ncclUniqueId from [0]", "Rank 3/8 ok", "[INFO] BANK 3",
    "see 0x7f3a /usr/lib/x.so at 10.0.0.1:29500 after 12.5 s", "no digits here", "v1.2.3 3.4", "a/b c.d 0x",
]


def _variants(line):
    return [line, line.upper(), line.lower(), line.swapcase(), line + " \u2588", line.replace("s", "\u017f"),
            line.replace("k", "\u212a"), line.replace("i", "\u0131")]


def test_config_hint_equals_its_regex():
    from postmortem.parsers.textlog import CONFIG_HINT_RE, config_hint
    for line in _GATE_LINES:
        for v in _variants(line):
            assert config_hint(v) == bool(CONFIG_HINT_RE.search(v)), v


def test_message_rank_and_template_equal_the_plain_loops():
    from postmortem.parsers.textlog import MSG_RANK_RES, TEMPLATE_MASKS, message_rank, template_of
    for line in _GATE_LINES:
        for v in _variants(line):
            want = None
            if "ank" in v or "RANK" in v or v.startswith("["):
                want = next((int(m.group("r")) for m in (rx.search(v) for rx in MSG_RANK_RES) if m), None)
            assert message_rank(v) == want, v
            t = v[:300]
            for rx, mask in TEMPLATE_MASKS:
                t = rx.sub(mask, t)
            assert template_of(v) == t, v


def test_a_traceback_printed_one_level_in_still_ends_at_its_exception_line(tmp_path):
    """A rank prefix that leaves a space (`3:  Traceback`, as srun --label writes a line torch already indented)
    shifts every line of the traceback by it; the exception line is found after that shift is taken off (the
    real ms-swift traceback of ../shared/corpus, re-prefixed)."""
    text = ("3:  Traceback (most recent call last):\n"
            '3:    File "/x/transformers/trainer.py", line 3157, in _save_checkpoint\n'
            "3:      os.renames(output_dir, checkpoint_dir)\n"
            '3:    File "<frozen os>", line 272, in renames\n'
            "3:  OSError: [Errno 39] Directory not empty: '/out/tmp-checkpoint-x' -> '/out/checkpoint-500'\n")
    [tb] = _parse(tmp_path, "console.log", text).rows["tracebacks"]
    assert (tb["rank"], tb["exc_type"]) == (3, "OSError") and tb["exc_message"].startswith("[Errno 39]")
