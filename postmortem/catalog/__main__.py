"""python -m postmortem.catalog coverage | report | build ...: the catalog's maintenance commands."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """Dispatches to coverage.py, report.py or build.py."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv.pop(0) if argv else ""
    if cmd == "coverage":
        from postmortem.catalog import coverage
        coverage.main(argv)
    elif cmd == "report":
        from postmortem.catalog import report
        report.main(argv)
    elif cmd == "build":
        from postmortem.catalog import build
        build.main(argv)
    else:
        print("usage: python -m postmortem.catalog {coverage|report|build} ...", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
