"""postmortem: why did a distributed training job die or hang? Evidence from the logs it left behind.

The package, in pipeline order:
  discover      find input files, sniff their kind (textio: bounded reading)      -> Sources
  (parsers/)    one parser per input kind                                          -> rows per table
  tables        validated DataFrames (schema, columns), ranks resolved (bundle, joins)
  rank_state    where every rank was when the job stopped                          -> the `ranks` table
  rules/        pure checks over the tables and `ranks` (facts, phase: shared views) -> Findings
  signals       failure signals and normal-end markers
  verdict       root cause vs cascade                                              -> Verdict
  gaps          evidence to collect next time
  api / cli     the facade (`analyze`) and its command-line skin; (reports/) render the Analysis
Helpers beside the pipeline: stacks/ (frame normalisation, classification, merging), fr_match (flight-recorder
matching), fr_waits (flight-recorder culprits from the wait graph), engines (Dask), progress (terminal bar), collect/
(the job wrapper that gathers evidence)."""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["Analysis", "analyze", "__version__"]


def __getattr__(name: str):
    # Lazy, so that parsers can import postmortem.discover without pulling the whole pipeline (and pandas).
    if name in ("Analysis", "analyze"):
        from postmortem import api
        return getattr(api, name)
    raise AttributeError(name)
