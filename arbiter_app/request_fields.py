"""Fields an endpoint adds to its request's log line, such as the session an envelope names;
the request log (:mod:`oanp_site.middleware`) writes them with the line."""

from __future__ import annotations

from typing import Any

REQUEST_FIELDS = "oanp_log_fields"


def annotate(request: Any, **fields: str) -> None:
    """Add fields to the request's log line, such as the session an envelope names. Takes a
    Django request or DRF's wrapper of one."""
    target = getattr(request, "_request", request)
    setattr(target, REQUEST_FIELDS, {**log_fields(target), **fields})


def log_fields(request: Any) -> dict[str, str]:
    fields = getattr(request, REQUEST_FIELDS, None)
    return fields if isinstance(fields, dict) else {}
