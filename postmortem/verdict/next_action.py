"""What to do now: the failure domain (workload, infrastructure) and the action (restart, change, drain, investigate)
that follow from the verdict's root mechanism, as data plus one pure function (`decide`).

The mapping reads the root's category, its rule and, for a plain crash, the exception's own words: a GPU Xid or an
NCCL transport error is the machine's or the network's; an OOM, a data error, a collective mismatch or an exception
in the training code is the workload's, and fails the same way until code, data or config change. A host is named
(and `drain` said) only when the fault is a host's: its ranks are the culprits, or a kernel/driver line on it says
so, and it is not every host of the job. Recurrence (postmortem.verdict.recurrence) turns `restart` into `change` when the
same root came back without progress in between.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

DOMAINS = ("workload", "infrastructure", "unknown", "none")
ACTIONS = ("restart", "change", "drain", "investigate", "none")

# category -> (domain, action). `drain` needs a host (or a culprit rank) at fault; without one it becomes
# NO_HOST_ACTION's entry. A category not listed (a plugin's) is ("unknown", "investigate").
CATEGORY_NEXT: dict[str, tuple[str, str]] = {
    "gpu_oom": ("workload", "change"),
    "host_oom": ("workload", "change"),
    "dataloader_failure": ("workload", "change"),
    "barrier_skew": ("workload", "change"),
    "straggler": ("workload", "change"),
    "logging_blocking": ("workload", "change"),
    "checkpoint_corruption": ("workload", "change"),
    "nan_inf": ("workload", "change"),
    "ddp_usage_error": ("workload", "change"),
    "rank_crash": ("workload", "change"),
    "nccl_error": ("infrastructure", "drain"),
    "gpu_hardware": ("infrastructure", "drain"),
    "collective_timeout": ("unknown", "investigate"),
    "unknown": ("unknown", "investigate"),
    "job_stopped": ("infrastructure", "restart"),
    "no_failure": ("none", "none"),
}

# An infrastructure fault with no host or rank to take out: a transport error seen by every rank is most often
# transient (restart), a GPU fault without a place is not actionable until found (investigate).
NO_HOST_ACTION: dict[str, str] = {"nccl_error": "restart", "gpu_hardware": "investigate"}

# Rules whose mechanism is not their category's usual one (stable rule ids).
RULE_NEXT: dict[str, tuple[str, str]] = {
    # another process holds the GPU's memory: the machine needs cleaning, not the job
    "gpu-memory-held-elsewhere": ("infrastructure", "drain"),
    # the very first collective never completed on any rank: network or setup, not one host
    "first-collective-never-completed": ("infrastructure", "investigate"),
    # no exception, no signal in the logs: what ended the rank is not known yet
    "rank-exited-silently": ("unknown", "investigate"),
    "bare-collective-timeout": ("unknown", "investigate"),
    # SIGBUS inside NCCL is the container's /dev/shm size: a setting of the job
    "fatal-signal-in-nccl/SIGBUS": ("workload", "change"),
}

# job_stopped's `reason` (the scheduler or a person ended the job): a time limit or a preemption stopped a healthy
# job, which resumes from its checkpoint; a failed node is taken out first.
REASON_NEXT: dict[str, tuple[str, str]] = {
    "time_limit": ("workload", "restart"),
    "preemption": ("infrastructure", "restart"),
    "eviction": ("infrastructure", "restart"),
    "node_failure": ("infrastructure", "drain"),
    "requeued": ("infrastructure", "restart"),     # the scheduler runs it again itself
    "cancelled": ("unknown", "investigate"),       # a person or a script: ask why before resubmitting
    "terminated": ("unknown", "investigate"),      # SIGTERM from a sender nothing names
}

# What the root's own words say about where the fault is, for a category whose mechanism they decide (a plain crash,
# an NCCL failure): (categories, pattern, domain, action, what). Bounded patterns (literal words, no nested
# repetition), checked in order; the first that matches decides.
MESSAGE_NEXT: tuple[tuple[tuple[str, ...], re.Pattern, str, str, str], ...] = (
    # NCCL ran out of GPU memory for its buffers, or the container's /dev/shm is too small: settings of the job
    (("nccl_error",), re.compile(r"(?i)out of memory|Failed to CUDA calloc|cudaMalloc\w{0,20} failed"),
     "workload", "change", "memory"),
    (("nccl_error",), re.compile(r"(?i)/dev/shm|posix_fallocate|shm_open|NCCL_SHM|--shm-size"),
     "workload", "change", "shm"),
)
# A plain crash whose exception says the machine or the network failed, not the code.
EXCEPTION_NEXT: tuple[tuple[re.Pattern, str, str, str], ...] = (
    (re.compile(r"(?i)uncorrectable ECC|ECC error|fallen off the bus|GPU is lost|unknown error.{0,40}CUDA driver"),
     "infrastructure", "drain", "gpu"),
    (re.compile(r"(?i)connectFullMesh failed|timed out connecting|Connection refused|Address already in use|"
                r"Name or service not known|Temporary failure in name resolution|No route to host|"
                r"Network is unreachable|rendezvous.{0,40}(?:timed out|closed)|RendezvousTimeoutError|"
                r"DistNetworkError|DistStoreError"),
     "infrastructure", "restart", "network"),
    (re.compile(r"(?i)No space left on device|Disk quota exceeded|Read-only file system|Stale file handle|"
                r"Input/output error"),
     "infrastructure", "investigate", "storage"),
)

LOW_CONFIDENCE = 0.4  # below this a change or a drain rests on too little: investigate first


@dataclass
class NextFacts:
    """What `decide` needs, as plain values (built from an Analysis by `facts_of`)."""
    category: str
    rule: str | None = None
    confidence: float = 0.0
    culprit_ranks: list[int] = field(default_factory=list)
    culprit_hosts: dict[int, str] = field(default_factory=dict)   # culprit rank -> its host, where known
    fault_hosts: list[str] = field(default_factory=list)          # hosts a kernel/driver line names as faulty
    fault_lines: list[str] = field(default_factory=list)          # `source:line` of kernel/driver fault lines
    all_hosts: list[str] = field(default_factory=list)            # every host of the job seen
    reason: str | None = None                                     # job_stopped's reason; a fatal signal's name
    exception: str = ""                                           # the root's exception type and message
    evidence: list[dict] = field(default_factory=list)            # the root's cited lines
    hedged_no_failure: bool = False                               # no_failure without an end-of-run marker
    recurrence: object = None                                     # postmortem.verdict.recurrence.Recurrence or None


@dataclass
class NextAction:
    """What to do now, with why and the lines each part rests on."""
    domain: str
    action: str
    hosts: list[str] = field(default_factory=list)
    why: str = ""
    ranks: list[int] = field(default_factory=list)      # the ranks whose hosts are at fault (drain)
    basis: str = ""                                       # which entry of the mapping decided: "category:gpu_oom" ...
    evidence: list[dict] = field(default_factory=list)  # {"supports": domain|action|hosts, source, line, rank, text}
    recurrence: dict | None = None                      # Recurrence.to_dict() when several attempts or runs were seen
    why_zh: str = ""

    def to_dict(self) -> dict:
        """JSON-contract dict (docs/json.md, `verdict.next`)."""
        return {"domain": self.domain, "action": self.action, "hosts": list(self.hosts), "why": self.why,
                "ranks": list(self.ranks), "basis": self.basis, "evidence": list(self.evidence),
                "recurrence": self.recurrence}

    def __repr__(self) -> str:
        where = f", hosts={self.hosts}" if self.hosts else ""
        return f"NextAction({self.action!r}, domain={self.domain!r}{where}, why={self.why!r})"


def base_entry(f: NextFacts) -> tuple[str, str, str, str | None]:
    """(domain, action, basis, what failed) from the mapping tables alone, before hosts, confidence and recurrence."""
    if f.category == "no_failure":
        return ("unknown", "investigate", "no_failure:hedged", None) if f.hedged_no_failure else \
            ("none", "none", "category:no_failure", None)
    if f.category == "job_stopped" and f.reason in REASON_NEXT:
        return (*REASON_NEXT[f.reason], f"reason:{f.reason}", None)
    if f.rule and f.reason and f"{f.rule}/{f.reason}" in RULE_NEXT:
        return (*RULE_NEXT[f"{f.rule}/{f.reason}"], f"rule:{f.rule}/{f.reason}", None)
    if f.rule in RULE_NEXT:
        return (*RULE_NEXT[f.rule], f"rule:{f.rule}", None)
    for cats, pattern, domain, action, what in MESSAGE_NEXT:
        if f.category in cats and f.exception and pattern.search(f.exception[:4000]):
            return domain, action, f"message:{what}", what
    if f.category == "rank_crash" and f.exception:
        for pattern, domain, action, what in EXCEPTION_NEXT:
            if pattern.search(f.exception[:2000]):
                return domain, action, f"exception:{what}", what
    domain, action = CATEGORY_NEXT.get(f.category, ("unknown", "investigate"))
    return domain, action, f"category:{f.category}", None


def decide(f: NextFacts) -> NextAction:
    """The next action for a verdict's facts (pure: no I/O, no tables)."""
    domain, action, basis, what = base_entry(f)
    hosts: list[str] = []
    ranks: list[int] = []
    if action == "drain":
        hosts, everyone = _hosts_at_fault(f)
        ranks = [] if everyone else sorted(f.culprit_ranks) if not hosts else \
            sorted(r for r, h in f.culprit_hosts.items() if h in hosts)
        if not hosts and not ranks and not f.fault_lines:
            action = NO_HOST_ACTION.get(f.category, "investigate")
    if action in ("change", "drain") and f.confidence < LOW_CONFIDENCE and f.category != "no_failure":
        action, hosts, ranks = "investigate", [], []
        basis += "+low_confidence"
    rec = f.recurrence
    if rec is not None and getattr(rec, "same_root", False) and not getattr(rec, "progressed", True) \
            and action == "restart":
        action = "change"
        basis += "+recurred"
    out = NextAction(domain=domain, action=action, hosts=hosts, ranks=ranks, basis=basis,
                     recurrence=rec.to_dict() if rec is not None and hasattr(rec, "to_dict") else None)
    out.evidence = _evidence(f, out)
    out.why = why_en(f, out, what)
    out.why_zh = why_zh(f, out, what)
    return out


