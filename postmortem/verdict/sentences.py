"""Verdict sentences: one sentence a person would write (what, where, why) from a finding's fields."""
from __future__ import annotations

import re

from postmortem.verdict.findings import Finding

# A dotted class name, at most 16 parts of at most 100 characters: unbounded, every start of a long dotted token
# walked to its end.
_EXC_RE = re.compile(r"\b((?:[A-Za-z_]\w{0,100}\.){0,16}[A-Z]\w{0,100}(?:Error|Exception|Interrupt|Exit))\b")


def _between(text: str, start: str, end: str, last: bool) -> str | None:
    """The text between the first `start` and the last (`last`) or first following `end`, at least one character
    (`start(.+)end` and `start(.+?)end` of a regex, found with two string searches, not from every `start`)."""
    i = text.find(start)
    if i < 0:
        return None
    a = i + len(start)
    j = text.rfind(end, a + 1) if last else text.find(end, a + 1)
    return text[a:j] if j >= 0 else None


def straggler_work(f: Finding) -> tuple[str, str | None]:
    """What a straggler finding says the rank did (logger, stuck, busy or outside) and the work its title names."""
    what = _between(f.title, "busy (", ") while", last=True)
    if what is None:
        what = _between(f.title, "stuck in ", " while", last=False)
    if f.category == "logging_blocking":
        return "logger", None
    if what is not None and f.rule == "odd-rank-out-stack":
        return "stuck", what
    if what is not None and not what.startswith("non-collective work"):
        return "busy", what
    return "outside", None


PHASE_WORDS = {"train": "during training", "eval": "during evaluation", "sample": "while sampling",
               "checkpoint": "while saving or loading a checkpoint", "init": "during start-up"}


def clip(text, limit: int) -> str:
    """`text` cut to at most `limit` characters at a word boundary, with an ellipsis when anything was cut (never
    mid-word: `Timed ou`)."""
    text = "" if text is None else str(text)
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space >= limit * 0.6:   # a word boundary not too far back; else a long token (a path) is cut, and says so
        cut = cut[:space]
    return cut.rstrip(" ,;:([{") + " …"


def sentence_case(text: str) -> str:
    """First letter upper-cased, the rest untouched (str.capitalize() would lower-case names like PytorchStreamReader)."""
    return text[:1].upper() + text[1:]


def as_int(value) -> int | None:
    """An int, or None for None, NaN and pd.NA (a rule may hand over a missing value of any of these kinds)."""
    try:
        return None if value is None or value != value else int(value)
    except (TypeError, ValueError):   # pd.NA refuses comparison and int()
        return None


def ranks_phrase(ranks, capital: bool = False, none: str = "a rank") -> str:
    """`rank 3`, `ranks 1, 2 and 3`, `ranks 0-7`; `none` when the list is empty."""
    rs = sorted({r for r in map(as_int, ranks) if r is not None})
    if not rs:
        text = none
    elif len(rs) == 1:
        text = f"rank {rs[0]}"
    elif len(rs) > 3:   # runs compressed: ranks 0-3, 5 and 8-511
        runs, start = [], rs[0]
        for a, b in zip(rs, rs[1:] + [None]):
            if b != a + 1:
                runs.append(f"{start}-{a}" if a > start else str(start))
                start = b
        text = f"ranks {runs[0]}" if len(runs) == 1 else f"ranks {', '.join(runs[:-1])} and {runs[-1]}"
    else:
        text = f"ranks {', '.join(map(str, rs[:-1]))} and {rs[-1]}"
    return sentence_case(text) if capital else text


def _step(f: Finding) -> str:
    step = as_int(f.step)
    # the last step the rank reported: the failure came after it (a rank that reports every k steps was further on)
    return f" after step {step}" if step is not None else ""


def _phase(f: Finding) -> str:
    return f" {PHASE_WORDS[f.phase]}" if f.phase in PHASE_WORDS else ""


def exception_name(f: Finding) -> str | None:
    """The exception class a finding names (in its title or cited lines), or None."""
    for text in [f.title] + [e.text for e in f.evidence]:
        m = _EXC_RE.search(text or "")
        if m:
            return m.group(1)
    return None


def _others(f: Finding) -> str:
    return ranks_phrase(f.affected_ranks, none="the other ranks")


def _own_words(f: Finding, zh: bool = False) -> str:
    """` ('data check failed: ...')`: the culprit's own last line as its finding cites it ("" when none is cited)."""
    for e in f.evidence:
        text = str(e.text)
        if e.rank in f.culprit_ranks and "after logging: " in text:
            quote = clip(text.split("after logging: ", 1)[1], 140)
            return f"（“{quote}”）" if zh else f" ('{quote}')"
    return ""


