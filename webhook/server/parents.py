"""The stored object a ``scale`` subresource request is for, read from the API server.

A Scale (``autoscaling/v1``) carries the replica counts and nothing of the pod template, so to say
whether a scale-up's new pods will be admitted (``admission._scale``) the server reads the object
itself: one GET of ``/apis/<group>/<version>/namespaces/<ns>/<resource>/<name>``, with the group,
version and resource kube-apiserver names in the request (``request.resource``), on scale-ups only,
with a short timeout (the webhook entry has ``failurePolicy: Ignore`` and is never in the way of a
scale). This is the one API call on a request path; everything else reads the node watch's snapshot.

Credentials as the node watch loads them (in-cluster service account, else the kubeconfig), on the
first scale-up, not at start: a server that never sees one never needs them. RBAC: ``get`` on the
kinds the scale entry sends (manifests/base/rbac.yaml, ``gpu-admission-scale-reader``).
"""

from __future__ import annotations

import threading
from typing import Any

from webhook.server.review import Request

TIMEOUT = 1.5
"""Seconds for the GET (the webhook entry's timeoutSeconds is 3)."""
CONCURRENT = 2
"""GETs one worker makes at a time: a burst of HPA scale-ups while the API server is slow holds at
most this many of the worker's 8 admission threads for :data:`TIMEOUT`; the others are answered at
once ("scale-up not checked ... busy"), so reviews are never starved by scale checks."""


class ParentReader:
    """``reader(req)`` -> the object as a dict; raises ``LookupError`` with a reason otherwise.

    Through the client's ``CustomObjectsApi.get_namespaced_custom_object``: despite its name it is a
    GET of ``/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>`` for any group (``apps``
    included), answered as a plain dict, and its signature is the same across client releases (the
    low-level ``ApiClient.call_api`` changed shape in kubernetes 31+)."""

    def __init__(self, kubeconfig: str | None = None, *, timeout: float = TIMEOUT, api: Any = None,
                 concurrent: int = CONCURRENT) -> None:
        self._kubeconfig = kubeconfig
        self._timeout = timeout
        self._api = api
        self._lock = threading.Lock()
        self._concurrent = concurrent
        self._slots = threading.BoundedSemaphore(concurrent)

    def _client(self) -> Any:
        with self._lock:
            if self._api is None:
                from kubernetes.client import CustomObjectsApi

                from webhook.server.node_watch import load_client

                try:
                    self._api = CustomObjectsApi(load_client(self._kubeconfig).api_client)
                except Exception as exc:  # noqa: BLE001 - no credentials: said in the reply
                    raise LookupError(f"no Kubernetes credentials: {exc}") from exc
            return self._api

    def __call__(self, req: Request) -> Any:
        res = req.resource
        group, version, resource = res.get("group"), res.get("version"), res.get("resource")
        if not (isinstance(group, str) and group and isinstance(version, str) and version
                and isinstance(resource, str) and resource and req.namespace and req.name):
            raise LookupError("the request names no object of an API group")
        from kubernetes.client.exceptions import ApiException

        if not self._slots.acquire(blocking=False):
            raise LookupError(f"busy: {self._concurrent} scale-ups already being checked by this worker")
        try:
            return self._client().get_namespaced_custom_object(group, version, req.namespace, resource, req.name,
                                                               _request_timeout=self._timeout)
        except ApiException as exc:
            hint = f": the ServiceAccount needs get on {resource}" if exc.status == 403 else ""
            raise LookupError(f"HTTP {exc.status} {exc.reason}{hint}") from exc
        except LookupError:
            raise
        except Exception as exc:  # noqa: BLE001 - timeouts, connection errors
            raise LookupError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            self._slots.release()
