"""What to change, from the root mechanism of the verdict (not from whichever rule happened to rank first).

One failure is often found by several rules: barrier skew from uneven batch counts shows as ranks waiting at
different call sites (the stacks) and as ranks that ended at different steps (the step counts). The stacks rule
may rank first, but its advice ("call the same collectives in the same order") is the symptom's; the remedy is the
mechanism's (even shards, drop_last, Join). `advise()` picks the mechanism from all findings and returns its fix
and why, in English and Chinese. Categories, culprits and confidences are never changed here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from postmortem.verdict.findings import Finding

# Rules whose finding establishes that ranks ran different numbers of iterations (stable rule ids).
UNEVEN_RULES = ("uneven-progress", "peer-exited-while-waiting")

# Fix texts per mechanism: (English, Chinese). A mechanism with no entry keeps the root rule's own English fix.
MECHANISM_FIX: dict[str, tuple[str, str]] = {
    "uneven_batches": (
        "Give every rank the same number of batches: use DistributedSampler(..., drop_last=True) so each rank "
        "gets an even shard (or pad the dataset to a multiple of the world size); where inputs cannot be evened, "
        "wrap the loop in torch.distributed.algorithms.Join([model, optimizer]) (DDP's join()) so a rank that runs "
        "out of data shadows the others' collectives; never let one rank break out of the loop early.",
        "让每个 rank 执行相同数量的批次：使用 DistributedSampler(..., drop_last=True) 让各 rank 分到等长的数据分片"
        "（或把数据集填充到 world size 的整数倍）；无法对齐的输入，用 torch.distributed.algorithms.Join([model, "
        "optimizer])（即 DDP 的 join()）包住训练循环，让提前用完数据的 rank 陪同其他 rank 完成集合通信；"
        "不要让某个 rank 单独提前退出循环。"),
    "divergent_collectives": (
        "Make every rank call the same collectives in the same order: no collective under a rank- or "
        "data-dependent condition (broadcast the decision from rank 0 instead), and call helpers that synchronise "
        "(saving, evaluation, metric logging with sync_dist) on every rank.",
        "让每个 rank 以相同顺序调用相同的集合通信：不要在依赖 rank 或数据的条件分支里调用集合通信（改由 rank 0 "
        "广播决定）；会做同步的函数（保存、评估、带 sync_dist 的指标记录）要在所有 rank 上调用。"),
}

# Chinese fixes for the other variants, keyed by "rule/category" (a rule may conclude several categories) or by the
# rule id alone for its registered category. Looked up after the mechanism.
VARIANT_FIX_ZH: dict[str, str] = {
    "bare-collective-timeout": "集合通信超时而日志未显示原因：下次运行时开启 NCCL_DEBUG=INFO 与 flight recorder，并在卡住时用 "
                               "py-spy dump 抓取每个 rank 的调用栈（或用 postmortem collect 运行任务），找出没有到达该"
                               "集合通信的 rank。",
    "checkpoint-corrupt": "原子地写检查点（rank 0 先写到 path.tmp，再 os.replace）；其他 rank 加载前先 dist.barrier()；"
                          "新检查点写完前保留上一个；监控磁盘空间；删除残缺文件后从上一个完好的检查点恢复。",
    "collective-after-training-end": "让训练结束后会做同步的函数（保存检查点、评估）在所有 rank 上调用，只用 rank 判断"
                                     "包住写文件这一步；或在只由 rank 0 执行的工作之前销毁进程组。",
    "collective-mismatch": "让每个 rank 以相同顺序发起相同的集合通信：不要在依赖 rank 或数据的条件分支里调用集合通信"
                           "（日志键、按时间触发的保存、提前退出）；需要分支时由 rank 0 广播决定。",
    "collective-mismatch/ddp_usage_error": "让每个 rank 每一步都运行相同的模块（被跳过的分支用零权重的虚拟输入运行），"
                                           "或谨慎使用 find_unused_parameters=True / static_graph。",
    "dataloader-worker-died": "调大 /dev/shm（docker --shm-size 或 --ipc=host）或减少 num_workers；检查数据集代码中的"
                              "崩溃与内存增长；用 num_workers=0 复现以看到真正的异常。",
    "ddp-unused-parameters": "让每次迭代的所有参数都参与损失计算（删除未使用的层），或在 DDP 中设置 "
                             "find_unused_parameters=True（有开销）；若参数集合随迭代变化，请使用 static_graph 或"
                             "拆分模型。",
    "death-at-periodic-step": "降低采样/评估阶段的批大小（按每张卡计算），在 torch.no_grad()/inference_mode 下运行，"
                              "并先释放训练图（del loss; torch.cuda.empty_cache()）；下次运行保留每个 rank 的日志"
                              "（torchrun --log-dir）和 nvidia-smi 记录以确认。",
    "first-collective-never-completed": "在同一组 GPU 上运行 nccl-tests（all_reduce_perf）；依次尝试 NCCL_P2P_DISABLE=1、"
                                        "NCCL_SHM_DISABLE=1 / NCCL_IB_DISABLE=1 找出坏掉的通路；检查 MASTER_ADDR/"
                                        "MASTER_PORT、防火墙与 NCCL_SOCKET_IFNAME；设置 NCCL_DEBUG=INFO 查看每对 GPU "
                                        "使用的传输方式。",
    "first-exception": "修复最先抛出的异常（见证据中的调用栈）；其他 rank 的超时与断连是它的连锁反应。",
    "flight-recorder-first-pending": "查看肇事 rank 在那次集合通信之前在做什么（它的调用栈和最后的日志）。",
    "flight-recorder-first-pending/barrier_skew": "让每个 rank 以相同顺序调用相同的集合通信：各 rank 的代码路径出现了"
                                                  "分歧。",
    "gpu-hardware-fault": "将该 GPU/节点下线并附上 Xid/ECC 日志交给运维检查；从最近的检查点在健康节点上恢复。",
    "gpu-memory-held-elsewhere": "找出并结束占用该 GPU 的进程（nvidia-smi --query-compute-apps、fuser -v /dev/nvidia*；"
                                 "容器内需在宿主机上查看），或重置 GPU/重启实例后再运行。",
    "gpu-oom/phase:sample": "降低采样/生成的批大小（按每张卡计算）或采样批次数，在 torch.no_grad()/inference_mode 下采样，"
                            "并先释放训练图（del loss; torch.cuda.empty_cache()）。",
    "gpu-oom/phase:eval": "用 torch.no_grad()/inference_mode 包住评估，降低评估批大小，把大的指标计算移到 CPU。",
    "gpu-oom/phase:checkpoint": "从 CPU 副本保存（state_dict 放到 CPU / FSDP offload_to_cpu），并逐个 rank 保存。",
    "gpu-oom": "降低出错阶段的批大小（按每张卡计算）或序列长度，启用梯度检查点/混合精度，在评估与采样中使用 "
               "torch.no_grad()，必要时设置 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True 以减少碎片。",
    "host-oom-killer": "降低主机内存占用：减少 DataLoader num_workers 与预取、避免每个 rank 各自把整个数据集读入内存"
                       "（使用内存映射或共享内存），或申请内存更大的节点。",
    "tracker-ended-the-run": "调大 wandb 的初始化超时（wandb.init(settings=wandb.Settings(init_timeout=300))），只在一个 "
                             "rank 上初始化，或用 WANDB_MODE=offline 运行、之后再同步；用 WANDB_MODE=disabled 可以确认问题"
                             "出在 wandb。",
    "logger-blocks-loop": "不要让日志阻塞训练循环：循环内用 wandb.log(..., commit=False)，每 N 步提交一次；"
                          "WANDB_MODE=offline 之后再 wandb sync；修复代理/网络；tqdm 锁死锁可设 "
                          "tqdm.tqdm.monitor_interval = 0。",
    "odd-rank-out-stack/logging_blocking": "不要让日志阻塞训练循环：只在 rank 0 记录、降低频率，wandb 使用离线模式"
                                           "（WANDB_MODE=offline，之后再同步）。",
    "nan-loss": "降低学习率或加入预热，开启梯度裁剪，检查输入数据中的 NaN/Inf，使用 bf16 或损失缩放；"
                "用 torch.autograd.set_detect_anomaly(True) 定位第一次出现 NaN 的算子。",
    "nccl-failure": "先看第一条 NCCL WARN：/dev/shm 太小就用 docker --shm-size / --ipc=host 或 NCCL_SHM_DISABLE=1；"
                    "检查出错 rank 所在节点的网络与 IB/RoCE 链路、NCCL 版本一致性及 NCCL_SOCKET_IFNAME；"
                    "开启 NCCL_DEBUG=INFO 重新运行以看到具体的传输错误。",
    "odd-rank-out-stack/straggler": "查明该 rank 为何卡在调用栈所示的位置（锁、sleep、死循环、缓慢的 I/O）并修复；"
                                    "这是真正的卡死，调大超时只会推迟同样的失败。",
    "odd-rank-out-stack/dataloader_failure": "同时抓取 DataLoader 工作进程的调用栈（py-spy dump --subprocesses）；"
                                             "用 num_workers=0 确认，或改用 multiprocessing_context='spawn' / "
                                             "persistent_workers，并升级 PyTorch。",
    "odd-rank-out-stack/collective_timeout": "抓取每个 rank 的调用栈（对每个进程 py-spy dump），找出不在集合通信中等待的那个 "
                                             "rank。",
    "peer-exited-while-waiting": "确保所有 rank 执行相同次数的迭代后再一起退出（DistributedSampler(drop_last=True)、"
                                 "填充数据或 DDP join()），不要让某个 rank 提前 break 或 return。",
    "rank-exited-silently": "查明该 rank 为何退出：代码里带错误码的显式退出、原生代码崩溃（用 PYTHONFAULTHANDLER=1 "
                            "查看位置），或被外部杀死（dmesg、调度器日志）。",
    "straggler-busy-rank": "把这段只在一个 rank 上执行的长时间工作移出集合通信的等待窗口：离线或在 init_process_group "
                           "之前完成并缓存，或把工作分摊到所有 rank；确属必要的长时间工作才需要调大超时"
                           "（init_process_group(timeout=...) / --ddp_timeout）。",
    "uneven-progress": MECHANISM_FIX["uneven_batches"][1],
    "end-state-asymmetry": "比较每个 rank 的结束方式：其余 rank 的错误都源于这个与众不同的 rank。若它独自停在一个集合通信里，"
                           "说明它调用了其他 rank 没有调用的集合通信（只在 rank 0 上执行的保存、评估或日志里含有同步）；"
                           "若它在其他 rank 等待时提前退出，说明它跑的批次更少（drop_last=True、均匀分片、"
                           "torch.distributed.algorithms.Join）；若它在忙别的工作，把耗时工作移出集合通信路径。",
    "fatal-signal-in-nccl": "SIGBUS：给容器更大的共享内存（docker --shm-size=8g 或 --ipc=host），或用 NCCL_SHM_DISABLE=1 "
                            "验证；其他信号：在同一批节点上运行 nccl-tests，核对 NCCL、CUDA 驱动与 PyTorch 版本是否匹配。",
    "workers-stopped-after-silent-death": "在该节点上运行 `dmesg -T | grep -i 'killed process'` 确认；降低主机内存峰值"
                                          "（low_cpu_mem_usage、内存映射的 safetensors、减少同时加载权重的本地 rank），"
                                          "或换内存更大的节点。",
    "store-barrier-short": "查明缺席的 rank 在创建进程组之前在做什么（它最后的日志、py-spy dump）：把只在 rank 0 上执行的工作"
                          "（wandb.init、下载、预处理）移到进程组创建之后，或给它设置超时。",
    "loss-scale-collapse": "改用 bf16（无需损失缩放），降低学习率或延长 warmup，裁剪梯度；在一个 step 上用 "
                           "torch.autograd.set_detect_anomaly 找出在 fp16 下溢出的算子。",
}


# The last resort for a variant without a text of its own (a plugin rule, a category a rule seldom concludes): what
# the category's failure usually needs, in Chinese. Every category has one.
CATEGORY_FIX_ZH: dict[str, str] = {
    "gpu_oom": VARIANT_FIX_ZH["gpu-oom"],
    "host_oom": VARIANT_FIX_ZH["host-oom-killer"],
    "dataloader_failure": VARIANT_FIX_ZH["dataloader-worker-died"],
    "barrier_skew": MECHANISM_FIX["divergent_collectives"][1],
    "straggler": "查明这个 rank 在其他 rank 等待时做了什么（它的调用栈和最后的日志）：正当的长时间工作应移出集合通信的等待"
                 "窗口（离线完成、在 init_process_group 之前完成或分摊到所有 rank）；卡在锁或循环里则需要修复代码，"
                 "而不是调大超时。",
    "logging_blocking": VARIANT_FIX_ZH["logger-blocks-loop"],
    "checkpoint_corruption": VARIANT_FIX_ZH["checkpoint-corrupt"],
    "nccl_error": VARIANT_FIX_ZH["nccl-failure"],
    "gpu_hardware": VARIANT_FIX_ZH["gpu-hardware-fault"],
    "nan_inf": VARIANT_FIX_ZH["nan-loss"],
    "ddp_usage_error": VARIANT_FIX_ZH["ddp-unused-parameters"],
    "rank_crash": VARIANT_FIX_ZH["first-exception"],
    "collective_timeout": VARIANT_FIX_ZH["bare-collective-timeout"],
    "job_stopped": "代码本身没有出错：若是时间限制，申请更长的运行时间（sbatch --time），或定期保存检查点并续跑"
                   "（sbatch --signal=USR1@120 让任务在被杀前收到信号并保存）；若被抢占或驱逐，重新提交并从最近的检查点"
                   "恢复；若是节点故障，排除该节点后重新提交（sbatch --exclude）。",
    "no_failure": "无需修改。",
    "unknown": "按“缺失的证据”中列出的方法收集信息（每个 rank 的 py-spy 调用栈、flight recorder、NCCL_DEBUG=INFO、内核日志），"
               "或用 postmortem collect 重新运行任务。",
}


@dataclass
class Advice:
    """The verdict's fix and why, from its root mechanism."""
    mechanism: str               # a MECHANISM_FIX key, or "rule:<rule id>/<category>" when the rule's own fix stands
    fix: str                     # English
    why: str                     # English
    basis: Finding | None = None  # the finding that named the mechanism, when it is not the verdict's own
    phase: str | None = None      # the root finding's phase (some rules' advice follows it)


