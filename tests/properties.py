"""How many examples a property test draws, scaled by the Hypothesis profile (tests/conftest.py).

A test that needs more than Hypothesis' default writes ``@settings(max_examples=examples(300))``:
300 under the profile ``make test`` and CI run, a fifth of it under ``quick`` (``make test-core``),
ten times it under ``thorough``. Never fewer than 10, so a quick run still exercises the property.
"""

from __future__ import annotations

import os

SCALE = {"gpu-admission": 1.0, "quick": 0.2, "thorough": 10.0}


def examples(n: int) -> int:
    """``n`` examples, scaled for the profile in ``HYPOTHESIS_PROFILE``."""
    return max(10, round(n * SCALE.get(os.environ.get("HYPOTHESIS_PROFILE", "gpu-admission"), 1.0)))
