"""Issue 24, point 6, the other door: ``check`` reports a templated GPU quantity instead of denying it
(tests/cli/test_templated.py), but at admission nothing changes. kube-apiserver refuses such a
quantity before any webhook sees it; whatever does reach /validate is judged as written, and a GPU
count that is no number is denied ``invalid-gpu-request``, never skipped."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.server.test_app import client, post, review, vllm_pod  # noqa: F401  (client is a fixture)


@pytest.mark.parametrize("gpus", [pytest.param("$GPU_PER_NODE", id="envsubst"),
                                  pytest.param("{{ .Values.gpus }}", id="helm"),
                                  pytest.param("", id="empty")])
def test_validate_denies_a_templated_gpu_quantity(client: FlaskClient, gpus: Any) -> None:  # noqa: F811
    status, body = post(client, "/validate", review(vllm_pod(gpus=gpus)))
    response = body["response"]
    assert status == 200 and response["allowed"] is False
    assert "invalid-gpu-request" in response["status"]["message"]
    assert "templated" not in response["status"]["message"]
