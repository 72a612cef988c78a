"""The protocol endpoints of docs/protocol.md §14 (the event streams are in :mod:`streams`).

Thin on purpose: read the request, call one service or selector, answer. Every refusal is a
:class:`~oanp.errors.ProtocolError` or a DRF exception, turned into problem+json by
:func:`arbiter_app.problems.exception_handler`. A key's rate limit is charged when the request
arrives and answered last (:mod:`arbiter_app.limits`): each view admits the request once its
other checks passed, just before it acts.
"""

from __future__ import annotations

import json

from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from django.http.request import RawPostDataException
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.views import APIView

from arbiter_app import limits, selectors, services
from arbiter_app.api.openapi import ENVELOPE_SCHEMA_PATH, json_schema
from arbiter_app.models import AgentCredential
from arbiter_app.selectors import key_history, published_jwks
from oanp.canonical import read_json
from oanp.envelope import MAX_ENVELOPE_BYTES, parse_envelope
from oanp.errors import (
    EnvelopeTooLarge,
    FieldError,
    ProtocolError,
    SchemaInvalid,
)
from oanp_site.guards import InvalidCharacters, text_refusal
from oanp_site.logs import annotate

JSON = "application/json"


def _json_response(text: str, status: int = 200) -> HttpResponse:
    return HttpResponse(text, status=status, content_type=JSON)


def _agent(request: Request) -> AgentCredential:
    assert isinstance(request.auth, AgentCredential)  # IsAuthenticated ran first
    return request.auth


def _body(request: Request) -> bytes:
    """The raw body, refused with 413 before it is read when it says it is too large."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > MAX_ENVELOPE_BYTES:
        raise EnvelopeTooLarge(f"body is {declared} bytes; the limit is {MAX_ENVELOPE_BYTES}")
    try:
        return request.body
    except (RequestDataTooBig, RawPostDataException) as exc:
        raise EnvelopeTooLarge(f"body is over {MAX_ENVELOPE_BYTES} bytes") from exc


class AgentView(APIView):
    schema = None  # described in arbiter_app.api.openapi, from docs/protocol.md §14
    charge = limits.Charge()

    def initial(self, request: Request, *args: object, **kwargs: object) -> None:
        super().initial(request, *args, **kwargs)  # authenticated by now (401 first)
        self.charge = limits.charge(_agent(request).prefix)


class EnvelopesView(AgentView):
    """Submit one envelope."""

    def post(self, request: Request) -> HttpResponse:
        envelope = parse_envelope(_body(request))
        annotate(request, session_id=envelope.session_id)
        outcome = services.receive_envelope(
            agent=_agent(request), envelope=envelope, admit=self.charge.admit
        )
        return _json_response(outcome.body, outcome.status)


class SessionView(AgentView):
    """The session summary."""

    def get(self, request: Request, session_id: str) -> HttpResponse:
        session = selectors.visible_session(agent=_agent(request), session_id=session_id)
        self.charge.admit()
        return _json_response(json.dumps(selectors.summary_of(session)))


class SessionLogView(AgentView):
    """Every entry of the session, in order."""

    def get(self, request: Request, session_id: str) -> HttpResponse:
        session = selectors.visible_session(agent=_agent(request), session_id=session_id)
        self.charge.admit()
        return _json_response(selectors.log_text(session))


class RevealView(AgentView):
    """A party reveals its constraints and salt after the session ended."""

    def post(self, request: Request, session_id: str) -> HttpResponse:
        agent = _agent(request)
        session = selectors.visible_session(agent=agent, session_id=session_id)
        reveal = services.reveal_constraints(
            session=session, agent=agent, data=_body(request), admit=self.charge.admit
        )
        return _json_response(json.dumps(reveal))


class NoCallback(ProtocolError):
    code = "no_callback"
    status = 404
    title = "No callback is registered"


def _callback_url(data: bytes) -> str:
    # The envelopes' strict reader: a key given twice is refused, not settled by the last one.
    body = read_json(data)
    url = body.get("url") if isinstance(body, dict) else None
    if not isinstance(url, str) or set(body) != {"url"}:
        raise SchemaInvalid(
            'the body is {"url": "https://…"} and nothing else',
            errors=[FieldError("url", "required, a string")],
        )
    reason = text_refusal(url, url=True)
    if reason is not None:
        raise InvalidCharacters(
            f"the url holds {reason}", errors=[FieldError("url", f"holds {reason}")]
        )
    return url


class CallbackView(AgentView):
    """The calling agent's callback: the URL every new entry of its sessions is POSTed to."""

    def put(self, request: Request) -> HttpResponse:
        url = _callback_url(_body(request))
        self.charge.admit()
        registered = services.register_callback(agent=_agent(request), url=url)
        return _json_response(json.dumps({"url": url, "secret": registered.secret}))

    def get(self, request: Request) -> HttpResponse:
        callback = selectors.callback_of(_agent(request))
        if callback is None:
            raise NoCallback("this agent has registered no callback")
        self.charge.admit()
        disabled_at = callback.disabled_at.isoformat() if callback.disabled_at else None
        return _json_response(
            json.dumps(
                {
                    "url": callback.url,
                    "disabled_at": disabled_at,
                    "disabled_reason": callback.disabled_reason or None,
                }
            )
        )

    def delete(self, request: Request) -> HttpResponse:
        self.charge.admit()
        services.remove_callback(agent=_agent(request))
        response = HttpResponse(status=204)
        del response["Content-Type"]  # a 204 has no content, so no type of content either
        return response


class KeysView(APIView):
    """Every public key the arbiter ever signed with, with its validity window, for good."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    schema = None

    def get(self, request: Request) -> HttpResponse:
        return _json_response(json.dumps({"keys": key_history()}))


class JwksView(APIView):
    """The arbiter's public signing keys: the active key and the retiring ones."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    schema = None

    def get(self, request: Request) -> HttpResponse:
        response = _json_response(json.dumps(published_jwks()))
        response["Cache-Control"] = "public, max-age=300"
        return response


class EnvelopeSchemaView(APIView):
    """The envelope's JSON Schema on its own (draft 2020-12), for validators that do not read
    OpenAPI; the same schema as the OpenAPI document's ``Envelope``."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    schema = None

    def get(self, request: Request) -> HttpResponse:
        document = json_schema("Envelope", request.build_absolute_uri(ENVELOPE_SCHEMA_PATH))
        response = HttpResponse(json.dumps(document), content_type="application/schema+json")
        response["Cache-Control"] = "public, max-age=3600"
        return response
