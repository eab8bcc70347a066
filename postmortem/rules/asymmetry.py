"""The rule every failing job meets: ranks that ended differently (postmortem.ranks.culprits), classified by how the
culprits ended, not by what they printed. Specific rules that know the message win by confidence; this one names
the culprit when none does, and its category is the mechanism the ends show."""
from __future__ import annotations

from postmortem.ranks.culprits import Culprits, find_culprits
from postmortem.verdict.findings import Finding
from postmortem.rules import rule
from postmortem.verdict.sentences import ranks_phrase, sentence_case

# mechanism -> (category, confidence, title, remediation)
_MECHANISMS = {
    "extra-collective": (
        "barrier_skew", 0.7, "{who} waited in a collective the other ranks never called",
        "Make every rank run the same collectives: a collective inside rank-conditional code (a rank-0 save, eval or "
        "log that synchronises), or an extra step on the ranks with more data, leaves it waiting alone. Guard only "
        "the file write or print by rank, and give every rank the same number of batches (drop_last=True, "
        "DistributedSampler with even shards, torch.distributed.algorithms.Join)."),
    "left-while-waited": (
        "barrier_skew", 0.7, "{who} left while the other ranks were still in a collective",
        "A rank that leaves the training loop early (fewer batches in its shard, an early-stop or error check "
        "decided per rank, a `break` on a rank-local condition) strands its peers in the next collective. Make the "
        "decision collective (all_reduce the flag), give every rank the same number of batches (drop_last=True, even "
        "shards, torch.distributed.algorithms.Join)."),
    "other-call-site": (
        "barrier_skew", 0.7, "{who} waited in a different collective than the others",
        "The ranks' code paths diverged, so they wait in collectives that never match: find the branch that sends "
        "the odd rank to its call site (rank-conditional code, a per-rank data condition such as an empty or NaN "
        "batch, uneven batch counts) and make every rank call the same collectives in the same order."),
    "late-arrival": (
        "straggler", 0.65, "{who} reached the collective only after the others had timed out",
        "The late rank was busy elsewhere for longer than the collective timeout (data preparation, evaluation, "
        "saving on one rank): do that work on every rank or before the process group starts, or raise the timeout "
        "for it; its last lines before the collective say what it did."),
    "first-to-wait": (
        "barrier_skew", 0.65, "{who} waited alone in a collective the others never joined",
        "The ranks ran different collective sequences: one entered a collective (an extra barrier or gather, the "
        "end-of-epoch sync after running out of data) the others did not call. Make every rank run the same "
        "collectives: equal batch counts (drop_last=True, even shards, Join), rank-independent control flow."),
    "busy-while-waited": (
        "straggler", 0.65, "{who} was busy outside collectives while the others waited",
        "Move the long work off the collective path (do it on every rank, before the process group starts, or in a "
        "background thread), or raise the collective timeout for it; the stack shows where the rank was."),
    "never-reached": (
        "straggler", 0.5, "{who} never reached the collective the others waited in",
        "Find what that rank did after its last line: take py-spy dumps of every rank when the job stalls "
        "(`py-spy dump --pid`), and enable the flight recorder (TORCH_FR_BUFFER_SIZE) to see who lagged."),
    "gone": (
        "rank_crash", 0.55, "{who} left without a word while the others were in a collective",
        "The rank's process ended without printing an exception (os._exit, a native crash without faulthandler, a "
        "kill from outside): run with PYTHONFAULTHANDLER=1, check dmesg and the scheduler for kills, and read its "
        "last lines (cited) for what it did last."),
    "lagging": (
        "straggler", 0.55, "{who} fell behind on the collectives",
        "The lagging rank stopped issuing collectives: look at what it did instead (stacks, its last lines)."),
    "named-absent": (
        "straggler", 0.8, "{who} never reached the barrier the library was watching",
        "The library named the rank that never arrived; find what it did instead after its last line (a long "
        "data preparation, a loop that never ends, a lock): py-spy dump it on the next stall. If the work is "
        "legitimate, move it out of the collective's window or raise the timeout; if it should be quick, fix it."),
    "named-elsewhere": (
        "barrier_skew", 0.8, "{who} waited in another collective than the one the library was watching",
        "The named rank called a different collective than its peers: find the branch that sent it there "
        "(rank-conditional code, a per-rank data condition) and make every rank call the same collectives."),
    "odd-size": (
        "barrier_skew", 0.75, "{who} held data of another size than its peers, and the collective over it mismatched",
        "Make the tensors every rank passes to the collective the same shape: pad to a common length (all_reduce "
        "the max size first, then pad and trim), use all_gather_object for ragged data, or give every rank the same "
        "number of examples (DistributedSampler pads; drop_last=True)."),
    "announced-divergence": (
        "barrier_skew", 0.75, "{who} took another branch and skipped a collective its peers were in",
        "The rank said which branch it took (its last line, cited) and so skipped a collective its peers waited "
        "in: decide such branches collectively (all_reduce the condition, or run the collective with an empty or "
        "zero contribution instead of skipping it) so every rank issues the same collectives."),
    "ahead-of-peers": (
        "barrier_skew", 0.6, "{who} moved on to a later collective than its peers",
        "The ranks' collective sequences diverged: one side skipped a collective the other still waits in (a "
        "metric logged with sync only when a condition holds on that rank, a rank-dependent branch). Make every "
        "rank issue the same collectives in the same order (log the metric on every rank, with a neutral value "
        "where it is undefined; decide branches collectively)."),
    "odd-lines": (
        "unknown", 0.35, "{who} printed something no other rank did before the job failed",
        "Read the odd rank's last lines (cited): they are the best lead; collect py-spy dumps and the flight "
        "recorder next time to see where it was."),
}
_ROOT_ENDS = {
    "fatal_signal": ("rank_crash", 0.6, "{who} died of a fatal signal",
                     "A native crash (segfault, abort, bus error): run with PYTHONFAULTHANDLER=1 and a core dump "
                     "(ulimit -c unlimited) to see the C/C++ frame; check extensions, custom ops and data-dependent "
                     "indexing."),
    "exited": ("rank_crash", 0.65, "{who} logged an error and exited",
               "The rank stopped itself: it logged why (its last line, cited) and exited with an error code, and "
               "the others then lost it in their next collective. Fix what that line names (the data, shard or "
               "setting it checked); where the condition can hold on one rank only, decide it collectively "
               "(all_reduce a flag, then every rank stops or skips together) instead of exiting alone."),
    "left": ("rank_crash", 0.4, "{who} exited with an error code and no message",
             "Find the exit: an explicit sys.exit/os._exit with an error code, a native crash, or a kill from outside "
             "(dmesg, the scheduler)."),
}


