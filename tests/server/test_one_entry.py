"""The server reaches the core through its one entry for every kind: the same ``engine.judge`` that
``check`` calls, so the webhook and the CI checker cannot run different code (DRA claims used to be
judged by the server calling ``dra.judge_claim`` itself)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webhook.core import engine, settings as settings_mod
from webhook.server import admission, review
from tests.core.test_dra import claim, exactly
from tests.server.test_dra_routes import review as claim_review


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> list[engine.Request]:
    seen: list[engine.Request] = []
    real = engine.judge

    def judge(asked: engine.Request, *args: Any, **kw: Any) -> engine.Judgement:
        seen.append(asked)
        return real(asked, *args, **kw)

    monkeypatch.setattr(engine, "judge", judge)
    return seen


@pytest.mark.parametrize("operation, route", [
    pytest.param("CREATE", "mutate", id="mutate-create"),
    pytest.param("CREATE", "validate", id="validate-create"),
    pytest.param("UPDATE", "validate", id="validate-update"),
])
def test_claims_reach_the_core_through_its_entry(calls: list[engine.Request], operation: str, route: str) -> None:
    req = review.parse(_encoded(claim_review(claim(exactly("gpus", 4)), operation=operation)), "application/json")
    s = settings_mod.default()
    out = admission.mutate(req, s) if route == "mutate" else admission.validate(req, s, mode="enforce")
    assert [c.operation for c in calls] == [operation]
    assert out.judged


def _encoded(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()
