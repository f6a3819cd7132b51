"""The webhook's own policy ConfigMap, judged on apply: ``POST /validate/policy``.

The entry ``validate-policy.gpu-admission.io`` of the ValidatingWebhookConfiguration sends CREATEs
and UPDATEs of the ConfigMap ``gpu-admission-policy`` in the webhook's namespace (a namespaceSelector
and a matchCondition on the name). Its ``data["policy.yaml"]`` is parsed by the parser the workers
load the mounted file with (:func:`webhook.core.settings.parse_text`), so a policy they would refuse
is refused here first, with the same message, and ``kubectl apply`` (``--dry-run=server`` too) shows
it instead of the server logging it after it landed. Judging a policy needs no policy: a worker
answers this route while it has none.

The entry's failurePolicy is Ignore (the manifests say why): this check is the first guard, the
workers' own refusal to load a broken file (last good kept) the second.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

from webhook.core import settings as settings_mod
from webhook.core.settings import SettingsError
from webhook.server import review
from webhook.server.admission import Outcome
from webhook.server.review import Request

CONFIGMAP = "gpu-admission-policy"
"""The ConfigMap the Deployment mounts at ``/etc/gpu-admission``."""
KEY = "policy.yaml"
"""Its key: the file the server loads."""
CODE = "invalid-policy"
"""The violation code counted in ``gpu_admission_violations_total`` for a refused policy."""
MODE = "enforce"

_JUDGED = frozenset({"CREATE", "UPDATE"})


def _allow(req: Request, *, judged: bool = False, notes: Mapping[str, str] | None = None) -> Outcome:
    return Outcome(review.respond(req, allowed=True, audit_annotations=notes), True, MODE, judged=judged)


def _deny(req: Request, message: str) -> Outcome:
    text = (f"gpu-admission refused its policy: {message} (the running webhook keeps its last good policy; "
            f"check a file offline with: gpu-admission policy check FILE)")
    return Outcome(review.respond(req, allowed=False, message=text,
                                  audit_annotations={"decision": "denied", "violations": CODE}),
                   False, MODE, codes=(CODE,), judged=True)


def _text(obj: Mapping[str, object], where: str) -> str:
    """The policy file the ConfigMap holds: ``data`` (text) or ``binaryData`` (base64 of UTF-8)."""
    data = obj.get("data")
    binary = obj.get("binaryData")
    if isinstance(data, Mapping) and KEY in data:
        value = data[KEY]
        if not isinstance(value, str):
            raise SettingsError(f"{where}: must be a string, got {type(value).__name__}")
        return value
    if isinstance(binary, Mapping) and KEY in binary:
        value = binary[KEY]
        try:
            return base64.b64decode(value if isinstance(value, str) else "", validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise SettingsError(f"{where}: binaryData.{KEY} is not base64 of UTF-8 text") from None
    raise SettingsError(f"{where}: missing: the webhook's Deployment mounts this key as its policy file "
                        f"(/etc/gpu-admission/{KEY}); without it a new webhook pod cannot start")


def validate(req: Request) -> Outcome:
    """Allow any other object at once; judge the policy ConfigMap's policy file."""
    obj = req.obj
    if (req.operation not in _JUDGED or req.kind_name != "ConfigMap" or req.sub_resource
            or not isinstance(obj, Mapping)):
        return _allow(req)
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name") or req.name
    if name != CONFIGMAP:
        return _allow(req)
    namespace = meta.get("namespace") or req.namespace or ""
    where = f"ConfigMap {namespace}/{name} data.{KEY}"
    try:
        policy = settings_mod.parse_text(_text(obj, where), source=where)
    except SettingsError as exc:
        return _deny(req, str(exc))
    return _allow(req, judged=True, notes={"decision": "allowed", "policy-generation": policy.generation})
