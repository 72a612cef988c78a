"""The protocol endpoints of docs/protocol.md §14 (the event streams are in :mod:`streams`).

Thin on purpose: read the request, call one service or selector, answer. The endpoints of an
agent's key answer their checks in one order, :mod:`arbiter_app.api.edge`'s: each gives its own
checks, which return the act. Every refusal is a :class:`~oanp.wire.errors.ProtocolError`, turned
into problem+json by :func:`arbiter_app.problems.exception_handler`.
"""

from __future__ import annotations

import json
from urllib.parse import unquote, urlencode

from django.conf import settings
from django.http import HttpResponse, QueryDict
from django.urls import reverse
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.views import APIView

from arbiter_app import selectors, services
from arbiter_app.api.edge import Act, AgentEndpoint, admitted, read_body
from arbiter_app.api.openapi import SCHEMA_DOCUMENTS
from arbiter_app.guards import text_refusal
from arbiter_app.models import AgentCredential, AgentKey, Listing
from arbiter_app.problems import JSON
from arbiter_app.refusals import BadCursor, InvalidCharacters, NoCallback, UnknownAgentKey
from arbiter_app.request_fields import annotate
from arbiter_app.selectors import key_history, published_jwks
from arbiter_app.tlog.keys import log_identity
from oanp.wire import discovery
from oanp.wire.canonical import read_json
from oanp.wire.envelope import IDENTIFIER_RULE, SETTLEMENTS, is_identifier, parse_envelope
from oanp.wire.errors import (
    FieldError,
    SchemaInvalid,
)
from oanp.wire.party_signatures import registrable_key
from oanp.wire.schema import json_schema


def _json_response(text: str, status: int = 200) -> HttpResponse:
    return HttpResponse(text, status=status, content_type=JSON)


def _outcome(outcome: services.EnvelopeAnswer) -> HttpResponse:
    return _json_response(outcome.body, outcome.status)


class EnvelopesView(AgentEndpoint):
    """Submit one envelope."""

    def post(self, request: Request) -> HttpResponse:
        def checks(agent: AgentCredential) -> Act:
            envelope = parse_envelope(read_body(request))  # 413, then 400
            annotate(request, session_id=envelope.session_id)
            services.check_sender(agent=agent, envelope=envelope)  # 403
            # The service checks the session under its lock, then calls admit before it writes.
            return lambda admit: _outcome(
                services.receive_envelope(agent=agent, envelope=envelope, admit=admit)
            )

        return self.answer(request, checks)


class SessionView(AgentEndpoint):
    """The session summary."""

    def get(self, request: Request, session_id: str) -> HttpResponse:
        def checks(agent: AgentCredential) -> Act:
            session = selectors.visible_session(agent=agent, session_id=session_id)
            return admitted(lambda: _json_response(json.dumps(selectors.summary_of(session))))

        return self.answer(request, checks)


class SessionLogView(AgentEndpoint):
    """Every entry of the session, in order."""

    def get(self, request: Request, session_id: str) -> HttpResponse:
        def checks(agent: AgentCredential) -> Act:
            session = selectors.visible_session(agent=agent, session_id=session_id)
            return admitted(lambda: _json_response(selectors.log_text(session)))

        return self.answer(request, checks)


def _key_record(key: AgentKey, status: int = 200) -> HttpResponse:
    """The key as listed, with its ``retired_at``: a key registered again may be retired, and
    its agent must learn that before it signs with it; a new one, §17's ``kid`` and when."""
    record = key.as_party_key().as_json()
    if status == 201:
        record = {"kid": key.kid, "registered_at": record["registered_at"]}
    return _json_response(json.dumps(record), status)


class AgentKeysView(AgentEndpoint):
    """Register a public key the calling agent signs its envelopes with (§12)."""

    def post(self, request: Request) -> HttpResponse:
        def checks(agent: AgentCredential) -> Act:
            jwk = read_json(read_body(request))  # 413, then 400
            registrable_key(jwk)  # 400: private_key_sent, bad_party_key

            def register() -> HttpResponse:
                key, new = services.register_agent_key(agent_id=agent.agent_id, jwk=jwk)
                return _key_record(key, 201 if new else 200)

            return admitted(register)

        return self.answer(request, checks)


