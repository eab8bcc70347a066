"""verdict.next: the failure domain and the action from the root's category and mechanism (postmortem.verdict.next_action),
as a pure function with positive and negative cases, and on real runs through the whole pipeline."""
from __future__ import annotations

import json
import os

import pytest

import postmortem
from postmortem.verdict.next_action import (ACTIONS, CATEGORY_NEXT, DOMAINS, REASON_NEXT, RULE_NEXT, NextFacts, decide,
                                    headline)
from postmortem.verdict.findings import CATEGORIES
from postmortem.verdict.recurrence import Outcome, compare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAB = os.path.join(ROOT, "benchmarks", "lab", "cases")
CORPUS = "/work/shared/corpus"
SAMPLES = os.path.join(ROOT, "samples")


def facts(category, **kw) -> NextFacts:
    return NextFacts(category=category, confidence=kw.pop("confidence", 0.85), **kw)


# --- the mapping as data --------------------------------------------------------------------------------------

def test_every_category_has_an_entry_and_every_entry_is_in_the_vocabulary():
    assert set(CATEGORIES) <= set(CATEGORY_NEXT)
    for table in (CATEGORY_NEXT, RULE_NEXT, REASON_NEXT):
        for domain, action in table.values():
            assert domain in DOMAINS and action in ACTIONS


@pytest.mark.parametrize("category", ["gpu_oom", "host_oom", "dataloader_failure", "barrier_skew", "straggler",
                                      "logging_blocking", "checkpoint_corruption", "nan_inf", "ddp_usage_error",
                                      "rank_crash"])
def test_workload_faults_need_a_change(category):
    n = decide(facts(category, culprit_ranks=[3], culprit_hosts={3: "node7"}, all_hosts=["node7", "node8"]))
    assert (n.domain, n.action, n.hosts) == ("workload", "change", [])   # a workload fault never drains a host
    assert "change" in n.why and "node7" not in n.why


def test_a_gpu_fault_on_one_host_drains_that_host():
    n = decide(facts("gpu_hardware", culprit_ranks=[5], culprit_hosts={5: "gpu-node-12"},
                     all_hosts=["gpu-node-11", "gpu-node-12"]))
    assert (n.domain, n.action, n.hosts, n.ranks) == ("infrastructure", "drain", ["gpu-node-12"], [5])
    assert "gpu-node-12" in n.why and "gpu-node-12" in n.why_zh


def test_a_kernel_line_names_the_faulty_host_before_the_culprits_host():
    n = decide(facts("gpu_hardware", culprit_ranks=[0], culprit_hosts={0: "a"}, fault_hosts=["b"],
                     all_hosts=["a", "b"]))
    assert n.hosts == ["b"]


def test_no_drain_when_every_host_of_a_multi_host_job_is_named():
    # an NCCL error seen on every node is no one host's fault: without a host, a transport error is restarted
    n = decide(facts("nccl_error", culprit_ranks=[0, 1], culprit_hosts={0: "a", 1: "b"}, all_hosts=["a", "b"]))
    assert (n.domain, n.action, n.hosts) == ("infrastructure", "restart", [])


def test_an_infrastructure_fault_without_host_or_rank():
    assert decide(facts("nccl_error")).action == "restart"
    assert decide(facts("gpu_hardware")).action == "investigate"
    # a culprit rank without a known host: drain the node that ran it, said by rank
    n = decide(facts("gpu_hardware", culprit_ranks=[2]))
    assert (n.action, n.hosts, n.ranks) == ("drain", [], [2]) and "rank 2" in n.why


@pytest.mark.parametrize("rule,want", [("gpu-memory-held-elsewhere", ("infrastructure", "drain")),
                                       ("first-collective-never-completed", ("infrastructure", "investigate")),
                                       ("rank-exited-silently", ("unknown", "investigate")),
                                       ("bare-collective-timeout", ("unknown", "investigate"))])
def test_rules_whose_mechanism_is_not_their_categorys(rule, want):
    cat = {"gpu-memory-held-elsewhere": "gpu_oom", "first-collective-never-completed": "nccl_error",
           "rank-exited-silently": "rank_crash", "bare-collective-timeout": "collective_timeout"}[rule]
    n = decide(facts(cat, rule=rule, culprit_ranks=[1], culprit_hosts={1: "h1"}, all_hosts=["h1", "h2"]))
    assert (n.domain, n.action) == want
    # the same category from another rule keeps the category's entry
    assert (decide(facts(cat, rule="some-other-rule")).domain, ) == (CATEGORY_NEXT[cat][0],)


