"""Checkpoint rules: corrupt/truncated checkpoints, joined with disk-full errors and save/load events across ranks."""
from __future__ import annotations

import pandas as pd

from postmortem.verdict.findings import Finding
from postmortem.verdict.sentences import clip, ranks_phrase, sentence_case
from postmortem.rules import facts, rule


@rule(id="checkpoint-corrupt", title="Checkpoint corrupt, truncated or read while being written",
      category="checkpoint_corruption", severity="critical",
      description="Loading a checkpoint failed because the file is incomplete or inconsistent; joined with ENOSPC "
                  "during a save (truncated), saves and loads of the same path on different ranks (read during "
                  "write), or several ranks saving the same path (concurrent writers).",
      remediation="Save from rank 0 only, to a temporary name then os.replace() it into place; make other ranks "
                  "wait (dist.barrier()) before loading; check free disk space before saving; delete the partial "
                  "file before resuming.",
      false_positives=("A corrupt download (not written by this job).",))
def checkpoint_corrupt(tables):
    bad = facts.fatal(tables, facts.ev(tables, "checkpoint_error"))
    tb = tables.tracebacks
    enospc = facts.ev(tables, "enospc")
    # ENOSPC raised inside torch.save / serialization is itself a truncated write.
    save_tb = tb[tb.apply(lambda r: "no space" in str(r["exc_message"]).lower() and any(
        w in facts.frames_text(r["frames"]) for w in ("serialization", "save", "write_record", "torch.save")), axis=1)] \
        if len(tb) else tb
    saves, loads = facts.ev(tables, "checkpoint_save"), facts.ev(tables, "checkpoint_load")
    if bad.empty and save_tb.empty:
        return _load_failed_before_save(tables, saves, loads)
    why, conf = [], 0.8
    writer_fail = bad[bad["details"].map(lambda a: "writer" in a)] if len(bad) else bad
    shell_full = enospc[~enospc["message"].str.contains("NCCL WARN|posix_fallocate|/dev/shm", regex=True)]
    if len(save_tb) or len(writer_fail) or (len(shell_full) and len(bad)):
        why.append("a save ran out of disk space (ENOSPC), leaving a partial file that a later load failed to read")
        conf = 0.92
    race = _read_during_write(saves, loads)
    if race:
        why.append(race)
        conf = 0.92
    writers = saves.groupby(saves["details"].map(lambda a: a.get("path")))["rank"].nunique() if len(saves) else pd.Series(dtype=int)
    multi = [p for p, n in writers.items() if p and n > 1]
    if multi:
        why.append(f"{int(writers[multi[0]])} ranks saved the same path {multi[0]} (concurrent writers)")
        conf = 0.9
    if bad.empty:
        why.append("the checkpoint save itself failed part-way")
    elif not why:
        why.append("the checkpoint file is incomplete or inconsistent: " + clip(str(bad.iloc[0]["message"]), 200))
    ev_rows = pd.concat([save_tb.rename(columns={"exc_message": "message"})[["source", "line", "rank", "message"]]
                         if len(save_tb) else bad.head(0)[["source", "line", "rank", "message"]],
                         bad[["source", "line", "rank", "message"]], shell_full[["source", "line", "rank", "message"]]])
    culprit = facts.ranks_of(bad)  # every rank that read the broken file
    first = bad.iloc[0] if len(bad) else None
    return [Finding(rule="checkpoint-corrupt", category="checkpoint_corruption", confidence=conf, severity="critical",
                    title="Checkpoint incomplete or corrupt",
                    explanation=sentence_case("; ".join(why)) + ".",
                    remediation="Write checkpoints atomically (save to path.tmp on rank 0, then os.replace), "
                                "dist.barrier() before other ranks load, keep the previous checkpoint until the new "
                                "one is complete, and monitor disk space; delete the partial file and resume from "
                                "the last good one.",
                    culprit_ranks=culprit, evidence=facts.evidence_from(ev_rows, 6),
                    order=facts.order_key(first) if first is not None else (1, float("inf")),
                    explains=("rank_crash", "collective_timeout"))]


def _read_during_write(saves: pd.DataFrame, loads: pd.DataFrame) -> str | None:
    """A load of a path on one rank while another rank was saving it (same path, different ranks)."""
    if saves.empty or loads.empty:
        return None
    for _, s in saves.iterrows():
        path = s["details"].get("path")
        if not path:
            continue
        same = loads[loads["details"].map(lambda a: a.get("path") == path) & (loads["rank"] != s["rank"])]
        if len(same):
            r = same.iloc[0]
            return (f"rank {s['rank']} was still saving {path} when {ranks_phrase(same['rank'].dropna())} loaded it "
                    "(read during write), so the readers got a partial file")
    return None


def _load_failed_before_save(tables, saves: pd.DataFrame, loads: pd.DataFrame) -> list[Finding]:
    """A load of a checkpoint path that was logged before the save of that path had even begun (one process read
    what another was still writing: HF Trainer's `Loading best model from X` on a rank that did not wait for rank
    0's `Saving model checkpoint to X`), after which the job died with an exception: the reader got a partial or
    missing file, whatever the error says (`Can't load config`, file not found)."""
    if saves.empty or loads.empty:
        return []
    tb = tables.tracebacks
    for _, ld in loads.iterrows():
        path = ld["details"].get("path")
        if not path:
            continue
        later = saves[(saves["source"] == ld["source"]) & (saves["line"] > ld["line"]) &
                      saves["details"].map(lambda a: a.get("path") == path)]
        if later.empty:
            continue
        sv = later.iloc[0]
        died = tb[(tb["source"] == ld["source"]) & (tb["line"] > ld["line"])] if len(tb) else tb
        if died.empty:
            continue
        st = tables.steps
        if len(st) and ((st["source"] == ld["source"]) & (st["line"] > ld["line"]) & (st["phase"] == "train") &
                        (st["line"] < died.iloc[0]["line"])).any():
            continue  # training went on between them: a resume that loaded an old file, not a read of a new one
        return [Finding(rule="checkpoint-corrupt", category="checkpoint_corruption", confidence=0.7,
                        severity="critical", title="Checkpoint read before it was written",
                        explanation=f"A load of {path} was logged (line {facts._int(ld['line'])}) before the save of "
                                    f"the same path had begun (line {facts._int(sv['line'])}): one process read the "
                                    "checkpoint while another was still writing it, and the job then died with an "
                                    "exception, the reader having found a partial or missing file.",
                        remediation="Make every process wait for the writer before it loads (dist.barrier() after the "
                                    "save on rank 0, or load only after the save is complete); write atomically (to "
                                    "path.tmp, then os.replace).",
                        evidence=facts.evidence_from(pd.concat([ld.to_frame().T, sv.to_frame().T]), 2)
                        + [facts.tb_evidence(died.iloc[0])],
                        order=facts.order_key(ld), explains=("rank_crash", "collective_timeout"))]
    return []
