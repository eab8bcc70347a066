"""English sentence patterns of the verdict texts (rule explanations and fixes, postmortem's own sentences) and their
Chinese, for reports/translate.py. `{name}` captures a fact (ranks, a frame, a file, a message, a number); the
Chinese puts the same captured text back, so the two say the same facts. Order matters: the more specific pattern of
two that could match the same sentence comes first. A trailing period in a pattern is optional in the sentence.
"""
from __future__ import annotations

import re

from postmortem.verdict.advice import MECHANISM_FIX, VARIANT_FIX_ZH

# A captured value that is one of these words (a stack's activity, a phrase a rule fills in) has a Chinese form.
VALUE_WORDS: dict[str, str] = {
    "compute": "计算", "sleep lock": "sleep/锁等待", "checkpoint io": "检查点读写", "logging": "日志记录",
    "unknown": "未知状态", "collective wait": "集合通信等待", "data loading": "数据加载", "idle": "空闲",
    "the other ranks": "其他 rank", "one rank": "某个 rank", "a rank": "某个 rank", "A rank": "某个 rank",
    "during setup": "初始化阶段", "in an undetermined phase": "阶段不明",
    "non-collective work (no progress line shows which)": "集合通信之外的工作（没有进度行说明是什么）",
}
# Phrases inside a captured value (no fact in them), in order: (English, Chinese).
VALUE_PHRASES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"\b(\d+) process(?:es)? at "), r"\1 个进程在 "),
    (re.compile(r"^the last steps reported: "), "各 rank 最后报告的训练步："),
    (re.compile(r"\(the last line printed before the timeouts\)"), "（超时前打印的最后一行）"),
    (re.compile(r", still reporting progress after the others had timed out"), "，在其他 rank 超时之后仍在报告进度"),
    # busy-past-timeout's facts: the bar, how far it got, the timeout the waits stated (or torch's default)
    (re.compile(r"^The progress bar (`.*`)$", re.S), r"进度条 \1 "),
    (re.compile(r"^A progress bar$"), "某个进度条"),
    (re.compile(r"^(\S+) at (\d+)/(\d+) \((\d+%)\)$"), r"\1（进度 \2/\3，\4）"),
    (re.compile(r"^the waits state a timeout of (\S+)$"), r"等待方声明的超时为 \1"),
    (re.compile(r"^no wait states its timeout, and torch's default is (\S+)$"), r"没有等待说明其超时，torch 的默认值为 \1"),
]

