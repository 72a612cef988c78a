"""The HTTP edge of the endpoints an agent calls with its key: where docs/protocol.md §14.5's
order of checks reads, for all of them.

A request is answered at the first check that fails:

1. The body's size, decided as the request arrives, by the server (:mod:`oanp_site.transport`):
   401 without a key, 413 with one. Behind another server the 413 comes at step 5.
2. Invalid characters in the path, query, headers or cookies: 400, by the middleware
   :class:`arbiter_app.guards.InvalidCharactersMiddleware`, before anything reads them.
3. The client address's failed authentications (429), then 4. the key (401): DRF's
   authentication, :class:`arbiter_app.auth.ApiKeyAuthentication`, before the view; for a key
   this process found live lately, :meth:`AgentEndpoint.perform_authentication` alone.
5. The endpoint's own checks, each endpoint's ``checks``: for an envelope the body's size (413),
   its parse (400), its sender (403), then the service's checks under the session's lock.
6. The key's rate limit (429): every request counted as it arrived, refused only here.
7. The act.

:meth:`AgentEndpoint.answer` runs steps 5 to 7; a service that checks under a lock (an envelope,
a reveal) gets step 6 as its ``admit`` and calls it between its last check and its first write,
so that an envelope sent again, which changes nothing, is never refused for the rate limit.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from django.http.request import RawPostDataException
from rest_framework.request import Request
from rest_framework.views import APIView

from arbiter_app import limits
from arbiter_app.auth import remembered
from arbiter_app.models import AgentCredential
from oanp.wire.envelope import MAX_ENVELOPE_BYTES
from oanp.wire.errors import EnvelopeTooLarge

#: The rate limit's check: raises the 429, or lets the request act.
Admit = Callable[[], None]
#: What a request does once its checks passed, given the rate limit to call first.
Act = Callable[[Admit], HttpResponse]


def admitted(act: Callable[[], HttpResponse]) -> Act:
    """An act with no check left: the rate limit, then the act."""

    def run(admit: Admit) -> HttpResponse:
        admit()
        return act()

    return run


def read_body(request: Request) -> bytes:
    """The raw body, refused with 413 before it is read when it says it is too large."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > MAX_ENVELOPE_BYTES:
        raise EnvelopeTooLarge.over(MAX_ENVELOPE_BYTES, size=int(declared))
    try:
        return request.body
    except (RequestDataTooBig, RawPostDataException) as exc:
        raise EnvelopeTooLarge.over(MAX_ENVELOPE_BYTES) from exc


class AgentEndpoint(APIView):
    """An endpoint of an agent's key; each method returns :meth:`answer` of its checks."""

    schema = None  # described in arbiter_app.api.openapi, from docs/protocol.md §14
    charge = limits.Charge()

    def perform_authentication(self, request: Request) -> None:
        """Steps 3 and 4, and the key's count: every request is counted as it arrives (§14.7),
        a method the endpoint does not answer (405) included. A key this process found live
        lately needs no look-up between the address's check and the count, which then take
        one round trip to Redis, not two."""
        known = remembered(request.META.get("HTTP_AUTHORIZATION", ""))
        if known is None:
            super().perform_authentication(request)  # DRF's authentication of the key
            self.charge = limits.charge(_agent(request).prefix)
            return
        address = limits.client_address(request.META)
        self.charge = limits.check_address_and_charge(address, known.prefix)
        request.user = request.auth = known  # as ApiKeyAuthentication gives them

    def answer(self, request: Request, checks: Callable[[AgentCredential], Act]) -> HttpResponse:
        act = checks(_agent(request))  # step 5: every refusal of the endpoint but the 429
        return act(self.charge.admit)  # steps 6 and 7


def _agent(request: Request) -> AgentCredential:
    assert isinstance(request.auth, AgentCredential)  # authenticated in initial (401 first)
    return request.auth