def mechanism_of(root: Finding, findings: list[Finding]) -> tuple[str, Finding | None]:
    """(mechanism id, the finding that shows it) for the verdict's root finding among all findings."""
    if root.rule == "end-state-asymmetry":  # its fix already follows the mechanism the ranks' ends show
        return f"rule:{root.rule}/{root.category}", None
    if root.category == "barrier_skew":
        if root.rule in UNEVEN_RULES:
            return "uneven_batches", None
        uneven = [f for f in findings if f is not root and f.rule in UNEVEN_RULES and f.category == "barrier_skew"]
        if uneven and root.rule != "collective-after-training-end":
            return "uneven_batches", uneven[0]
        if root.rule != "collective-after-training-end":
            return "divergent_collectives", None
    return f"rule:{root.rule}/{root.category}", None


def advise(findings: list[Finding], ranks=None, steps=None) -> Advice | None:
    """The fix and why for the verdict (findings[0] is its root finding), or None without findings. `ranks` (the
    rank end-state table) lets the why say which ranks stopped at which step."""
    if not findings:
        return None
    root = findings[0]
    mech, basis = mechanism_of(root, findings)
    fix = MECHANISM_FIX[mech][0] if mech in MECHANISM_FIX else root.remediation
    why = root.explanation
    if mech == "uneven_batches":
        said = steps_by_rank(ranks, steps)
        lead = ("The ranks ran different numbers of batches"
                + (f" ({said})" if said else "")
                + ", so the rank with an extra (or a missing) batch issued a collective its peers never called: "
                  "each side then waited for the other until the timeout.")
        why = lead if basis is None and root.rule in UNEVEN_RULES and not why else f"{lead} {why}"
    elif basis is not None and basis.explanation and basis.explanation not in why:
        why = f"{basis.explanation.rstrip()} {why}".strip()
    return Advice(mechanism=mech, fix=fix, why=tidy(why), basis=basis, phase=root.phase)