ZH_SENTENCES: list[tuple[str, str]] = [
    # --- how the ranks ended (postmortem.ranks.culprits, end-state-asymmetry) ---------------------------------------
    ("Compared how every rank ended; the others' ends follow from it.", "比较了每个 rank 的结束方式；其他 rank 的结束都源于它。"),
    ("Culprit from how the ranks ended: {clause}.", "根据各 rank 的结束方式判断肇事 rank：{clause}。"),
    ("{who} ended on its own ({how}); {others} ended as a consequence.", "{who} 自行结束（{how}）；{others} 是随之结束的。"),
    ("{who} ended on its own ({how}).", "{who} 自行结束（{how}）。"),
    ("{who} left without a word: {others} saw its connection close in a collective.",
     "{who} 没有留下任何信息就离开了：{others} 在集合通信中看到它的连接关闭。"),
    ("{who} never reported waiting in the collective {others} waited in; its peers timed out waiting: it was alive, "
     "working elsewhere.",
     "{who} 从未报告在 {others} 等待的那个集合通信中等待；它的同伴等到超时：它还活着，在做别的工作。"),
    ("{who} printed near its end what no other rank printed: {line}.",
     "{who} 在结束前打印了其他 rank 都没有打印的内容：{line}。"),
    ("{who} waited in a collective outside the training step ({where}) while {other} waited in the step's own "
     "collective: the ranks' collective sequences diverged there.",
     "{who} 在训练步之外的集合通信（{where}）中等待，而 {other} 在训练步自己的集合通信中等待：各 rank 的集合通信序列在此处出现分歧。"),
    ("{who} waited in a collective after {others} had exited normally: it called a collective the others never did.",
     "{others} 正常退出之后，{who} 仍在集合通信中等待：它调用了其他 rank 从未调用的集合通信。"),
    ("The rank that left is the cause; their errors follow from it.", "离开的那个 rank 是原因；其他 rank 的报错都源于它。"),
    ("Find why that rank exited: an explicit exit with an error code, a native crash (PYTHONFAULTHANDLER=1 shows "
     "where), or a kill from outside (dmesg, the scheduler).",
     "查明该 rank 为何退出：带错误码的显式退出、原生代码崩溃（PYTHONFAULTHANDLER=1 会显示位置），或被外部杀死（dmesg、调度器）。"),
    ("Find out what the culprit rank was doing at that point (its stack, its last log lines, nvidia-smi / dmesg for "
     "its GPU).", "查明肇事 rank 在那一刻在做什么（它的调用栈、最后几行日志、它那张 GPU 的 nvidia-smi / dmesg）。"),
    ("Find what that rank did after its last line: take py-spy dumps of every rank when the job stalls (`py-spy dump "
     "--pid`), and enable the flight recorder (TORCH_FR_BUFFER_SIZE) to see who lagged.",
     "查明该 rank 在最后一行日志之后做了什么：任务卡住时对每个 rank 做 py-spy 转储（`py-spy dump --pid`），并开启 flight "
     "recorder（TORCH_FR_BUFFER_SIZE）以看出谁落后了。"),
    ("Fix the exception on the culprit rank (cited); the others' errors follow from it.",
     "修复肇事 rank 上的异常（见引用）；其他 rank 的报错都源于它。"),
    ("Find the exit: an explicit sys.exit/os._exit with an error code, a native crash, or a kill from outside "
     "(dmesg, the scheduler).", "查明退出原因：带错误码的显式 sys.exit/os._exit、原生代码崩溃，或被外部杀死（dmesg、调度器）。"),
    ("The launcher reports {who}: code {code}, and no Python exception was printed by that rank; the other ranks then "
     "lost their connection to it or timed out waiting.",
     "启动器报告 {who}：退出码 {code}，而该 rank 没有打印任何 Python 异常；其他 rank 随后与它失去连接或等到超时。"),
    ("The rank's process ended without printing an exception (os._exit, a native crash without faulthandler, a kill "
     "from outside): run with PYTHONFAULTHANDLER=1, check dmesg and the scheduler for kills, and read its last lines "
     "(cited) for what it did last.",
     "该 rank 的进程没有打印异常就结束了（os._exit、没有 faulthandler 的原生崩溃、被外部杀死）：设置 PYTHONFAULTHANDLER=1 "
     "运行，检查 dmesg 和调度器中的 kill 记录，并阅读它最后几行日志（见引用）看它最后做了什么。"),
    # --- restarts (postmortem.ingest.attempts) -----------------------------------------------------------------------
    ("torchrun restarted the workers {n} time; this verdict is about the first attempt.",
     "torchrun 重启了 {n} 次工作进程；本结论针对第一次尝试。"),
    ("torchrun restarted the workers {n} times; this verdict is about the first attempt.",
     "torchrun 重启了 {n} 次工作进程；本结论针对第一次尝试。"),
    ("Later: their ends are not in the inputs.", "之后的尝试如何结束，输入中没有记录。"),
    ("Later: {what}.", "之后：{what}。"),
    # --- exceptions (first-exception, postmortem.verdict.direct_exception) ----------------------------------------------
    ("The earliest exception that is not a timeout or a closed connection is {exc} on rank {rank}.",
     "最早出现的、不是超时或连接断开的异常是 rank {rank} 上的 {exc}。"),
    ("The earliest exception that is not a timeout or a closed connection is {exc}.",
     "最早出现的、不是超时或连接断开的异常是 {exc}。"),
    ("Errors on other ranks follow from it.", "其他 rank 上的报错都源于它。"),
    ("Fix this exception; rerun with the same seed to confirm.", "修复这个异常；用相同的随机种子重新运行以确认。"),
    ("{who}'s own error file ({file}) records the same {exc}, and every other rank ended as a consequence of it.",
     "{who} 自己的错误文件（{file}）记录了同样的 {exc}，其他每个 rank 都是随之结束的。"),
    ("Fix the {exc} raised in {where} on rank {rank} (\"{msg}\"): it is the input or code path that rank took at "
     "that step (the message names it).",
     "修复 rank {rank} 在 {where} 抛出的 {exc}（“{msg}”）：它来自该 rank 在这一步读到的输入或走到的代码路径（异常消息指出了是哪个）。"),
    ("Fix the {exc} raised on rank {rank} (\"{msg}\"): it is the input or code path that rank took at that step (the "
     "message names it).",
     "修复 rank {rank} 抛出的 {exc}（“{msg}”）：它来自该 rank 在这一步读到的输入或走到的代码路径（异常消息指出了是哪个）。"),
    ("Fix the {exc} raised in {where} on rank {rank}: it is the input or code path that rank took at that step (the "
     "message names it).",
     "修复 rank {rank} 在 {where} 抛出的 {exc}：它来自该 rank 在这一步读到的输入或走到的代码路径（异常消息指出了是哪个）。"),
    ("The other ranks' errors (closed connections, timeouts, SIGTERM) follow from it and need no change.",
     "其他 rank 的报错（连接断开、超时、SIGTERM）都是它的连锁反应，无需修改。"),
    ("A native crash (segfault, abort, bus error): run with PYTHONFAULTHANDLER=1 and a core dump (ulimit -c "
     "unlimited) to see the C/C++ frame; check extensions, custom ops and data-dependent indexing.",
     "原生代码崩溃（段错误、abort、总线错误）：设置 PYTHONFAULTHANDLER=1 并开启 core dump（ulimit -c unlimited）运行，查看 "
     "C/C++ 栈帧；检查扩展、自定义算子和依赖数据的索引。"),
    # --- collectives and skew -----------------------------------------------------------------------------------
    ("They will never match: the code paths diverged.", "它们永远无法匹配：各 rank 的代码路径出现了分歧。"),
    ("Each side sits at the other's call site and nothing in the logs says which one took the branch; read the "
     "code at both sites for the condition that differs between ranks.",
     "两边各停在对方所没有的调用点上，日志中没有任何信息能说明是哪一方走了那个分支；请阅读两处调用点的代码，找出在各 rank 间取值不同的条件。"),
    ("The ranks followed different code paths: they issued different collectives at the same point.",
     "各 rank 走了不同的代码路径：它们在同一位置发起了不同的集合通信。"),
    ("Ranks followed different code paths, so one waits in a collective the others never call (or call with other "
     "arguments).", "各 rank 走了不同的代码路径，于是一方在等待另一方永远不会调用（或以不同参数调用）的集合通信。"),
    ("The collective fingerprints differ: {a} ran {op_a} while {b} ran {op_b}.",
     "集合通信的指纹不同：{a} 执行的是 {op_a}，而 {b} 执行的是 {op_b}。"),
    ("The stack dumps show ranks blocked in different collective call sites: {sites}.",
     "栈转储显示各 rank 阻塞在不同的集合通信调用位置：{sites}。"),
    ("The only stack shown waits in a collective called from outside the training step ({chain}).",
     "唯一的调用栈在训练步之外调用的集合通信中等待（{chain}）。"),
    ("Collectives in saving, logging, callback or evaluation code are where ranks most often take different paths (a "
     "rank-dependent condition, a metric that differs per rank), so the peers never call the same collective.",
     "保存、日志、回调或评估代码中的集合通信，是各 rank 最常走上不同路径的地方（依赖 rank 的条件、各 rank 不同的指标），"
     "于是同伴永远不会调用同一个集合通信。"),
    ("Stacks of the other ranks would confirm it.", "其他 rank 的调用栈可以证实这一点。"),
    ("Make every rank call the same collectives in the same order: no collective under a rank- or data-dependent "
     "condition (broadcast the decision from rank 0 instead), and call helpers that synchronise (saving, evaluation, "
     "metric logging with sync_dist) on every rank.", MECHANISM_FIX["divergent_collectives"][1]),
    ("Make every rank call the same collectives in the same order.", "让每个 rank 以相同顺序调用相同的集合通信。"),
    ("Make every rank run the same collectives: a collective inside rank-conditional code (a rank-0 save, eval or log "
     "that synchronises), or an extra step on the ranks with more data, leaves it waiting alone.",
     "让每个 rank 执行相同的集合通信：位于依赖 rank 的代码中的集合通信（rank 0 上会同步的保存、评估或日志），或数据更多的 rank "
     "多出的一步，都会让它独自等待。"),
    ("Guard only the file write or print by rank, and give every rank the same number of batches (drop_last=True, "
     "DistributedSampler with even shards, torch.distributed.algorithms.Join).",
     "只用 rank 判断包住写文件或打印，并让每个 rank 执行相同数量的批次（drop_last=True、均匀分片的 DistributedSampler、"
     "torch.distributed.algorithms.Join）。"),
    ("The ranks ran different numbers of batches ({said}), so the rank with an extra (or a missing) batch issued a "
     "collective its peers never called: each side then waited for the other until the timeout.",
     "各 rank 执行的批次数不同（{said}）：多出（或少了）一个批次的 rank 调用了同伴永远不会调用的集合通信，于是双方互相等待，直到超时。"),
    ("The ranks ran different numbers of batches, so the rank with an extra (or a missing) batch issued a collective "
     "its peers never called: each side then waited for the other until the timeout.",
     "各 rank 执行的批次数不同：多出（或少了）一个批次的 rank 调用了同伴永远不会调用的集合通信，于是双方互相等待，直到超时。"),
    ("Give every rank the same number of batches: use DistributedSampler(..., drop_last=True) so each rank gets an "
     "even shard (or pad the dataset to a multiple of the world size); where inputs cannot be evened, wrap the loop "
     "in torch.distributed.algorithms.Join([model, optimizer]) (DDP's join()) so a rank that runs out of data shadows "
     "the others' collectives; never let one rank break out of the loop early.", MECHANISM_FIX["uneven_batches"][1]),
    ("Post-training code ran a collective on some ranks only (typically a save or evaluation under `if rank == 0` "
     "that synchronises inside), so its partners never came.",
     "训练结束后的代码只在部分 rank 上执行了集合通信（通常是 `if rank == 0` 之下、内部会同步的保存或评估），它的同伴永远不会到来。"),
    ("Call functions that synchronise (save_checkpoint, save_state, evaluate) on every rank and guard only the file "
     "write by rank; or destroy the process group before rank-0-only work.",
     "在每个 rank 上调用会同步的函数（save_checkpoint、save_state、evaluate），只用 rank 判断包住写文件这一步；或者在只由 "
     "rank 0 执行的工作之前销毁进程组。"),
    ("Training ended ({marker}), and afterwards {who} waited in a collective until the timeout.",
     "训练已经结束（{marker}），之后 {who} 在集合通信中一直等到超时。"),
    # --- flight recorder ----------------------------------------------------------------------------------------
    ("The flight-recorder dumps (each rank's last collectives) compared in {n} process group with unfinished work: "
     "{what}.", "比较了各 rank 的 flight recorder 转储（每个 rank 最后的集合通信），{n} 个进程组有未完成的工作：{what}。"),
    ("The flight-recorder dumps (each rank's last collectives) compared in {n} process groups with unfinished work: "
     "{what}.", "比较了各 rank 的 flight recorder 转储（每个 rank 最后的集合通信），{n} 个进程组有未完成的工作：{what}。"),
    ("{who} stopped enqueuing at #{a} in pg {pg} while peers reached #{b}",
     "{who} 在 pg {pg} 中停在 #{a}，而同伴已到达 #{b}"),
    ("pg {pg} collective #{seq}: op differs across ranks ({ops})", "pg {pg} 的集合通信 #{seq}：各 rank 的操作不同（{ops}）"),
    ("{who} left no dump; its peers in pg {pg} issued #{seq} and wait on it",
     "{who} 没有留下转储；pg {pg} 中的同伴发起了 #{seq} 并在等待它"),
    ("A rank that never enqueued what its peers wait in was stuck on the host before the call (a held GIL, a long "
     "CPU step, a dead or frozen process).",
     "一个从未发起同伴正在等待的集合通信的 rank，在调用之前就卡在了主机端（持有 GIL、长时间的 CPU 计算、进程已死或冻结）。"),
    ("Ranks that left no dump while their peers wait on them most likely died or froze before the dumps were written.",
     "没有留下转储、而同伴在等待它们的 rank，很可能在写转储之前就已经退出或冻结。"),
    ("{n} other rank(s) wait on them.", "另有 {n} 个 rank 在等待它们。"),
    ("Independent confirmation: the flight recorder shows {who} never issued #{seq} ({op}) that {others} issued.",
     "独立佐证：flight recorder 显示 {who} 从未发起 {others} 已发起的 #{seq}（{op}）。"),
    ("The flight recorder shows {who} never issued #{seq} ({op}) that {others} issued.",
     "flight recorder 显示 {who} 从未发起 {others} 已发起的 #{seq}（{op}）。"),
    # --- stragglers, stacks, loggers -------------------------------------------------------------------------------
    ("In the stack dumps, {others} wait in a collective while {who} is in {act}: innermost frame {where}.",
     "栈转储中，{others} 在集合通信中等待，而 {who} 正处于{act}：最内层栈帧为 {where}。"),
    ("In the stack dumps, {others} waits in a collective while {who} is in {act}: innermost frame {where}.",
     "栈转储中，{others} 在集合通信中等待，而 {who} 正处于{act}：最内层栈帧为 {where}。"),
    ("The waiting ranks cannot finish until the odd one reaches the same collective.",
     "在那个与众不同的 rank 到达同一个集合通信之前，等待中的 rank 无法完成。"),
    ("Find out why {who} is stuck in {where} (lock, sleep, endless loop, slow I/O) and fix it; this is a hang, so a "
     "longer timeout would only delay the same failure.",
     "查明 {who} 为何卡在 {where}（锁、sleep、死循环、缓慢的 I/O）并修复；这是真正的卡死，调大超时只会推迟同样的失败。"),
    ("The thread list of rank {rank} shows a thread no other rank runs: {names}; the stuck main thread most likely "
     "waits on a lock or queue it holds (py-spy does not show locks).",
     "rank {rank} 的线程列表里有一个其他 rank 都没有的线程：{names}；卡住的主线程很可能在等待它持有的锁或队列（py-spy 不显示锁）。"),
    ("The thread list of rank {rank} shows threads no other rank runs: {names}; the stuck main thread most likely "
     "waits on a lock or queue they hold (py-spy does not show locks).",
     "rank {rank} 的线程列表里有其他 rank 都没有的线程：{names}；卡住的主线程很可能在等待它们持有的锁或队列（py-spy 不显示锁）。"),
    ("Start with thread {names} on rank {rank}: it most likely holds what the main thread waits for (never hold a lock "
     "across slow I/O or a sleep; give the I/O a timeout).",
     "先看 rank {rank} 上的线程 {names}：它很可能持有主线程在等待的东西（不要在缓慢的 I/O 或 sleep 期间持有锁；给 I/O 设置超时）。"),
    ("Start with threads {names} on rank {rank}: it most likely holds what the main thread waits for (never hold a "
     "lock across slow I/O or a sleep; give the I/O a timeout).",
     "先看 rank {rank} 上的线程 {names}：它们很可能持有主线程在等待的东西（不要在缓慢的 I/O 或 sleep 期间持有锁；给 I/O 设置超时）。"),
    ("{waiting} waited in a collective and gave up after the {n} s timeout, while {who} was doing {what}.",
     "{waiting} 在集合通信中等待，{n} 秒超时后放弃，而 {who} 正在做 {what}。"),
    # odd-rank-out-stack: two ranks mirroring each other in different collectives (postmortem.rules.hangs)
    ("{who} waited outside the training step while the others waited in the step's own collective: its sequence "
     "left the common path.",
     "{who} 在训练步之外等待，而其他 rank 在训练步自己的集合通信中等待：它的集合通信序列离开了共同的路径。"),
    ("{who} waited outside the training step while the others waited in the step's own collective: their sequence "
     "left the common path.",
     "{who} 在训练步之外等待，而其他 rank 在训练步自己的集合通信中等待：它们的集合通信序列离开了共同的路径。"),
    ("The flight recorder shows {detail}; {who}'s op is one the group had never issued before: its sequence left the "
     "common path.",
     "flight recorder 显示 {detail}；{who} 的操作是这个进程组此前从未发出过的：它的集合通信序列离开了共同的路径。"),
    # busy-past-timeout (postmortem.rules.timing): a progress bar that ran as long as the collective timeout
    ("{bar} on rank {rank} had been running for {elapsed} when the job failed, and {said}: the rank running it was "
     "busy for the whole window its peers waited in a collective, and they gave up at the timeout.",
     "rank {rank} 上的{bar}在任务失败时已运行 {elapsed}，而{said}：运行它的 rank 在同伴于集合通信中等待的整个时间窗口里"
     "一直在忙，同伴最终在超时后放弃。"),
    ("{bar} had been running for {elapsed} when the job failed, and {said}: the process running it was busy for the "
     "whole window its peers waited in a collective, and they gave up at the timeout.",
     "{bar}在任务失败时已运行 {elapsed}，而{said}：运行它的进程在同伴于集合通信中等待的整个时间窗口里一直在忙，"
     "同伴最终在超时后放弃。"),
    ("Move this work out of the collective's window: run it before init_process_group or offline and cache the "
     "result, split it across ranks or speed it up; raising the process-group timeout to cover it also works (with "
     "DeepSpeed, pass the timeout to deepspeed.init_distributed, not only to the trainer's arguments).",
     "把这项工作移出集合通信的等待窗口：在 init_process_group 之前或离线完成并缓存结果，把它分摊到各 rank 或加快它；"
     "把进程组超时调大到能覆盖它也可以（使用 DeepSpeed 时，要把超时传给 deepspeed.init_distributed，而不只是训练器的参数）。"),
    ("The timeouts are the symptom; the long one-rank work is the cause.", "超时只是症状；只在一个 rank 上进行的长时间工作才是原因。"),
    ("{who} is the only one not reporting a timeout.", "{who} 是唯一没有报告超时的 rank。"),
    ("{who} printed the work.", "{who} 打印了这项工作。"),
    ("The waiting ranks sit inside main_process_first(), which waits for the main process.",
     "等待中的 rank 位于 main_process_first() 内部，它在等待主进程。"),
    ("Move the long work out of the collective's window: preprocess/tokenize offline or before init_process_group and "
     "cache it, raise the timeout (init_process_group(timeout=timedelta(hours=2)) / --ddp_timeout), or shard the "
     "work across ranks.",
     "把长时间的工作移出集合通信的等待窗口：离线或在 init_process_group 之前完成预处理/分词并缓存，调大超时"
     "（init_process_group(timeout=timedelta(hours=2)) / --ddp_timeout），或把工作分摊到所有 rank。"),
    ("Find out what the busy rank was doing (py-spy dump of every rank on the next stall, or run the job under "
     "`postmortem collect`): long legitimate work belongs outside the collective's window (offline, before "
     "init_process_group, or sharded); a rank stuck in a loop or a lock needs a fix, not a longer timeout.",
     "查明忙碌的 rank 在做什么（下次卡住时对每个 rank 做 py-spy dump，或用 `postmortem collect` 运行任务）：正当的长时间工作"
     "应放在集合通信的等待窗口之外（离线、在 init_process_group 之前或分摊）；卡在循环或锁里的 rank 需要修复，而不是调大超时。"),
    ("While the logger blocks, the rank makes no progress and its peers wait in the next collective.",
     "日志记录器阻塞期间，该 rank 没有任何进展，它的同伴在下一个集合通信中等待。"),
    ("The main thread is blocked in {where}; wandb ran offline, so the block is its local service (wandb-core) not "
     "reading the records fast enough or not at all, not the network.",
     "主线程阻塞在 {where}；wandb 以离线模式运行，因此阻塞来自它的本地服务（wandb-core）读取记录太慢或根本不读，而不是网络。"),
    ("The main thread is blocked in {where}.", "主线程阻塞在 {where}。"),
    ("The thread {thread} is blocked in {where}.", "线程 {thread} 阻塞在 {where}。"),
    ("The run was already offline: log fewer values less often (wandb.log(..., commit=False) per batch, commit every "
     "N steps, no per-parameter statistics every batch), check that the wandb-core service is alive and not starved "
     "of CPU, and confirm with WANDB_MODE=disabled.",
     "这次运行本来就是离线模式：减少记录的数值并降低频率（每个批次用 wandb.log(..., commit=False)，每 N 步提交一次，不要每个"
     "批次都记录逐参数的统计），确认 wandb-core 服务还活着且没有被抢走 CPU，并用 WANDB_MODE=disabled 验证。"),
    ("wandb.log(..., commit=False) inside the loop and commit every N steps; WANDB_MODE=offline + `wandb sync` later; "
     "fix proxy/network; for tqdm lock deadlocks set tqdm.tqdm.monitor_interval = 0.",
     "循环内用 wandb.log(..., commit=False)，每 N 步提交一次；WANDB_MODE=offline，之后再 `wandb sync`；修复代理/网络；tqdm "
     "锁死锁可设 tqdm.tqdm.monitor_interval = 0。"),
    # --- memory ----------------------------------------------------------------------------------------------------
    ("{who} ran out of GPU memory during sampling/generation at step {step}.",
     "{who} 在第 {step} 步的采样/生成阶段 GPU 显存不足。"),
    ("{who} ran out of GPU memory during evaluation/validation at step {step}.",
     "{who} 在第 {step} 步的评估/验证阶段 GPU 显存不足。"),
    ("{who} ran out of GPU memory during a training step at step {step}.", "{who} 在第 {step} 步的训练步中 GPU 显存不足。"),
    ("{who} ran out of GPU memory while saving a checkpoint at step {step}.", "{who} 在第 {step} 步保存检查点时 GPU 显存不足。"),
    ("{who} ran out of GPU memory {phase}.", "{who} GPU 显存不足（{phase}）。"),
    ("Phase evidence: {evidence}.", "阶段证据：{evidence}。"),
    ("{n} ranks reported OOM.", "{n} 个 rank 报告了显存不足。"),
    ("Timeouts or closed connections on other ranks are consequences.", "其他 rank 上的超时或连接断开都是连锁反应。"),
    ("Lower the sampling/generation batch size (it is per device) or the number of sample batches, run sampling under "
     "torch.no_grad()/inference_mode, and free the training graph first (del loss; torch.cuda.empty_cache()).",
     VARIANT_FIX_ZH["gpu-oom/phase:sample"]),
    ("Wrap evaluation in torch.no_grad()/inference_mode, lower the eval batch size, move large metric computations to "
     "CPU.", VARIANT_FIX_ZH["gpu-oom/phase:eval"]),
    ("No error message survived, but the job died at step {step}: {why}.", "没有留下任何报错，但任务在第 {step} 步退出：{why}。"),
    ("A periodic pass with a larger per-device batch than training is the most likely thing to exhaust GPU memory "
     "exactly there.", "每张卡批大小大于训练的周期性阶段，最可能恰好在这里耗尽 GPU 显存。"),
    ("This is an inference, not an observation.", "这是推断，不是观察到的事实。"),
    ("Lower the per-device batch of the periodic pass (or run it under no_grad with fewer batches) and keep per-rank "
     "logs plus nvidia-smi history to confirm.",
     "降低周期性阶段每张卡的批大小（或在 no_grad 下用更少的批次运行），并保留每个 rank 的日志和 nvidia-smi 记录以确认。"),
    ("Check host memory (dmesg for the OOM killer), reduce num_workers or per-worker memory, and read the worker's own "
     "traceback for exceptions in the dataset code.",
     "检查主机内存（用 dmesg 查看 OOM killer），减少 num_workers 或每个工作进程的内存，并阅读工作进程自己的调用栈，找出数据集代码中的异常。"),
    ("SIGKILL leaves no Python traceback, which is why the job just stops.", "SIGKILL 不会留下 Python 调用栈，所以任务只是突然停止。"),
    ("Lower host memory use (fewer/lighter DataLoader workers, no per-worker copies of big Python datasets, bounded "
     "buffers) or request more RAM; confirm with `dmesg -T | grep -i oom`.",
     "降低主机内存占用（更少或更轻的 DataLoader 工作进程，不要在每个工作进程里复制大的 Python 数据集，使用有界缓冲区）或申请更多"
     "内存；用 `dmesg -T | grep -i oom` 确认。"),
    ("Rank(s) {ranks} exited by SIGKILL (-9) without a Python traceback.", "rank {ranks} 被 SIGKILL（-9）结束，没有留下 Python 调用栈。"),
    ("The kernel OOM killer killed the process.", "内核的 OOM killer 杀死了该进程。"),
    ("The process asked for more host RAM than it could get (MemoryError, `DefaultCPUAllocator: can't allocate "
     "memory`, std::bad_alloc): check the allocation's size (a corrupt length or shape in the data makes it absurd), "
     "stream or shard the data instead of materialising it, lower the batch, or give the job more memory.",
     "进程申请的主机内存超过了可用量（MemoryError、`DefaultCPUAllocator: can't allocate memory`、std::bad_alloc）：检查这次"
     "申请的大小（数据中损坏的长度或形状会让它大得离谱），以流式或分片方式读取数据而不是一次性载入，降低批大小，或给任务更多内存。"),
    # --- DataLoader --------------------------------------------------------------------------------------------------
    ("A DataLoader worker failed: {exc}.", "一个 DataLoader 工作进程失败：{exc}。"),
    ("A DataLoader worker was killed by SIGKILL: usually the kernel OOM killer (host RAM) — check dmesg.",
     "一个 DataLoader 工作进程被 SIGKILL 杀死：通常是内核的 OOM killer（主机内存）——请检查 dmesg。"),
    # --- checkpoints -------------------------------------------------------------------------------------------------
    ("The checkpoint file is incomplete or inconsistent: {exc}.", "检查点文件不完整或不一致：{exc}。"),
    ("{who} was still saving {path} when {readers} loaded it (read during write), so the readers got a partial file.",
     "{readers} 加载 {path} 时，{who} 还在保存它（边写边读），因此读到的是不完整的文件。"),
    ("Write checkpoints atomically (save to path.tmp on rank 0, then os.replace), dist.barrier() before other ranks "
     "load, keep the previous checkpoint until the new one is complete, and monitor disk space; delete the partial "
     "file and resume from the last good one.", VARIANT_FIX_ZH["checkpoint-corrupt"]),
    ("Make the checkpoint write atomic (write to a temporary file, then rename), have one rank write and the others "
     "wait at a barrier before reading, and check the disk has room; delete a truncated checkpoint before resuming.",
     "原子地写检查点（先写临时文件再改名），只让一个 rank 写，其他 rank 在读之前在 barrier 处等待，并确认磁盘有空间；恢复训练前"
     "删除截断的检查点。"),
    # --- DDP ----------------------------------------------------------------------------------------------------------
    ("DDP expected a gradient for every parameter in each iteration; some parameters took no part in the loss ({exc}",
     "DDP 要求每次迭代中每个参数都得到梯度；有些参数没有参与损失计算（{exc}"),
    ("Remove the unused modules or use find_unused_parameters=True; make data-dependent branches run on every rank.",
     "删除未使用的模块或设置 find_unused_parameters=True；让依赖数据的分支在每个 rank 上都执行。"),
    # --- numerics -----------------------------------------------------------------------------------------------------
    ("The loss turned non-finite on rank {rank} at step {step}.", "rank {rank} 的损失在第 {step} 步变为非有限值（NaN/Inf）。"),
    ("The loss turned non-finite at step {step}.", "损失在第 {step} 步变为非有限值（NaN/Inf）。"),
    ("The loss turned non-finite on rank {rank}.", "rank {rank} 的损失变为非有限值（NaN/Inf）。"),
    ("The loss turned non-finite.", "损失变为非有限值（NaN/Inf）。"),
    ("The warning {warning} (line {line}) came before it and names the operation.",
     "在它之前出现的警告 {warning}（第 {line} 行）指出了出问题的算子。"),
    ("The loss grew about x10^{exp} per step on rank {rank} ({a} at step {s1} to {b} at step {s2}) before it stopped "
     "being finite.", "rank {rank} 的损失在变为非有限值之前每步约增长 x10^{exp}（第 {s1} 步为 {a}，第 {s2} 步为 {b}）。"),
    ("The loss grew about x10^{exp} per step ({a} at step {s1} to {b} at step {s2}) before it stopped being finite.",
     "损失在变为非有限值之前每步约增长 x10^{exp}（第 {s1} 步为 {a}，第 {s2} 步为 {b}）。"),
    ("Once a loss is NaN every update spreads it; the job then diverges, stops, or a NaN check aborts it.",
     "损失一旦变成 NaN，每次更新都会把它扩散出去；之后任务发散、停止，或被 NaN 检查中止。"),
    ("The optimisation diverged from the first steps: lower the learning rate (it was {lr}) by an order of magnitude "
     "or more, add warmup, clip gradients (torch.nn.utils.clip_grad_norm_), and check the loss's scale (a sum instead "
     "of a mean); torch.autograd.set_detect_anomaly(True) then finds any operation that still produces the first NaN.",
     "优化从最初几步就发散了：把学习率（原为 {lr}）降低一个数量级或更多，加入预热，裁剪梯度（torch.nn.utils.clip_grad_norm_），"
     "并检查损失的尺度（是否用了求和而不是平均）；之后用 torch.autograd.set_detect_anomaly(True) 找出仍然产生第一个 NaN 的算子。"),
    ("The optimisation diverged from the first steps: lower the learning rate by an order of magnitude or more, add "
     "warmup, clip gradients (torch.nn.utils.clip_grad_norm_), and check the loss's scale (a sum instead of a mean); "
     "torch.autograd.set_detect_anomaly(True) then finds any operation that still produces the first NaN.",
     "优化从最初几步就发散了：把学习率降低一个数量级或更多，加入预热，裁剪梯度（torch.nn.utils.clip_grad_norm_），并检查损失的"
     "尺度（是否用了求和而不是平均）；之后用 torch.autograd.set_detect_anomaly(True) 找出仍然产生第一个 NaN 的算子。"),
    ("Guard the operation named by that warning (add eps to log/division inputs, filter degenerate samples), lower "
     "the learning rate or fix the warmup schedule, clip gradients; torch.autograd.set_detect_anomaly(True) finds the "
     "first NaN.", "保护该警告指出的算子（给 log/除法的输入加 eps，过滤退化样本），降低学习率或修正预热计划，开启梯度裁剪；"
     "torch.autograd.set_detect_anomaly(True) 可以找到第一个 NaN。"),
    ("Find the first non-finite value with torch.autograd.set_detect_anomaly(True) for one step; check inputs and "
     "targets for NaN/Inf and zeros fed to log or division, lower the learning rate or fix the warmup schedule, clip "
     "gradients.", "用 torch.autograd.set_detect_anomaly(True) 跑一步，找到第一个非有限值；检查输入和目标中的 NaN/Inf 以及"
     "传给 log 或除法的零，降低学习率或修正预热计划，开启梯度裁剪。"),
    ("Find the first non-finite value (set_detect_anomaly on one step), lower the learning rate, clip gradients, "
     "prefer bf16 to fp16.", "找到第一个非有限值（对一步使用 set_detect_anomaly），降低学习率，裁剪梯度，优先使用 bf16 而不是 fp16。"),
    ("The loss scale halved {n} times in a row at the end of the log, down to {v}: every step overflows, so the "
     "scaler skips them all and training makes no progress; the gradients are Inf/NaN.",
     "日志末尾损失缩放连续减半 {n} 次，降到 {v}：每一步都溢出，缩放器把它们全部跳过，训练没有任何进展；梯度是 Inf/NaN。"),
    ("The loss scaler reports it is at its minimum and cannot go lower ({who}): every step overflows, so the scaler "
     "skips them all and training makes no progress; the gradients are Inf/NaN.",
     "损失缩放器报告已到最小值、无法再降低（{who}）：每一步都溢出，缩放器把它们全部跳过，训练没有任何进展；梯度是 Inf/NaN。"),
    ("Switch to bf16, lower the learning rate or lengthen warmup, clip gradients, and find the operation that "
     "overflows in fp16 (set_detect_anomaly on one step).",
     "改用 bf16，降低学习率或延长预热，裁剪梯度，并找出在 fp16 下溢出的算子（对一步使用 set_detect_anomaly）。"),
]
