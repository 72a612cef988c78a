"""Log lines an operator can read or feed to a log store: one format for the server, the worker
and beat, plain text by default and JSON lines with ``OANP_LOG_FORMAT=json``.

Structured fields travel in ``extra={"oanp": {...}}``; the text format prints them as
``key=value`` after the message, the JSON format as keys of the line's object. Every line passes
:class:`RedactSecrets` first, so an API key, a webhook secret or a bearer token that slips into
a message never reaches the log.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

FIELDS = "oanp"

#: What a secret issued or held by the arbiter looks like: agent API keys, Standard Webhooks
#: secrets, and whatever follows "Bearer" in a header that was logged whole.
_SECRETS = re.compile(
    r"\boanp_[0-9a-f]{6,}_[A-Za-z0-9_-]+|\bwhsec_[A-Za-z0-9+/=_-]+|(?<=Bearer )[^\s\"',]+",
    re.IGNORECASE,
)
REDACTED = "[redacted]"


def redact(text: str) -> str:
    return _SECRETS.sub(REDACTED, text)


class RedactSecrets(logging.Filter):
    """Replaces secrets in the message, its arguments and its fields; never drops a line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            setattr(record, FIELDS, _redacted(fields))
        return True


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v) for v in value]
    return value


def _exception(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    """The traceback and stack of a record, redacted: an exception's message may quote a key."""
    parts = []
    if record.exc_info:
        parts.append(formatter.formatException(record.exc_info))
    if record.stack_info:
        parts.append(formatter.formatStack(record.stack_info))
    return redact("\n".join(parts))


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, FIELDS, None)
    return fields if isinstance(fields, dict) else {}


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TextFormatter(logging.Formatter):
    """``2026-11-23T18:45:14.123Z INFO oanp.request POST /oanp/v0.1/envelopes 201 status=201``"""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={_text(v)}" for k, v in _fields(record).items() if v != "")
        line = f"{_timestamp(record)} {record.levelname} {record.name} {record.getMessage()}"
        if fields:
            line = f"{line} {fields}"
        trace = _exception(self, record)
        return f"{line}\n{trace}" if trace else line


def _text(value: Any) -> str:
    text = str(value)
    return json.dumps(text) if not text or any(c.isspace() or c == '"' for c in text) else text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message``, then the fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_fields(record),
        }
        trace = _exception(self, record)
        if trace:
            line["exception"] = trace
        return json.dumps(line, default=str, separators=(",", ":"))


def logging_config(*, fmt: str, level: str) -> dict[str, Any]:
    """Django's LOGGING: every logger to one console handler in the chosen format."""
    if fmt not in ("text", "json"):
        raise ValueError(f"OANP_LOG_FORMAT must be text or json, not {fmt!r}")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"redact": {"()": RedactSecrets}},
        "formatters": {
            "text": {"()": TextFormatter},
            "json": {"()": JsonFormatter},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": fmt,
                "filters": ["redact"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        # The request line (oanp.request) says what Django's 4xx warnings say, once.
        "loggers": {
            "django.request": {"level": "ERROR"},
            # One INFO line per outbound request would drown the demo's console.
            "httpx": {"level": "WARNING"},
        },
    }