def finding_sentence(f: Finding) -> str:
    """The finding as one sentence: what happened, on which rank, at which step or phase, and why."""
    who, whose = ranks_phrase(f.culprit_ranks, capital=True), ranks_phrase(f.culprit_ranks)
    hedge = "probably " if f.confidence < 0.5 else ""
    cat, step, phase = f.category, _step(f), _phase(f)
    if cat == "gpu_oom":
        tail = "; the job died without an out-of-memory message, at the step where that pass runs" \
            if f.rule == "death-at-periodic-step" else ""
        return f"{who} {hedge}ran out of GPU memory{phase}{step}{tail}."
    if cat == "host_oom":
        return f"The kernel's out-of-memory killer {hedge}ended {whose}{step} because the host ran out of RAM."
    if cat == "dataloader_failure":
        if "raised" in f.title and "DataLoader worker" in f.title:  # the data code's own exception, not a death
            exc = re.search(r"raised (\S+)", f.title)
            return (f"The data code of {whose} {hedge}raised {exc.group(1) if exc else 'an exception'} in a "
                    f"DataLoader worker{step}, and the rank stopped.")
        shm = " (out of shared memory)" if "shared memory" in f.title else ""
        return f"A DataLoader worker of {whose} {hedge}died{shm}{step}, and the rank stopped with it."
    if cat == "barrier_skew":
        if f.rule == "uneven-progress":
            stop = f" (the last step reported was {as_int(f.step)})" if as_int(f.step) is not None else ""
            return (f"{who} {hedge}ran a different number of batches than {_others(f)}{stop}, so a collective "
                    "was left waiting for a partner that never called it.")
        if f.rule == "peer-exited-while-waiting":
            return f"{who} {hedge}left the training loop{step} while {_others(f)} waited for it in a collective."
        if f.rule == "collective-after-training-end":
            return (f"{who if f.culprit_ranks else 'A rank'} {hedge}called a collective after training had ended, "
                    "which the ranks that had already finished never joined.")
        return (f"{who} {hedge}called a different collective than {_others(f)}{step}, so the collectives could "
                "not match.")
    if f.rule == "tracker-ended-the-run":
        return f"{who if f.culprit_ranks else 'A rank'} {hedge}died in the experiment tracker's start-up{step}: its " \
               "service process did not answer."
    if cat in ("straggler", "logging_blocking"):
        how, work = straggler_work(f)
        what = {"logger": "was blocked inside the logger", "stuck": f"was stuck in {work}",
                "busy": f"was busy with {work}", "outside": "was busy with work outside the collectives"}[how]
        return f"{who} {hedge}{what}{step} while {_others(f)} waited for it in a collective."
    if cat == "checkpoint_corruption":
        return (f"{who} {hedge}failed to load a checkpoint{step} because the file was incomplete or corrupt "
                "(partially written, or read while being written).")
    if cat == "nccl_error":
        if f.rule == "first-collective-never-completed":
            return (f"The job's first collective {hedge}never completed on any rank, so the ranks could not "
                    "reach each other (network, transport or rendezvous setup).")
        return f"NCCL communication {hedge}failed on {whose}{step}, and the job could not continue."
    if cat == "gpu_hardware":
        app = ", an Xid error that is likely caused by the application" if "application" in f.title else ""
        return f"The GPU of {whose} {hedge}reported a hardware fault{app}{step}."
    if cat == "nan_inf":
        on = f" on {whose}" if f.culprit_ranks else ""
        return f"The loss {hedge}became NaN or Inf{on}{step}, and training could not recover."
    if cat == "ddp_usage_error":
        return (f"DDP {hedge}stopped {whose if f.culprit_ranks else 'the job'}{step} because some parameters got no "
                "gradient in an iteration (unused or mismatched parameters).")
    if cat == "rank_crash" and f.rule == "rank-exited-silently":
        code = re.search(r"exited \(([^)]*)\)", f.title)
        after = f", and {_others(f)} lost it" if f.affected_ranks else ""
        return f"{who} {hedge}exited ({code.group(1) if code else 'non-zero'}) without an exception{step}{after}."
    if cat == "rank_crash" and "logged an error and exited" in f.title:
        said = _own_words(f)
        after = f", and {_others(f)} lost it" if f.affected_ranks else ""
        return f"{who} {hedge}logged an error and exited{step}{said}{after}."
    if cat == "rank_crash":
        exc = exception_name(f)
        with_exc = f" with {exc}" if exc else " with an exception"
        after = f", and {_others(f)} stopped because of it" if f.affected_ranks else ""
        return f"{who} {hedge}crashed{with_exc}{phase}{step}{after}."
    if cat == "collective_timeout":
        lag = re.search(r"rank ([\d, ]+) lagged", f.title)
        why = f"; rank {lag.group(1)} lagged behind" if lag else "; nothing in the logs shows why"
        where = f" on {ranks_phrase(f.affected_ranks)}" if f.affected_ranks else ""
        return f"A collective timed out{where}{step}{why}."
    if cat == "job_stopped":
        return stopped_sentence(f)
    if cat == "no_failure":
        return sentence_case(f.title.rstrip(".")) + "."
    return f"Something failed{' on ' + whose if f.culprit_ranks else ''}{step}, but the evidence does not say what."