class AgentKeyRetireView(AgentEndpoint):
    """Retire one of the calling agent's keys: it signs nothing received from now on."""

    def post(self, request: Request, kid: str) -> HttpResponse:
        def checks(agent: AgentCredential) -> Act:
            if not any(k.kid == kid for k in selectors.agent_keys(agent.agent_id)):
                raise UnknownAgentKey(f"agent {agent.agent_id!r} registered no key {kid!r}")
            return admitted(
                lambda: _key_record(services.retire_agent_key(agent_id=agent.agent_id, kid=kid))
            )

        return self.answer(request, checks)


class AgentKeyListView(AgentEndpoint):
    """Every key an agent registered, retired ones too: what its signatures are checked with."""

    def get(self, request: Request, agent_id: str) -> HttpResponse:
        def checks(agent: AgentCredential) -> Act:
            if not is_identifier(agent_id):
                raise SchemaInvalid(
                    "not an agent id", errors=[FieldError("agent_id", IDENTIFIER_RULE)]
                )
            keys = [k.as_party_key().as_json() for k in selectors.agent_keys(agent_id)]
            return admitted(lambda: _json_response(json.dumps({"keys": keys})))

        return self.answer(request, checks)


class RevealView(AgentEndpoint):
    """A party reveals its constraints and salt after the session ended."""

    def post(self, request: Request, session_id: str) -> HttpResponse:
        def checks(agent: AgentCredential) -> Act:
            session = selectors.visible_session(agent=agent, session_id=session_id)
            data = read_body(request)
            # The service parses and checks the reveal, then calls admit before it keeps it.
            return lambda admit: _json_response(
                json.dumps(
                    services.reveal_constraints(
                        session=session, agent=agent, data=data, admit=admit
                    )
                )
            )

        return self.answer(request, checks)


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


class CallbackView(AgentEndpoint):
    """The calling agent's callback: the URL every new entry of its sessions is POSTed to."""

    def put(self, request: Request) -> HttpResponse:
        def checks(agent: AgentCredential) -> Act:
            url = _callback_url(read_body(request))
            # Where it points is checked after the rate limit: it may ask the DNS.
            return admitted(lambda: _registered(agent, url))

        return self.answer(request, checks)

    def get(self, request: Request) -> HttpResponse:
        def checks(agent: AgentCredential) -> Act:
            callback = selectors.callback_of(agent)
            if callback is None:
                raise NoCallback("this agent has registered no callback")
            disabled_at = callback.disabled_at.isoformat() if callback.disabled_at else None
            shown = {
                "url": callback.url,
                "disabled_at": disabled_at,
                "disabled_reason": callback.disabled_reason or None,
            }
            return admitted(lambda: _json_response(json.dumps(shown)))

        return self.answer(request, checks)

    def delete(self, request: Request) -> HttpResponse:
        return self.answer(request, lambda agent: admitted(lambda: _removed(agent)))


def _registered(agent: AgentCredential, url: str) -> HttpResponse:
    registered = services.register_callback(agent=agent, url=url)
    return _json_response(json.dumps({"url": url, "secret": registered.secret}))


def _removed(agent: AgentCredential) -> HttpResponse:
    services.remove_callback(agent=agent)
    response = HttpResponse(status=204)
    del response["Content-Type"]  # a 204 has no content, so no type of content either
    return response


# Discovery (docs/protocol.md §14.10) ----------------------------------------------------------

#: Listings per page of the directory; a longer answer links to the next page.
MERCHANTS_PAGE_SIZE = 50
_DIRECTORY_PARAMETERS = ("q", "after")


def _directory_query(params: QueryDict) -> tuple[str, str | None]:
    """The directory's ``?q=`` and ``?after=``, each at most once, and nothing else: a
    misspelt parameter would otherwise list every merchant as if it had matched."""
    errors = [
        FieldError(name, "is not a parameter of this endpoint (q, after)")
        for name in sorted(set(params) - set(_DIRECTORY_PARAMETERS))
    ]
    errors += [
        FieldError(name, "is given more than once")
        for name in _DIRECTORY_PARAMETERS
        if len(params.getlist(name)) > 1
    ]
    if errors:
        raise SchemaInvalid("the query string is not one this endpoint reads", errors=errors)
    query = discovery.parse_query(params.get("q", ""))
    after = params.get("after")
    if after is not None and not is_identifier(after):
        raise BadCursor(f"after {after[:40]!r} is not an agent id from a next link")
    return query, after