def steps_by_rank(ranks, steps=None) -> str:
    """`the last steps reported: rank 0 60, ranks 1-3 61` from the rank end-state table ("" when it says nothing: one
    step for all, or a difference smaller than how often a rank reports, so that it cannot tell who was ahead)."""
    from postmortem.verdict.sentences import ranks_phrase
    groups = _last_step_groups(ranks, steps)
    if not groups:
        return ""
    return "the last steps reported: " + ", ".join(f"{ranks_phrase(m)} {step}" for step, m in groups)


def _last_step_groups(ranks, steps) -> list[tuple[int, list]]:
    """[(last step, ranks that reported it last)] in step order, at most 6; empty when the steps tell nothing."""
    if ranks is None or not len(ranks) or "last_step" not in ranks:
        return []
    known = ranks[ranks["last_step"].notna()]
    if known["last_step"].nunique() < 2:
        return []
    if known["last_step"].max() - known["last_step"].min() < report_interval(steps):
        return []
    groups = known.groupby("last_step")["rank"].apply(list).sort_index()
    return [(int(step), members) for step, members in groups.items()][:6]


def report_interval(steps) -> int:
    """The largest step interval at which a rank reports its training progress (1 without a steps table)."""
    if steps is None or not len(steps) or "rank" not in steps:
        return 1
    train = steps[(steps["phase"] == "train") & steps["step"].notna() & steps["rank"].notna()]
    if train.empty:
        return 1
    gaps = train.sort_values(["rank", "line"]).groupby("rank")["step"].diff()
    gaps = gaps[gaps > 0]
    return int(gaps.groupby(train.loc[gaps.index, "rank"]).median().max()) if len(gaps) else 1