def _hosts_at_fault(f: NextFacts) -> tuple[list[str], bool]:
    """(the hosts a driver/kernel line names, else the culprits' hosts; whether that is every host of a job that ran
    on several: a fault of all of them is no one host's, and none is named)."""
    named = sorted(set(f.fault_hosts)) or sorted({h for r, h in f.culprit_hosts.items() if r in f.culprit_ranks and h})
    if named and len(set(f.all_hosts)) > 1 and set(named) >= set(f.all_hosts):
        return [], True
    return named, False


def _evidence(f: NextFacts, out: NextAction) -> list[dict]:
    """The lines each part rests on: the root's first line for the domain, a line on each host at fault, and the
    later attempt's or run's line for a recurrence."""
    ev = [{"supports": "domain", **e} for e in f.evidence[:1]]
    if out.hosts:
        for h in out.hosts[:4]:
            line = next((e for e in f.evidence if e.get("host") == h), None)
            if line is not None:
                ev.append({"supports": "hosts", **line})
    rec = f.recurrence
    for e in (getattr(rec, "evidence", None) or [])[:2]:
        ev.append({"supports": "action", **e})
    return [{k: e.get(k) for k in ("supports", "source", "line", "rank", "text")} for e in ev]


DOMAIN_EN = {"workload": "a fault of the workload (code, data or configuration)",
             "infrastructure": "a fault of the machines or the network, not of the code",
             "unknown": "the inputs do not show whether the code or the machines failed", "none": "no failure"}