def _merchant_entry(row: Listing, profiles: list[str]) -> dict[str, object]:
    return discovery.merchant_entry(
        agent_id=row.merchant_agent_id,
        merchant=row.merchant,
        description=row.description,
        currencies=row.currencies,
        catalog=json.loads(row.catalog),
        profiles=profiles,
        settlement=SETTLEMENTS,
    )


class MerchantsView(AgentEndpoint):
    """The listed merchant agents matching ``?q=``, in agent id order, a page at a time."""

    def get(self, request: Request) -> HttpResponse:
        def checks(agent: AgentCredential) -> Act:
            query, after = _directory_query(request.GET)
            return admitted(lambda: _directory_page(request, query, after))

        return self.answer(request, checks)


def _directory_page(request: Request, query: str, after: str | None) -> HttpResponse:
    page = selectors.listed_merchants(query=query, after=after, limit=MERCHANTS_PAGE_SIZE + 1)
    profiles = list(services.arbiter().profiles)
    shown = page[:MERCHANTS_PAGE_SIZE]
    response = _json_response(json.dumps([_merchant_entry(row, profiles) for row in shown]))
    if len(page) > len(shown):
        following = {"q": query} if query else {}
        following["after"] = shown[-1].merchant_agent_id
        # Built from this request, so that following it reaches the server that answered.
        url = request.build_absolute_uri(f"{request.path}?{urlencode(following)}")
        response["Link"] = f'<{url}>; rel="next"'
    return response


#: The endpoints the discovery document names, by their routes.
DISCOVERED = {
    "envelopes": "oanp:envelopes",
    "session": "oanp:session",
    "session_log": "oanp:session-log",
    "session_events": "oanp:session-events",
    "reveal": "oanp:reveal",
    "inbox": "oanp:inbox",
    "callback": "oanp:callback",
    "merchants": "oanp:merchants",
    "keys": "oanp:keys",
    "openapi": "oanp:openapi",
    "envelope_schema": "oanp:envelope-schema",
    "summary_schema": "oanp:summary-schema",
}
#: Those of one session, named as URI templates (RFC 6570) over its id.
PER_SESSION = frozenset({"session", "session_log", "session_events", "reveal"})


def _endpoints() -> dict[str, str]:
    # Under the public URL, as the jwks_uri of every signed agreement: the arbiter's name for
    # itself, not whatever host a request came in by.
    base = settings.OANP_PUBLIC_URL
    template = {"session_id": "{session_id}"}
    return {
        # reverse() percent-encodes the template's braces, which must stay as they are.
        name: base + unquote(reverse(route, kwargs=template if name in PER_SESSION else None))
        for name, route in DISCOVERED.items()
    }


class DiscoveryView(APIView):
    """``/.well-known/oanp.json``: the versions, profiles, settlement rules, endpoints and
    limits of this arbiter, read before an agent has a key."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    schema = None

    def get(self, request: Request) -> HttpResponse:
        arbiter = services.arbiter()
        document = discovery.arbiter_document(
            arbiter_id=arbiter.arbiter_id,
            profiles=list(arbiter.profiles),
            settlement=SETTLEMENTS,
            endpoints=_endpoints(),
            jwks_uri=arbiter.jwks_uri,
            log=log_identity(),
        )
        response = _json_response(json.dumps(document))
        response["Cache-Control"] = "public, max-age=300"
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


class SchemaView(APIView):
    """One of the protocol's JSON Schemas (draft 2020-12) on its own, for validators that do
    not read OpenAPI; the same schema as the OpenAPI document's component of that name."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    schema = None
    #: The component this view publishes, set by the URL.
    component = "Envelope"

    def get(self, request: Request) -> HttpResponse:
        schema_id = request.build_absolute_uri(SCHEMA_DOCUMENTS[self.component])
        document = json_schema(self.component, schema_id)
        response = HttpResponse(json.dumps(document), content_type="application/schema+json")
        response["Cache-Control"] = "public, max-age=3600"
        return response
