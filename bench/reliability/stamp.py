"""Add the commit a results file was measured on: ``python -m bench.reliability.stamp FILE...``.

The fuzz and e2e-restart figures are written by test modules (``FUZZ_REPORT``, ``RELIABILITY_OUT``),
which know nothing of git; ``make fuzz`` and ``make reliability`` stamp their files right after the
run, so every figure RELIABILITY.md prints names its commit (``common.provenance``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bench.reliability.common import provenance


def stamp(path: Path) -> None:
    data = json.loads(path.read_text())
    data.update(provenance())
    data.setdefault("finished", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(path.stat().st_mtime)))
    path.write_text(json.dumps(data, indent=2, default=str))


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    for name in argv:
        stamp(Path(name))
        print(f"stamped {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