DOMAIN_ZH = {"workload": "工作负载（代码、数据或配置）的问题", "infrastructure": "机器或网络的故障，而不是代码的问题",
             "unknown": "输入中看不出是代码还是机器的问题", "none": "没有故障"}
WHAT_EN = {"memory": "NCCL could not get GPU memory for its buffers: a setting of the job (batch, buffers), not a "
           "broken machine", "shm": "the shared memory NCCL needs (/dev/shm) is too small or missing in the container: "
           "a setting of the job's container", "gpu": "the exception reports a GPU fault", "network": "the exception is a connection or rendezvous "
           "failure between the ranks, not an error of the training code", "storage": "the exception is the "
           "file system's (disk full, read-only, I/O error)"}
WHAT_ZH = {"memory": "NCCL 无法为它的缓冲区申请到 GPU 显存：这是任务的设置（批大小、缓冲区）问题，而不是机器坏了",
           "shm": "NCCL 需要的共享内存（/dev/shm）在容器中太小或不存在：这是任务容器的设置问题",
           "gpu": "异常报告的是 GPU 故障", "network": "异常是 rank 之间的连接或会合（rendezvous）失败，而不是训练代码的错误",
           "storage": "异常来自文件系统（磁盘已满、只读、I/O 错误）"}


def why_en(f: NextFacts, out: NextAction, what: str | None = None) -> str:
    """The action in one or two English sentences, from the same facts as why_zh."""
    from postmortem.verdict.sentences import ranks_phrase
    if out.action == "none":
        return "Nothing to do: the job shows no failure."
    head = f"{WHAT_EN[what][:1].upper()}{WHAT_EN[what][1:]}: " if what else \
        "The inputs do not show whether the code or the machines failed: " if out.domain == "unknown" else \
        f"This is {DOMAIN_EN[out.domain]}: "
    act = {
        "change": "it will fail the same way until the code, data or configuration changes; fix it (see the fix "
                  "above) before resubmitting.",
        "restart": "resubmitting unchanged (from the last checkpoint) may well succeed.",
        "investigate": "collect what the evidence gaps list (or rerun under `postmortem collect`) before deciding "
                       "between a restart and a change.",
    }
    if out.action == "drain":
        place = (("host " if len(out.hosts) == 1 else "hosts ") + ", ".join(out.hosts)) if out.hosts else \
            f"the node that ran {ranks_phrase(out.ranks)} (its name is not in the logs)" if out.ranks else \
            f"the node whose log {f.fault_lines[0]} reports the fault"
        text = head + f"take {place} out of the pool, then restart the job on healthy nodes."
    elif out.action == "investigate" and out.domain == "infrastructure":
        text = head + ("the inputs do not say which machine or link: run the checks the fix names on the job's "
                       "nodes, take out the one that fails, then restart.")
    else:
        text = head + act[out.action]
    if "+low_confidence" in out.basis:
        text += f" The verdict is only a lead (confidence {f.confidence:.2f}): check it before acting."
    rec = f.recurrence
    if rec is not None and getattr(rec, "said", ""):
        text += " " + rec.said
    return text