_PLURAL = re.compile(r"\b(\d+) (\w+?)\((e?s)\)")


def tidy(text: str) -> str:
    """Rule wording made readable: `1 process(es)` -> `1 process`, `3 process(es)` -> `3 processes`."""
    return _PLURAL.sub(lambda m: f"{m.group(1)} {m.group(2)}" + ("" if m.group(1) == "1" else m.group(3)), text or "")


def verdict_fix(advice: Advice | None, lang: str = "en") -> str | None:
    """The verdict's fix in `lang` (None when that language has no text for its mechanism)."""
    if advice is None:
        return None
    if lang == "en":
        return advice.fix
    if lang != "zh":
        return None
    if advice.mechanism in MECHANISM_FIX:
        return MECHANISM_FIX[advice.mechanism][1]
    rule, _, category = advice.mechanism[len("rule:"):].rpartition("/")
    return _variant_zh(rule, category, advice.phase)


def finding_fix(f: Finding, lang: str = "en") -> str | None:
    """A finding's own fix in `lang` (its rule's English text, or the Chinese text of its variant)."""
    if lang == "en":
        return f.remediation
    return _variant_zh(f.rule, f.category, f.phase) if lang == "zh" else None


def _variant_zh(rule: str, category: str, phase: str | None = None) -> str | None:
    """The Chinese fix of a rule's variant: `rule/phase:P` (a rule whose advice follows the phase), `rule/category`,
    then the rule's own text when the category is the one the rule is registered with (a rule's text never answers
    another category's failure), then the category's."""
    if phase and f"{rule}/phase:{phase}" in VARIANT_FIX_ZH:
        return VARIANT_FIX_ZH[f"{rule}/phase:{phase}"]
    if f"{rule}/{category}" in VARIANT_FIX_ZH:
        return VARIANT_FIX_ZH[f"{rule}/{category}"]
    try:
        from postmortem.rules import all_rules
        registered = {r.id: r.category for r in all_rules()}
    except Exception:  # noqa: BLE001 - a broken plugin must not take the report's advice down
        registered = {}
    if registered.get(rule) == category and rule in VARIANT_FIX_ZH:
        return VARIANT_FIX_ZH[rule]
    return CATEGORY_FIX_ZH.get(category)


