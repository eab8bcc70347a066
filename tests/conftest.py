import sys as _sys

# 500-deep directory fixtures: pytest's tmp_path cleanup (shutil.rmtree) recurses once per level.
_sys.setrecursionlimit(max(_sys.getrecursionlimit(), 20000))

import os as _os

# A rule that raises is a bug: in the tests it fails the test instead of becoming a rule_errors entry.
_os.environ.setdefault("POSTMORTEM_STRICT_RULES", "1")

# Tests leave no temporary files behind: every temporary file of the session (this process's, the CLI's and the
# collector's subprocesses', pytest's own tmp_path folders) lives under one private folder, which must hold nothing
# but pytest's folders when the session ends; it is removed then either way.
import shutil as _shutil
import tempfile as _tempfile

_SESSION_TMP = _tempfile.mkdtemp(prefix="pm-tests-")
_os.environ["TMPDIR"] = _SESSION_TMP
_tempfile.tempdir = _SESSION_TMP
# the real torch jobs some tests run keep torch's compile cache here (theirs, not a leak of postmortem or a test)
_TORCH_CACHE = "torch-cache"
_os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", _os.path.join(_SESSION_TMP, _TORCH_CACHE))


def pytest_sessionfinish(session, exitstatus):
    left = sorted(n for n in _os.listdir(_SESSION_TMP) if not n.startswith("pytest-of-") and n != _TORCH_CACHE)
    _shutil.rmtree(_SESSION_TMP, ignore_errors=True)
    if left:
        import sys
        print(f"\ntests left temporary files behind: {', '.join(left[:20])}", file=sys.stderr)
        session.exitstatus = 1
