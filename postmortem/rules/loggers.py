"""An experiment tracker that ended the run itself: wandb.init timing out waiting for its service process, the
service gone; the tracker says so on its own error line and the rank raises right after."""
from __future__ import annotations

import re

from postmortem.rules import facts, rule
from postmortem.verdict.findings import Finding

# wandb's own words when its service process does not answer (wandb/sdk/wandb_init.py: 0.12-0.15 `Error
# communicating with wandb process, exiting...` and the init-start-error docs link; 0.16+ `Run initialization has
# timed out after {timeout} sec.`; wandb_manager.py `Connection to wandb service failed`, `Timeout attaching to run`)
_TRACKER_DOWN = re.compile(r"(?i)communicating with wandb process|initialization has timed out|"
                           r"connection to wandb service failed|timeout attaching to run|init-start-error")
REACH = 12  # lines from the tracker's error to the traceback it raised (its docs link and a blank between)


@rule(id="tracker-ended-the-run", title="The experiment tracker ended the run", category="logging_blocking",
      severity="critical",
      description="wandb reported that its service process did not answer (wandb.init timed out, the service "
                  "connection failed) and the rank raised an exception right after: the run died in the logger, "
                  "not in training.",
      remediation="Raise wandb's init timeout (wandb.init(settings=wandb.Settings(init_timeout=300))), start the "
                  "tracker on one rank only, run with WANDB_MODE=offline and sync later, or disable it "
                  "(WANDB_MODE=disabled) to confirm; check the service (wandb-core) is not starved of CPU or killed.",
      false_positives=("A wandb error the run went on from (a warning-level retry that succeeded).",))
def tracker_ended_the_run(tables):
    wb = facts.ev(tables, "wandb")
    if wb.empty:
        return []
    down = wb[wb["message"].map(lambda m: bool(_TRACKER_DOWN.search(str(m))))]
    tb = tables.tracebacks
    if down.empty or tb.empty:
        return []
    st = tables.steps
    for _, e in down.iterrows():
        after = tb[(tb["source"] == e["source"]) & (tb["line"] > e["line"]) & (tb["line"] <= e["line"] + REACH)]
        if after.empty:
            continue
        t = after.iloc[0]
        if len(st) and ((st["source"] == e["source"]) & (st["line"] > e["line"]) & (st["line"] < t["line"])).any():
            continue  # progress in between: the run went on from the tracker's trouble
        exc = "" if t["exc_type"] == "<truncated>" else f" ({t['exc_type']})"
        return [Finding(rule="tracker-ended-the-run", category="logging_blocking", confidence=0.7,
                        severity="critical", title="wandb's service did not answer and the run died in it",
                        explanation=f"wandb reported that it could not reach its service process "
                                    f"('{str(e['message'])[:160]}', line {facts._int(e['line'])}) and the rank raised "
                                    f"an exception{exc} right after: the run ended in the logger's start-up, not "
                                    "in training.",
                        remediation="Raise wandb's init timeout (wandb.init(settings=wandb.Settings(init_timeout="
                                    "300))), initialise it on one rank only, or run with WANDB_MODE=offline and sync "
                                    "later; WANDB_MODE=disabled confirms.",
                        culprit_ranks=[r for r in [facts._int(e["rank"])] if r is not None],
                        evidence=facts.evidence_from(down, 2) + [facts.tb_evidence(t)],
                        order=facts.order_key(e), explains=("rank_crash", "collective_timeout", "unknown"))]
    return []
