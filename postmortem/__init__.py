"""postmortem: why did a distributed training job die or hang? Evidence from the logs it left behind.

The package, in pipeline order (docs/ARCHITECTURE.md):
  ingest/    find input files (discover, archives), read them boundedly (textio), facts about the bundle
  parsers/   one parser per input kind (postmortem.parsers; the folder sits at the top of the repository)
  tables/    validated DataFrames (schema, column folding, joins), ranks resolved
  ranks/     where every rank was and how it ended, odd lines, culprits, flight-recorder matching and waits
  rules/     pure checks over the tables and `ranks` -> Findings
  verdict/   root cause vs cascade, sentences, advice, failure signals, evidence gaps
  reports/   render the Analysis: HTML, JSON, text (postmortem.reports; the folder sits at the top)
  api / cli  the facade (`analyze`) and its command-line skin
Beside the pipeline: catalog/ (message families from the libraries' sources), stacks/ (frames), collect/ (the job
wrapper that gathers evidence), progress (terminal bar)."""
from __future__ import annotations

import os as _os

__version__ = "0.1.0"

# In a source checkout parsers/ and reports/ sit beside this folder (the owner's layout); installed, they are
# postmortem/parsers and postmortem/reports. Let the checkout resolve postmortem.parsers / postmortem.reports the
# same way, so PYTHONPATH=checkout runs the checkout's parsers, never another install's.
_here = _os.path.dirname(_os.path.abspath(__file__))
_root = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "parsers")) and _os.path.isfile(_os.path.join(_root, "parsers", "__init__.py")):
    __path__.append(_root)  # noqa: F821 (a package's __path__)
__all__ = ["Analysis", "analyze", "__version__"]


def __getattr__(name: str):
    # Lazy, so that parsers can import postmortem.ingest.discover without pulling the whole pipeline (and pandas).
    if name in ("Analysis", "analyze"):
        from postmortem import api
        return getattr(api, name)
    raise AttributeError(name)
