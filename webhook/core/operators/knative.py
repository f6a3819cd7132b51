"""Knative ``serving.knative.dev/v1`` Service: one revision template, its pods independent replicas.

Facts read in knative/serving and knative/docs:

- pkg/apis/serving/v1 (service_types.go, configuration_types.go, revision_types.go): a Service's
  ``spec.template`` is a RevisionTemplateSpec (``metadata`` + ``spec``), whose ``spec`` is a
  RevisionSpec embedding a PodSpec (the subset Knative allows); every revision's Deployment runs it.
- pkg/apis/autoscaling/register.go@964ee523: the per-revision annotations on
  ``spec.template.metadata.annotations`` ``autoscaling.knative.dev/minScale`` and ``initialScale``;
  current releases spell them ``min-scale`` and ``initial-scale`` and still read the old spelling (both
  are read here, the hyphenated one first). knative/docs docs/serving/autoscaling/scale-bounds.md: the
  lower bound defaults to 0 (scale to zero), the initial scale to 1 (the cluster-wide
  ``initial-scale``), and a ``min-scale`` above the initial scale wins. So a revision starts
  max(min-scale, initial-scale, written or 1) pods; each serves on its own (``group`` 1).
- config/core/configmaps/features.yaml@03608505: ``kubernetes.podspec-affinity`` and
  ``kubernetes.podspec-nodeselector`` are ``disabled`` by default, and Knative's own webhook then
  refuses a Service whose template sets ``affinity`` or ``nodeSelector``. A pin patched into the
  Service would make the cluster refuse it, so the template is judged but not patched (``synthesized``):
  the revision's pods are pinned where they are made, by the pod webhook, and a note says so.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.operators.base import Context, Found, OperatorKind, PodGroup, count, mapping

API_VERSION = "serving.knative.dev/v1"
AUTOSCALING = "autoscaling.knative.dev/"
MIN_SCALE = (AUTOSCALING + "min-scale", AUTOSCALING + "minScale")
INITIAL_SCALE = (AUTOSCALING + "initial-scale", AUTOSCALING + "initialScale")


def _annotation(annotations: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    return next((annotations[k] for k in keys if k in annotations), None)


def revision_pods(annotations: Mapping[str, Any]) -> int:
    """Pods a new revision starts with (module docstring): max(min-scale, initial-scale or 1)."""
    minimum = count(_annotation(annotations, MIN_SCALE), 0)
    initial = count(_annotation(annotations, INITIAL_SCALE), 1)
    return max(minimum, initial)


def _service(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    template = mapping(obj.get("spec")).get("template")
    if not isinstance(template, Mapping):
        return
    annotations = mapping(mapping(template.get("metadata")).get("annotations"))
    note = ("Knative refuses spec.template.spec.affinity and nodeSelector unless config-features enables "
            "kubernetes.podspec-affinity / kubernetes.podspec-nodeselector: the Service is not patched, its "
            "revision's pods are pinned when they are created")
    yield Found(("spec", "template"), template, "revision", revision_pods(annotations), synthesized=True, group=1,
                notes=(note,))


KNATIVE_SERVICE = PodGroup("serving.knative.dev/service", "Knative Service", "knative", always=False)
"""knative/serving pkg/apis/serving/register.go ``ServiceLabelKey``: on every pod of the Service's
revisions, which are independent replicas (a group only when a launch spans pods)."""

KINDS: tuple[OperatorKind, ...] = (
    OperatorKind(API_VERSION, "Service", "services", _service, group=KNATIVE_SERVICE,
                 source="knative/serving pkg/apis/serving/v1/service_types.go, "
                        "pkg/apis/autoscaling/register.go@964ee523, config/core/configmaps/features.yaml@03608505"),
)
