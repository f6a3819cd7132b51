"""AdmissionReview v1 wire types: parse a request, complete a response.

Two error families, as kube-apiserver and every mature webhook framework see them: the *request* is
bad (not an AdmissionReview, no uid: HTTP 400, :class:`ReviewError`) versus the *object* is bad (a
denial: HTTP 200 with ``allowed: false``). This module owns the first family and the one place where
a response is completed (uid echo, apiVersion/kind echo, base64 JSONPatch, warning caps), so no
route can forget a field.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from webhook.core.domain import JSON
from webhook.core.redaction import could_quote, redact

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"

WARNING_MAX_CHARS = 120
AUDIT_MESSAGE_MAX = 8192
"""The whole-text audit annotation ``message``: room for every violation and warning of a big object."""
"""kube-apiserver keeps warnings short; longer than 256 may be truncated, 120 reads well in kubectl."""
WARNINGS_MAX_TOTAL = 4096
"""The apiserver's budget for warnings across all webhooks of one request; leave room for others."""
WARNINGS_BUDGET = 2048


class ReviewError(Exception):
    """The HTTP request is not a usable AdmissionReview (HTTP ``status``, default 400)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Request:
    """The fields of ``AdmissionReview.request`` the server uses (wire names in comments)."""

    uid: str
    kind: Mapping[str, JSON]  # kind: {group, version, kind}
    operation: str  # operation: CREATE, UPDATE, DELETE, CONNECT
    name: str | None
    namespace: str | None
    obj: JSON  # object
    dry_run: bool  # dryRun
    resource: Mapping[str, JSON] = field(default_factory=dict)
    sub_resource: str | None = None  # subResource
    old_obj: JSON = None  # oldObject: the stored object, on UPDATE (and DELETE)

    @property
    def kind_name(self) -> str:
        kind = self.kind.get("kind")
        return kind if isinstance(kind, str) else ""


def _decode(body: bytes) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReviewError(f"body is not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReviewError(f"body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise ReviewError("body is nested too deeply") from None
    except ValueError:  # an integer literal over Python's 4,300-digit limit
        raise ReviewError("body is not usable JSON: a number has too many digits") from None


def _content_type_ok(content_type: str | None) -> bool:
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def parse(body: bytes, content_type: str | None) -> Request:
    """Validate the envelope and extract the request; raise :class:`ReviewError` when unusable."""
    if not _content_type_ok(content_type):
        raise ReviewError(f"content type must be application/json, got {(content_type or 'none')[:60]!r}")
    if not body:
        raise ReviewError("empty body: expected an AdmissionReview")
    doc = _decode(body)
    if not isinstance(doc, dict):
        raise ReviewError(f"expected a JSON object (AdmissionReview), got {type(doc).__name__}")
    if doc.get("kind") != KIND:
        raise ReviewError(f"kind must be {KIND!r}, got {str(doc.get('kind'))[:60]!r}")
    if doc.get("apiVersion") != API_VERSION:
        raise ReviewError(f"apiVersion must be {API_VERSION!r} (admissionReviewVersions: [v1]), "
                          f"got {str(doc.get('apiVersion'))[:60]!r}")
    req = doc.get("request")
    if not isinstance(req, dict):
        raise ReviewError("missing request: an AdmissionReview from kube-apiserver carries .request")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("missing request.uid")
    operation = req.get("operation")
    kind = req.get("kind")
    resource = req.get("resource")
    return Request(
        uid=uid,
        kind=kind if isinstance(kind, dict) else {},
        operation=operation if isinstance(operation, str) else "",
        name=req.get("name") if isinstance(req.get("name"), str) else None,
        namespace=req.get("namespace") if isinstance(req.get("namespace"), str) else None,
        obj=req.get("object"),
        dry_run=req.get("dryRun") is True,
        resource=resource if isinstance(resource, dict) else {},
        sub_resource=req.get("subResource") if isinstance(req.get("subResource"), str) else None,
        old_obj=req.get("oldObject"),
    )


def one_line(text: str, limit: int = WARNING_MAX_CHARS) -> str:
    """A warning kubectl shows whole: no newlines (only the first line would show), at most ``limit``
    characters, cut at a space so that no word or product name is broken (the whole text is in the
    audit annotation ``message`` and the decision log line)."""
    flat = " ".join(text.split())
    if flat.lower().startswith("warning:"):
        flat = flat[len("warning:"):].lstrip()
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit - 1)
    head = flat[:cut] if cut > limit // 2 else flat[: limit - 1]
    return head.rstrip(" ,;:([") + "\u2026"


def cap_warnings(warnings: Iterable[str], budget: int = WARNINGS_BUDGET) -> list[str]:
    """Most important first (callers order them): one line each, and stop before the budget runs out,
    saying how many were left out."""
    out: list[str] = []
    used = 0
    items = [one_line(w) for w in warnings if w and w.strip()]
    items = list(dict.fromkeys(items))
    for i, warning in enumerate(items):
        rest = len(items) - i - 1
        tail = 40 if rest else 0  # room for the "N more" line
        if used + len(warning) + tail > budget:
            out.append(f"{len(items) - i} more warnings not shown (see the gpu-admission logs)")
            break
        out.append(warning)
        used += len(warning)
    return out


def _clean_op(op: Mapping[str, JSON], clean: Callable[[str], str]) -> Mapping[str, JSON]:
    """``op`` with the annotation text it writes redacted (labels are left alone: a redacted label
    value could be an invalid one, and the webhook's labels are hashes and names, not free text)."""
    path, value = str(op.get("path")), op.get("value")
    if "/metadata/annotations/" in path and isinstance(value, str):
        return {**op, "value": clean(value)}
    if path.endswith("/metadata/annotations") and isinstance(value, Mapping):
        return {**op, "value": {k: clean(v) if isinstance(v, str) else v for k, v in value.items()}}
    if path.endswith("/metadata") and isinstance(value, Mapping) and isinstance(value.get("annotations"), Mapping):
        notes = value["annotations"]
        return {**op, "value": {**value, "annotations": {k: clean(v) if isinstance(v, str) else v
                                                         for k, v in notes.items()}}}
    return op


def _as_is(text: str) -> str:
    """What :func:`respond` applies to its texts when none of them holds anything to redact."""
    return text


def _annotation_texts(op: Mapping[str, JSON]) -> str:
    """The annotation texts a patch op writes (what :func:`_clean_op` would redact), joined."""
    texts: list[str] = []
    _clean_op(op, lambda text: texts.append(text) or text)
    return "\n".join(texts)


def respond(
    req: Request | None,
    *,
    allowed: bool,
    uid: str | None = None,
    message: str | None = None,
    code: int = 403,
    patch: Sequence[Mapping[str, JSON]] = (),
    warnings: Sequence[str] = (),
    audit_annotations: Mapping[str, str] | None = None,
    secrets: Sequence[str] = (),
) -> dict[str, JSON]:
    """The complete AdmissionReview response: the ONE place a reply is built. Every text in it that
    leaves the cluster's objects (message, warnings, audit annotations) passes through
    :func:`webhook.core.redaction.redact` with ``secrets``, the secret env values of the object under
    review as the engine found them (:attr:`webhook.core.engine.Judgement.secrets`): the reply does
    not walk the object again. Credential-shaped strings are redacted whatever ``secrets`` holds."""
    response: dict[str, JSON] = {"uid": req.uid if req is not None else (uid or ""), "allowed": allowed}
    warnings = [w for w in warnings if isinstance(w, str)]
    notes = audit_annotations or {}
    # every text that leaves, scanned once: most replies hold nothing to redact (redaction.could_quote)
    leaving = [message or "", *warnings, *(v for v in notes.values() if isinstance(v, str)),
               *(_annotation_texts(op) for op in patch)]

    clean: Callable[[str], str] = (lambda text: redact(text, secrets)) if could_quote(leaving, secrets) else _as_is

    if not allowed:
        response["status"] = {"code": code, "message": clean(message or "denied by gpu-admission"),
                              "reason": "Forbidden" if code == 403 else "Invalid"}
    if patch:
        response["patchType"] = "JSONPatch"
        # the annotations a patch writes (the pinned note names the model) are stored on the pod: a
        # model "name" that is a token, or a secret env value expanded into it, must not be copied there
        if clean is not _as_is:
            patch = [_clean_op(op, clean) for op in patch]
        raw = json.dumps(list(patch), separators=(",", ":"), sort_keys=False).encode()
        response["patch"] = base64.b64encode(raw).decode("ascii")
    capped = cap_warnings(clean(w) for w in warnings)
    if capped:
        response["warnings"] = capped
    if notes:
        response["auditAnnotations"] = {k: clean(v)[:AUDIT_MESSAGE_MAX if k == "message" else 1024]
                                        for k, v in notes.items()}
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def encode(reply: Mapping[str, JSON]) -> bytes:
    """The bytes of a reply on the wire (compact JSON): every route's answer goes out this way."""
    return json.dumps(reply, separators=(",", ":")).encode()


_json_string = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
"""A str as :func:`json.dumps` writes it (ASCII, quoted), without the encoder set up around it."""


@dataclass(frozen=True)
class Reusable:
    """A finished reply whose only per-request field is the uid, kept encoded.

    The copies of one controller's pod share a verdict (``webhook.server.verdict_cache``), and with
    it everything :func:`respond` writes except ``response.uid`` when the reply allows (a denial
    names the object): :meth:`answer` gives the reply for another uid without building, redacting or
    encoding it again, byte for byte what :func:`encode` of a fresh reply gives
    (``tests/core/test_verdicts.py``). The bytes are the first reply's, cut around its uid where
    JSON writes it as the ``"uid"`` member: nowhere else can that run of bytes occur (inside a
    string every quote is escaped), and a reply where it is not found exactly once is encoded
    afresh each time. Keeping the bytes saves the encoding, about 7 us of a 54 us memo hit in
    process (bench/NOTES.md)."""

    reply: Mapping[str, JSON]
    head: bytes | None
    tail: bytes

    @classmethod
    def of(cls, reply: Mapping[str, JSON]) -> "Reusable | None":
        """``reply`` made reusable; None if it has no ``response`` to carry a uid."""
        response = reply.get("response")
        if not isinstance(response, Mapping) or not isinstance(response.get("uid"), str):
            return None
        wire = encode(reply)
        member = b'"uid":' + _json_string(response["uid"]).encode()
        if wire.count(member) != 1:
            return cls(reply, None, b"")
        head, tail = wire.split(member)
        return cls(reply, head + b'"uid":', tail)

    def answer(self, uid: str) -> tuple[dict[str, JSON], bytes]:
        """The reply for the request ``uid``, and its bytes."""
        response = cast(Mapping[str, JSON], self.reply["response"])  # checked by of()
        reply = {**self.reply, "response": {**response, "uid": uid}}
        if self.head is None:
            return reply, encode(reply)
        return reply, self.head + _json_string(uid).encode() + self.tail
