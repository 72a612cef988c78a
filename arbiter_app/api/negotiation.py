"""Content negotiation for the API (DRF's ``DEFAULT_CONTENT_NEGOTIATION_CLASS``), apart from the
views: DRF's settings import it while its views module is still loading."""

from __future__ import annotations

from typing import Any

from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class JsonAnyway(BaseContentNegotiation):
    """Every endpoint answers JSON or problem+json, whatever ``Accept`` says: refusing an
    ``Accept`` (406) would come before the key is checked, ahead of step 4's 401."""

    def select_parser(self, request: Request, parsers: list[Any]) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(
        self, request: Request, renderers: list[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        return renderers[0], renderers[0].media_type