def test_sigbus_inside_nccl_is_a_setting_of_the_job_other_signals_are_not():
    assert decide(facts("nccl_error", rule="fatal-signal-in-nccl", reason="SIGBUS")).action == "change"
    assert decide(facts("nccl_error", rule="fatal-signal-in-nccl", reason="SIGSEGV")).domain == "infrastructure"


@pytest.mark.parametrize("reason,want", [("time_limit", "restart"), ("preemption", "restart"),
                                         ("eviction", "restart"), ("cancelled", "investigate")])
def test_job_stopped_by_its_reason(reason, want):
    # the category is being added elsewhere (branch ecosystem): handled by its id string alone
    assert decide(facts("job_stopped", reason=reason)).action == want


def test_job_stopped_node_failure_drains_the_node():
    n = decide(facts("job_stopped", reason="node_failure", culprit_ranks=[4], culprit_hosts={4: "n3"},
                     all_hosts=["n1", "n3"]))
    assert (n.action, n.hosts) == ("drain", ["n3"])


# Exception lines quoted from real runs (lab cases' consoles, shared/captured): what the exception itself says.
CONNECT = ("RuntimeError: Gloo connectFullMesh failed with [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
           "pair.cc:152] timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:18317$1")
VALUE = ("ValueError: all the input array dimensions except for the concatenation axis must match exactly, but along "
         "dimension 1, the array at index 0 has size 4 and the array at index 1 has size 5")


def test_a_crash_whose_exception_is_a_connection_failure_is_restarted():
    n = decide(facts("rank_crash", rule="first-exception", exception=CONNECT))
    assert (n.domain, n.action, n.basis) == ("infrastructure", "restart", "exception:network")


def test_a_crash_of_the_code_is_changed():
    n = decide(facts("rank_crash", rule="first-exception", exception=VALUE))
    assert (n.domain, n.action, n.basis) == ("workload", "change", "category:rank_crash")


def test_unknown_and_bare_timeouts_are_investigated():
    for cat in ("unknown", "collective_timeout"):
        assert (decide(facts(cat)).domain, decide(facts(cat)).action) == ("unknown", "investigate")


def test_no_failure():
    assert (decide(facts("no_failure")).action, decide(facts("no_failure")).domain) == ("none", "none")
    hedged = decide(facts("no_failure", confidence=0.4, hedged_no_failure=True))
    assert (hedged.domain, hedged.action) == ("unknown", "investigate")


def test_a_weak_verdict_is_investigated_before_changing_or_draining():
    n = decide(facts("gpu_oom", confidence=0.3))
    assert n.action == "investigate" and "0.30" in n.why and "0.30" in n.why_zh
    assert decide(facts("gpu_oom", confidence=0.45)).action == "change"


def test_a_restart_that_recurred_without_progress_becomes_a_change():
    first = Outcome("attempt 1", "rank_crash", "rank_crash: RuntimeError", [1], 12, 0, 0)
    again = Outcome("attempt 2", "rank_crash", "rank_crash: RuntimeError", [1], 12, 0, 0)
    rec = compare("restarts", [first, again], 0)
    n = decide(facts("rank_crash", rule="first-exception", exception=CONNECT, recurrence=rec))
    assert n.action == "change" and n.basis.endswith("+recurred") and "attempt 2" in n.why
    # progress in between (a later step) keeps the restart
    better = Outcome("attempt 2", "rank_crash", "rank_crash: RuntimeError", [1], 40, 0, 0)
    n = decide(facts("rank_crash", rule="first-exception", exception=CONNECT,
                     recurrence=compare("restarts", [first, better], 0)))
    assert n.action == "restart" and "progresses" in n.why
    # another root on the restart is no recurrence
    other = Outcome("attempt 2", "barrier_skew", "barrier_skew", [], None, 0, 0)
    n = decide(facts("rank_crash", rule="first-exception", exception=CONNECT,
                     recurrence=compare("restarts", [first, other], 0)))
    assert n.action == "restart" and "not recurred" in n.why