def _zh_steps(ranks, steps=None) -> str:
    """`各 rank 最后报告的训练步：rank 0 为 60，rank 1、2、3 为 61` ("" when it says nothing, as steps_by_rank)."""
    from postmortem.verdict.sentences import zh_ranks
    groups = _last_step_groups(ranks, steps)
    return "各 rank 最后报告的训练步：" + "，".join(f"{zh_ranks(m)} 为 {step}" for step, m in groups) if groups else ""


def why_zh(advice: Advice | None, root: Finding | None, ranks=None, steps=None) -> str:
    """The verdict's why in Chinese, from the mechanism and the root finding's fields ("" without a finding).

    Rule explanations are English prose with the rule's own details; this says the same mechanism in Chinese with
    the ranks, step, phase and place the finding names (the report keeps the English text beside it)."""
    from postmortem.verdict.sentences import ZH_PHASE, exception_name, straggler_work, zh_ranks
    if root is None:
        return ""
    who = zh_ranks(root.culprit_ranks)
    others = zh_ranks(root.affected_ranks, none="其他 rank")
    step = f"在第 {root.step} 步之后" if root.step is not None else ""
    phase = ZH_PHASE.get(root.phase or "", "")
    mech = advice.mechanism if advice is not None else ""
    cat = root.category
    if cat == "job_stopped":
        from postmortem.verdict.sentences import stopped_sentence_zh
        return stopped_sentence_zh(root) + ("停止之前的问题才是需要修复的。" if not root.explains else
                                            "停止之前没有任何故障迹象，不需要修改代码。")
    if mech == "uneven_batches":
        said = _zh_steps(ranks, steps)
        return (f"各 rank 执行的批次数不同{'（' + said + '）' if said else ''}：多出（或少了）一个批次的 rank 会调用"
                "其他 rank 永远不会调用的集合通信，于是双方互相等待，直到超时。调用栈或训练步记录显示了各 rank "
                "停下的不同位置。")
    if mech == "divergent_collectives":
        return (f"{who}与{others}在不同的代码位置等待不同的集合通信：各 rank 的代码路径出现了分歧（依赖 rank 或数据"
                "的条件分支、只在部分 rank 上执行的保存或日志），这些集合通信永远无法匹配，只能等到超时。")
    if cat == "barrier_skew" and root.rule == "end-state-asymmetry":
        return (f"比较每个 rank 的结束方式：{who}与{others}停在了不同的地方（{who}独自停在一个其他 rank 没有调用的集合通信里，"
                "或在其他 rank 还在集合通信中时提前离开）。各 rank 执行的集合通信序列出现了分歧（批次数不同、"
                "只在部分 rank 上执行的同步、按 rank 各自决定的提前停止），只能等到超时或连接断开。")
    if cat == "unknown":
        return (f"任务失败了，但输入中的信息不足以判断原因"
                + (f"；{who}的结束方式与其他 rank 不同，它最后打印的几行是最好的线索" if root.culprit_ranks else "")
                + "。请按“缺失的证据”收集更多信息。")
    if root.rule == "collective-after-training-end":
        return (f"训练已经结束，之后{who}又进入了一个集合通信并一直等到超时：训练后的代码只在部分 rank 上调用了会同步"
                "的函数（例如 rank 0 的保存或评估内部有 barrier），其他 rank 已经离开，不会再来配对。")
    if root.rule == "tracker-ended-the-run":
        return (f"wandb 报告它无法连接自己的服务进程（wandb.init 超时），{who if root.culprit_ranks else '该 rank'} 随即抛出异常"
                "退出：任务死在日志记录器的启动阶段，而不是训练本身。")
    if cat in ("straggler", "logging_blocking"):
        how, work = straggler_work(root)
        what = {"logger": "阻塞在日志记录器中", "stuck": f"卡在 {work}", "busy": f"忙于 {work}",
                "outside": "忙于集合通信之外的工作"}[how]
        return (f"{others}已经在集合通信中等待，而{who}{step}{what}。在它到达同一个集合通信之前，其他 rank 只能等待，"
                "最终超时；其他 rank 的超时报错是结果，不是原因。")
    if cat == "gpu_oom":
        if root.rule == "death-at-periodic-step":
            return (f"任务{step}悄然退出，没有留下显存不足的报错；这一步正是周期性的采样/评估步，而该阶段的批大小大于"
                    "训练批大小，显存不足是最可能的原因。")
        return (f"{who}{step}{phase}申请 GPU 显存失败（CUDA out of memory）。其他 rank 随后出现的超时或连接断开是它的"
                "连锁反应。")
    if cat == "host_oom":
        if "refused" in root.explanation or "MemoryError" in root.explanation or "allocate" in root.explanation:
            return (f"{who}{step}在进程内申请主机内存失败（MemoryError / DefaultCPUAllocator: can't allocate memory），"
                    f"{others}随后失去了与它的连接。检查这次申请的大小（数据中损坏的长度或形状会让它大得离谱）。")
        return f"主机内存耗尽，内核的 OOM killer 杀死了{who}的进程（没有 Python 异常，退出码为 -9/SIGKILL）。"
    if cat == "dataloader_failure" and "raised" in root.title and "DataLoader worker" in root.title:
        return (f"{who}的 DataLoader 工作进程{step}运行任务自己的数据代码（__getitem__ 或 collate_fn）时抛出了异常，"
                "主进程随之重新抛出。工作进程并非因内存或信号而死：是一条该代码无法处理的数据让这个 rank 停了下来。")
    if cat == "dataloader_failure":
        return (f"{who}的一个 DataLoader 工作进程{step}异常退出或卡住（常见原因：/dev/shm 共享内存不足、被信号杀死、"
                "数据集代码崩溃），主进程随之停止。")
    if cat == "checkpoint_corruption":
        return (f"{who}{step}读取检查点失败：文件不完整或已损坏。通常是在另一个 rank 还在写入时就去读取，或多个 rank "
                "同时写同一个文件，或写入时磁盘已满或进程被杀。")
    if cat == "nccl_error":
        if root.rule == "first-collective-never-completed":
            return "任务的第一个集合通信在所有 rank 上都没有完成：各 rank 之间从一开始就无法连通（网络、传输层或初始化配置）。"
        return f"{who}上的 NCCL 通信{step}失败（见第一条 NCCL WARN 或传输错误），其他 rank 随之停止。"
    if cat == "gpu_hardware":
        return f"{who}所在的 GPU 报告了硬件故障（Xid、ECC 错误或 GPU 掉线），进程因此停止。"
    if cat == "nan_inf":
        return f"损失{step}变成了 NaN 或 Inf，之后训练无法恢复（或被 NaN 检查主动终止）。"
    if cat == "ddp_usage_error":
        return "DDP 报错：某次迭代中有参数没有参与损失计算、没有得到梯度，而 DDP 默认要求每个参数都得到梯度。"
    if cat == "rank_crash" and root.rule == "rank-exited-silently":
        return f"{who}{step}没有抛出异常就退出了，{others}随后失去了与它的连接。"
    if cat == "rank_crash":
        exc = exception_name(root)
        return (f"{who}{step}{phase}抛出了 {exc or '异常'} 并退出；{others}的超时或连接断开是它的连锁反应。"
                "修复最先出现的这个异常即可。")
    if cat == "collective_timeout":
        return f"{others}在集合通信中等待直到超时，但输入中没有信息说明它们在等谁、那个 rank 在做什么。"
    return ""