# category of a culprit's own exception (postmortem.catalog) -> (title, remediation)
_BY_CATEGORY = {
    "host_oom": ("host memory refused", "The process asked for more host RAM than it could get (MemoryError, "
                 "`DefaultCPUAllocator: can't allocate memory`, std::bad_alloc): check the allocation's size (a "
                 "corrupt length or shape in the data makes it absurd), stream or shard the data instead of "
                 "materialising it, lower the batch, or give the job more memory."),
    "gpu_oom": ("GPU out of memory", "Lower the batch of the phase that failed, free memory before it "
                "(torch.cuda.empty_cache()), use torch.no_grad() for evaluation, or "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."),
    "dataloader_failure": ("its DataLoader failed", "Fix the dataset code that raised in the worker (the worker's "
                           "traceback is in the log); for killed workers check shared memory (/dev/shm) and host "
                           "RAM; num_workers=0 reproduces it in the main process."),
    "checkpoint_corruption": ("reading or writing a checkpoint failed", "Make the checkpoint write atomic (write to "
                              "a temporary file, then rename), have one rank write and the others wait at a barrier "
                              "before reading, and check the disk has room; delete a truncated checkpoint before "
                              "resuming."),
    "nan_inf": ("a numeric failure", "Find the first non-finite value (set_detect_anomaly on one step), lower the "
                "learning rate, clip gradients, prefer bf16 to fp16."),
    "ddp_usage_error": ("DDP misuse", "Fix the model/DDP usage the message names (find_unused_parameters, the same "
                        "model on every rank, no parameter used twice with reentrant checkpointing)."),
    "nccl_error": ("a communication error", "Check the network/transport the error names; run nccl-tests on the "
                   "same nodes."),
    "gpu_hardware": ("a GPU hardware fault", "Drain the node and run the vendor diagnostics (dcgmi diag)."),
    "logging_blocking": ("its logger failed", "Guard the logger call (timeouts, offline mode) so a logging "
                         "problem cannot stop training."),
    "rank_crash": ("an exception of its own", "Fix the exception on the culprit rank (cited); the others' errors "
                   "follow from it."),
}


def asymmetry_finding(c: Culprits, ranks) -> Finding | None:
    """The finding for an end-state asymmetry, or None when it names no culprit (or a root exception, which the
    exception rules classify)."""
    if not c.ranks:
        return None
    if c.mechanism in _MECHANISMS:
        category, conf, title, fix = _MECHANISMS[c.mechanism]
    elif c.mechanism in ("root-failure", "single-rank"):
        mine = ranks[ranks["rank"].isin(c.ranks)] if ranks is not None else None
        ends = set(mine["end"].dropna()) if mine is not None else set()
        end = next((e for e in ("fatal_signal", "left", "exited") if e in ends), None)
        if end is not None:
            category, conf, title, fix = _ROOT_ENDS[end]
        else:
            cats = [x for x in (mine["end_category"].dropna().tolist() if mine is not None and
                                "end_category" in mine.columns else []) if x]
            if "exception" not in ends or not cats:
                return None  # kills: the memory rules read the kernel's and the launcher's lines
            category, basis = cats[0].split(":", 1)
            if category not in _BY_CATEGORY:
                return None
            conf = {"family": 0.7, "class": 0.65, "frame": 0.6}.get(basis, 0.5)
            title, fix = _BY_CATEGORY[category]
            title = "{who} failed first: " + title
    else:
        return None
    conf = min(conf, 0.3 + 0.5 * c.strength) if c.strength < 0.8 else conf
    who = ranks_phrase(c.ranks, capital=True)
    return Finding(rule="end-state-asymmetry", category=category, confidence=conf, severity="critical",
                   title=title.format(who=who),
                   explanation=sentence_case(c.reason) + ". Compared how every rank ended; the others' ends follow "
                               "from it.",
                   remediation=fix, culprit_ranks=c.ranks, affected_ranks=c.affected, evidence=list(c.evidence),
                   order=(1, float("inf")), explains=("collective_timeout", "rank_crash", "nccl_error", "unknown"))


@rule(id="end-state-asymmetry", title="The ranks that ended differently from the rest", category="barrier_skew",
      severity="critical",
      description="Compares how every rank ended (exception, fatal signal, kill, normal exit, waiting in a collective, "
                  "busy elsewhere): the minority whose end is not a consequence of another rank's is the culprit. "
                  "A rank still in a collective after the others exited called one they never did; a rank that left "
                  "while the others waited ran fewer; a rank busy or silent while the others timed out never came.",
      remediation="See the finding: the fix follows from how the culprit diverged.",
      false_positives=("A rank that ended early on purpose (its own stop condition) while the others were still "
                       "training, with the job otherwise healthy.",))
def end_state_asymmetry(tables):
    c = tables.meta.get("culprits")
    ranks = tables.frames.get("ranks")
    if c is None:
        c = find_culprits(ranks)
    f = asymmetry_finding(c, ranks)
    return [f] if f else []