def why_zh(f: NextFacts, out: NextAction, what: str | None = None) -> str:
    """The action in Chinese, from the same facts as why_en (same hosts, ranks, numbers)."""
    from postmortem.verdict.sentences import zh_ranks
    if out.action == "none":
        return "无需处理：任务没有显示任何故障。"
    head = f"{WHAT_ZH[what]}：" if what else "输入中看不出是代码还是机器的问题：" if out.domain == "unknown" else \
        f"这是{DOMAIN_ZH[out.domain]}："
    act = {
        "change": "不修改代码、数据或配置，它会以同样的方式再次失败；请先按上面的修改建议修复，再重新提交。",
        "restart": "不做修改、从最近的检查点重新提交，很可能就能成功。",
        "investigate": "请先按“缺失的证据”收集信息（或用 `postmortem collect` 重新运行），再决定是重启还是修改。",
    }
    if out.action == "drain":
        place = ("节点 " + "、".join(out.hosts)) if out.hosts else \
            f"运行{zh_ranks(out.ranks)}的节点（日志中没有它的名字）" if out.ranks else \
            f"日志 {f.fault_lines[0]} 报告故障的那个节点"
        text = head + f"把{place}移出资源池，然后在健康的节点上重启任务。"
    elif out.action == "investigate" and out.domain == "infrastructure":
        text = head + "输入中看不出是哪台机器或哪条链路：请在任务的各节点上运行修改建议中的检查，下线出问题的那个，然后重启。"
    else:
        text = head + act[out.action]
    if "+low_confidence" in out.basis:
        text += f"结论只是一条线索（置信度 {f.confidence:.2f}）：行动前请先核实。"
    rec = f.recurrence
    if rec is not None and getattr(rec, "said_zh", ""):
        text += rec.said_zh
    return text


ACTION_WORDS = {"en": {"restart": "restart as is", "change": "change before resubmitting",
                       "drain": "drain, then restart", "investigate": "investigate first", "none": "nothing to do"},
                "zh": {"restart": "原样重启", "change": "修改后再提交", "drain": "下线故障节点后重启",
                       "investigate": "先调查", "none": "无需处理"}}
DOMAIN_WORDS = {"en": {"workload": "workload", "infrastructure": "infrastructure", "unknown": "unknown domain",
                       "none": "no failure"},
                "zh": {"workload": "工作负载", "infrastructure": "基础设施", "unknown": "无法判断", "none": "没有故障"}}


def headline(nxt: NextAction, lang: str = "en") -> str:
    """`change the workload first (workload)` in `lang`."""
    words = ACTION_WORDS.get(lang, ACTION_WORDS["en"])
    dom = DOMAIN_WORDS.get(lang, DOMAIN_WORDS["en"])
    sep = "（" if lang == "zh" else " ("
    end = "）" if lang == "zh" else ")"
    return f"{words.get(nxt.action, nxt.action)}{sep}{dom.get(nxt.domain, nxt.domain)}{end}"
