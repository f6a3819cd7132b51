"""(filled in by issue 14: see webhook/core/operators/__init__.py)"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.core.operators import Reader

READERS: Mapping[tuple[str, str], Reader] = {}
