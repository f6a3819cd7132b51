"""Structured JSON logs: one JSON object per line, extra fields included.

Decision lines carry uid, namespace, name, kind, operation, mode, allowed, codes, tier and latency,
never the object: pods carry tokens in their env, and a log line is forever. Every line passes
through ``webhook.core.redaction.redact`` as well.
"""

from __future__ import annotations

import json
import logging
import sys
import time

from webhook.core.redaction import redact

_ENCODER = json.JSONEncoder(default=str, separators=(",", ":"))
"""One encoder for every line: ``json.dumps`` with arguments builds a new one per call."""
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._second: tuple[int, str] = (-1, "")

    def _timestamp(self, created: float, msecs: float) -> str:
        """ISO 8601 UTC with milliseconds; the seconds part formatted once per second."""
        second = int(created)
        if self._second[0] != second:
            self._second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        return f"{self._second[1]}.{int(msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": self._timestamp(record.created, record.msecs),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key in _STANDARD or key[:1] == "_":
                continue
            if key == "fields" and isinstance(value, dict):
                out.update(value)  # names LogRecord reserves (``name``) travel in ``fields``
            else:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        # the last filter: nothing credential-shaped reaches a log line, whatever a message quoted
        return redact(_ENCODER.encode(out))


def configure(level: str = "info") -> None:
    """Route the gpu_admission loggers (and gunicorn's error log) to stderr as JSON lines.

    Also turns off what every LogRecord would otherwise gather and the JSON line never shows (it
    carries none of the standard attributes): the caller's file and line (``findCaller`` walks the
    stack, the most expensive step of a decision line), the thread, process and multiprocessing
    names. The logging HOWTO's "Optimization" section documents exactly these switches."""
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    for name in ("gpu_admission", "gunicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False
