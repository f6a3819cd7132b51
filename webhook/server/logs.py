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

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key == "fields" and isinstance(value, dict):
                out.update(value)  # names LogRecord reserves (``name``) travel in ``fields``
            elif key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        # the last filter: nothing credential-shaped reaches a log line, whatever a message quoted
        return redact(json.dumps(out, default=str, separators=(",", ":")))


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