STOP_WORDS = {"time_limit": "the scheduler's time limit", "preemption": "a preemption",
              "cancelled": "a cancellation", "node_failure": "a node failure", "eviction": "a Kubernetes eviction",
              "requeued": "a requeue", "terminated": "a stop signal from outside"}
STOP_WORDS_ZH = {"time_limit": "调度器的时间限制", "preemption": "抢占", "cancelled": "取消（scancel、Ctrl-C 或会话关闭）",
                 "node_failure": "节点故障", "eviction": "Kubernetes 驱逐", "requeued": "重新排队",
                 "terminated": "来自外部的终止信号"}


def stopped_sentence(f: Finding) -> str:
    """A job_stopped finding as one sentence: what ended the job, and whether it was healthy then."""
    what = STOP_WORDS.get(f.reason or "", "the scheduler or a person")
    step = _step(f)
    if not f.explains:  # a stop that cut a job already in trouble: the trouble is the claim
        return f"The job had probably stopped making progress or failed before {what} ended it{step}."
    hedge = "probably " if f.confidence < 0.5 else ""
    return f"The job was {hedge}ended by {what}{step} while it was training normally; the code did not fail."


def stopped_sentence_zh(f: Finding) -> str:
    """stopped_sentence in Chinese."""
    what = STOP_WORDS_ZH.get(f.reason or "", "调度器或人为操作")
    step = f"在第 {as_int(f.step)} 步之后" if as_int(f.step) is not None else ""
    if not f.explains:
        return f"任务{step}被{what}终止之前很可能已经停止推进或已经出错。"
    return f"任务{step}被{what}终止，当时训练正常进行；代码本身没有出错。"


def zh_ranks(ranks, none: str = "某个 rank") -> str:
    """`rank 0`, `rank 1、2、3`, `rank 0-7` (Chinese list separators); `none` for an empty list."""
    text = ranks_phrase(ranks, none="")
    if not text:
        return none
    return text.replace("ranks ", "rank ").replace(" and ", "、").replace(", ", "、")


ZH_PHASE = {"train": "训练时", "eval": "评估时", "sample": "采样/生成时", "checkpoint": "保存或加载检查点时",
            "init": "启动时"}


