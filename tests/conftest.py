import sys as _sys

# 500-deep directory fixtures: pytest's tmp_path cleanup (shutil.rmtree) recurses once per level.
_sys.setrecursionlimit(max(_sys.getrecursionlimit(), 20000))
