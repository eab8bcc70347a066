import sys as _sys

# 500-deep directory fixtures: pytest's tmp_path cleanup (shutil.rmtree) recurses once per level.
_sys.setrecursionlimit(max(_sys.getrecursionlimit(), 20000))

import os as _os

# A rule that raises is a bug: in the tests it fails the test instead of becoming a rule_errors entry.
_os.environ.setdefault("POSTMORTEM_STRICT_RULES", "1")