def finding_sentence_zh(f: Finding) -> str:
    """finding_sentence in Chinese (the HTML report with --lang zh)."""
    who = zh_ranks(f.culprit_ranks)
    others = zh_ranks(f.affected_ranks, none="其他 rank")
    hedge = "很可能" if f.confidence < 0.5 else ""
    step = f"在第 {as_int(f.step)} 步之后" if as_int(f.step) is not None else ""
    phase = ZH_PHASE.get(f.phase or "", "")
    if phase and not step:
        phase = "在" + phase
    cat = f.category
    if cat == "gpu_oom":
        tail = "；任务在该步悄然退出，没有留下显存不足的报错" if f.rule == "death-at-periodic-step" else ""
        return f"{who}{hedge}{step}{phase}GPU 显存不足{tail}。"
    if cat == "host_oom":
        return f"主机内存耗尽，内核 OOM killer {hedge}{step}杀死了{who}。"
    if cat == "dataloader_failure":
        if "raised" in f.title and "DataLoader worker" in f.title:
            exc = re.search(r"raised (\S+)", f.title)
            return f"{who}的数据代码{hedge}{step}在 DataLoader 工作进程中抛出了 {exc.group(1) if exc else '异常'}，该 rank 随之停止。"
        shm = "（共享内存不足）" if "shared memory" in f.title else ""
        return f"{who}的一个 DataLoader 工作进程{hedge}{step}退出{shm}，该 rank 随之停止。"
    if cat == "barrier_skew":
        if f.rule == "uneven-progress":
            stop = f"（最后报告的是第 {as_int(f.step)} 步）" if as_int(f.step) is not None else ""
            return f"{who}{hedge}执行的批次数与{others}不同{stop}，导致某个集合通信一直等不到对端。"
        if f.rule == "peer-exited-while-waiting":
            return f"{who}{hedge}{step}提前退出了训练循环，而{others}仍在集合通信中等待它。"
        if f.rule == "collective-after-training-end":
            return f"{who}{hedge}在训练结束后又调用了集合通信，已经结束的 rank 不会再参与。"
        return f"{who}{hedge}{step}调用的集合通信与{others}不同，双方无法匹配。"
    if f.rule == "tracker-ended-the-run":
        return f"{who if f.culprit_ranks else '某个 rank'}{hedge}{step}在实验跟踪器（wandb）启动时出错退出：它的服务进程没有响应。"
    if cat in ("straggler", "logging_blocking"):
        how, work = straggler_work(f)
        what = {"logger": "阻塞在日志记录器中", "stuck": f"卡在 {work}", "busy": f"忙于 {work}",
                "outside": "忙于集合通信之外的工作"}[how]
        return f"{who}{hedge}{step}{what}，而{others}在集合通信中等待它。"
    if cat == "checkpoint_corruption":
        return f"{who}{hedge}{step}加载检查点失败：文件不完整或已损坏（未写完，或在写入时被读取）。"
    if cat == "nccl_error":
        if f.rule == "first-collective-never-completed":
            return f"任务的第一个集合通信{hedge}在所有 rank 上都没有完成，各 rank 之间无法连通（网络、传输层或初始化配置问题）。"
        return f"{who}上的 NCCL 通信{hedge}{step}失败，任务无法继续。"
    if cat == "gpu_hardware":
        return f"{who}的 GPU {hedge}{step}报告了硬件故障。"
    if cat == "nan_inf":
        on = f"{who}上的" if f.culprit_ranks else ""
        return f"{on}损失{hedge}{step}变为 NaN 或 Inf，训练无法恢复。"
    if cat == "ddp_usage_error":
        return f"DDP {hedge}{step}报错停止：某次迭代中有参数没有得到梯度（未使用或不匹配的参数）。"
    if cat == "rank_crash" and f.rule == "rank-exited-silently":
        code = re.search(r"exited \(([^)]*)\)", f.title)
        return f"{who}{hedge}{step}未抛出异常就退出了（{code.group(1) if code else '非零退出'}）" + (
            f"，{others}随之失去连接" if f.affected_ranks else "") + "。"
    if cat == "rank_crash" and "logged an error and exited" in f.title:
        return f"{who}{hedge}{step}记录了一条错误后自行退出{_own_words(f, zh=True)}" + (
            f"，{others}随之失去连接" if f.affected_ranks else "") + "。"
    if cat == "rank_crash":
        exc = exception_name(f)
        after = f"，{others}随之停止" if f.affected_ranks else ""
        return f"{who}{hedge}{step}{phase}因 {exc or '异常'} 崩溃{after}。"
    if cat == "collective_timeout":
        where = f"{zh_ranks(f.affected_ranks)}上的" if f.affected_ranks else ""
        return f"{where}集合通信{step}超时；日志中看不出原因。"
    if cat == "job_stopped":
        return stopped_sentence_zh(f)
    if cat == "no_failure":
        return "输入中没有故障信号（没有异常、超时、被杀或错误行）。"
    return f"{'在' + who + '上' if f.culprit_ranks else ''}{step}发生了故障，但证据不足以说明原因。"


_CJK_LATIN = re.compile(r"(?<=[A-Za-z0-9_)\]])(?=[\u4e00-\u9fff])|(?<=[\u4e00-\u9fff])(?=[A-Za-z0-9_(\[])")


def sentence(f: Finding, lang: str = "en") -> str:
    """finding_sentence in the report's language (Chinese with a space between Han and Latin text)."""
    return _CJK_LATIN.sub(" ", finding_sentence_zh(f)) if lang == "zh" else finding_sentence(f)


def verdict_sentence(root: Finding) -> str:
    """The verdict's summary for its root finding (Verdict.summary, the JSON `verdict.summary`)."""
    return finding_sentence(root)


def describe(analysis) -> str:
    """repr(Analysis): the verdict, the culprit and counts, in a few lines."""
    v = analysis.verdict
    t = analysis.tables
    ws = t.meta.get("world_size")
    head = f"<postmortem.Analysis of {analysis.input!r}>"
    if v is None:
        return head + "\nno readable input files"
    lines = [head, f"verdict:  {v.category} (confidence {v.confidence:.2f}) {v.summary}"]
    if v.culprit_ranks:
        lines.append(f"culprit:  {ranks_phrase(v.culprit_ranks)}" + (f", step {v.step}" if v.step is not None else ""))
    lines.append(f"input:    {len(t.sources)} files, world size {ws if ws is not None else '?'}, "
                 f"{len(analysis.finding_list)} findings, {len(analysis.evidence_gaps)} evidence gaps")
    lines.append("tables:   " + ", ".join(f"{n} ({len(df)})" for n, df in t.frames.items()))
    return "\n".join(lines)