def test_the_why_says_the_same_in_english_and_chinese():
    n = decide(facts("gpu_hardware", culprit_ranks=[5], culprit_hosts={5: "gpu-node-12"},
                     all_hosts=["gpu-node-11", "gpu-node-12"]))
    assert headline(n, "en").startswith("drain") and headline(n, "zh").startswith("下线")
    assert "gpu-node-12" in n.why_zh


# --- through the pipeline, on real runs ---------------------------------------------------------------------

@pytest.mark.parametrize("sample", sorted(d for d in os.listdir(SAMPLES) if os.path.isdir(os.path.join(SAMPLES, d,
                                                                                                         "logs"))))
def test_every_sample_verdict_has_a_next_action_in_json_text_and_html(sample):
    a = postmortem.analyze(os.path.join(SAMPLES, sample, "logs"), quiet=True)
    nxt = a.to_dict()["verdict"]["next"]
    assert nxt["domain"] in DOMAINS and nxt["action"] in ACTIONS and nxt["why"]
    assert json.loads(json.dumps(nxt)) == nxt
    expected = json.load(open(os.path.join(SAMPLES, sample, "expected.json")))["category"]
    assert nxt["action"] == ("none" if expected == "no_failure" else "change")  # every sample is the workload's
    assert "NEXT" in a.to_text() and "下一步" in a.to_text("zh")
    html = a.to_html(figures=False)
    assert 'class="pm-next' in html and a.verdict.next.why.split(":")[0] in html
    assert a.verdict.next is not None and repr(a.verdict.next).startswith("NextAction(")


@pytest.mark.skipif(not os.path.isdir(CORPUS), reason="needs the shared corpus")
def test_a_real_gpu_fault_names_the_host_to_drain():
    case = os.path.join(CORPUS, "gpu_hardware__syncbn-ddp-gpu-lost-xid79")
    nxt = postmortem.analyze(case, quiet=True).verdict.next
    # no host name in the posted lines: the node is the one whose nvidia-smi/kernel output shows the lost GPU
    assert (nxt.domain, nxt.action) == ("infrastructure", "drain") and "nvidia-smi.txt" in nxt.why
    assert nxt.evidence and nxt.evidence[0]["supports"] == "domain"


def test_a_drain_names_the_fault_line_when_no_host_or_rank_is_known():
    n = decide(facts("gpu_hardware", fault_lines=["dmesg.txt:12"]))
    assert (n.action, n.hosts) == ("drain", []) and "dmesg.txt:12" in n.why and "dmesg.txt:12" in n.why_zh


# NCCL's own words (lines quoted from shared/corpus): a setting of the job, or the network
NCCL_OOM = ("ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory' "
            "ng30903:3063028:3066152 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes")
NCCL_SHM = "gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device"
NCCL_IB = ("NCCL WARN NET/IB : Got completion from peer 10.0.0.12<40123> with error 12, opcode 0, len 0, "
           "vendor err 129")


@pytest.mark.parametrize("words,want", [(NCCL_OOM, ("workload", "change", "message:memory")),
                                        (NCCL_SHM, ("workload", "change", "message:shm")),
                                        (NCCL_IB, ("infrastructure", "restart", "category:nccl_error"))])
def test_an_nccl_failure_by_what_nccl_said(words, want):
    n = decide(facts("nccl_error", rule="nccl-failure", exception=words))
    assert (n.domain, n.action, n.basis) == want
    # the same words on a crash of the code are no NCCL setting
    if want[2].startswith("message:"):
        assert decide(facts("rank_crash", rule="first-exception", exception=words)).domain != "workload" or \
            decide(facts("rank_crash", rule="first-exception", exception=words)).basis == "category:rank_crash"


@pytest.mark.skipif(not os.path.isdir(CORPUS), reason="needs the shared corpus")
def test_a_container_without_shared_memory_is_a_change_not_a_drain():
    case = os.path.join(CORPUS, "nccl_error__docker-default-64mb-dev-shm-posix-fallocate")
    nxt = postmortem.analyze(case, quiet=True).verdict.next
    assert (nxt.domain, nxt.action) == ("workload", "change") and "/dev/shm" in nxt.why
