"""One attempt's verdict from its tables: the stages between the tables and the decision, in order."""
from __future__ import annotations


def judge(work, selected: list, has_inputs: bool = True, baseline: set[int] | None = None):
    """(verdict, findings) of one attempt's tables: rank state -> odd lines -> culprits -> rules -> failure signals
    -> verdict. Fills work's `ranks` and `odd_lines` frames and its culprits and signals."""
    from postmortem.verdict import signals as signals_mod
    from postmortem.verdict import decide as verdict_mod
    from postmortem.ranks.state import rank_state
    from postmortem.rules import run_rules
    from postmortem.ranks.culprits import find_culprits
    from postmortem.ranks.refine import refine
    from postmortem.ranks.odd_lines import odd_lines
    from postmortem.tables.schema import conform, documented_dtypes
    # stage 4: where every rank was when the job stopped (in the dtypes docs/tables.md promises)
    work.frames["ranks"] = conform(rank_state(work), documented_dtypes("ranks"))
    work.frames["odd_lines"] = odd_lines(work, baseline)  # templates a minority printed near their end
    work.meta["culprits"] = find_culprits(work.frames["ranks"], work.frames["odd_lines"])  # end-state asymmetry
    work.meta["culprits"] = refine(work.meta["culprits"], work)  # what the library and the ranks' sequences say
    findings = run_rules(work, selected)
    signals = signals_mod.collect(work)
    work.meta["signals"] = signals
    return verdict_mod.decide(findings, has_inputs, signals, work.frames["ranks"], work.meta.get("culprits"))
