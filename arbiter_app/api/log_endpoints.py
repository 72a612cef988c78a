"""The transparency log's endpoints (docs/protocol.md §18): its checkpoint and tiles, public as
C2SP ``tlog-tiles`` serves them, and a party's proof of one of its entries, with its key."""

from __future__ import annotations

import json

from django.http import HttpResponse
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.views import APIView

from arbiter_app import selectors
from arbiter_app.api.edge import Act, AgentEndpoint, admitted
from arbiter_app.models import AgentCredential
from arbiter_app.problems import JSON
from arbiter_app.refusals import NotIntegrated, TileNotFound
from arbiter_app.tlog.reads import entry_proof, note_text, served_checkpoint, tile_bytes
from oanp.tlog.tree import parse_tile_path
from oanp.wire.errors import FieldError, SchemaInvalid

#: Full tiles and bundles never change; a partial one may give way to its full tile.
IMMUTABLE = "public, max-age=31536000, immutable"
PARTIAL = "public, max-age=60"


class CheckpointView(APIView):
    """The log's latest checkpoint with its witnesses' cosignatures, a C2SP signed note."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    schema = None

    def get(self, request: Request) -> HttpResponse:
        checkpoint = served_checkpoint()
        if checkpoint is None:
            raise NotIntegrated("the log has integrated no entry yet: no checkpoint")
        response = HttpResponse(note_text(checkpoint), content_type="text/plain; charset=utf-8")
        response["Cache-Control"] = "no-cache"  # it moves every second the log grows
        return response


class TileView(APIView):
    """A tile of the tree or an entry bundle: ``tile/<L>/<N>[.p/<W>]``, ``tile/entries/…``."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    schema = None

    def get(self, request: Request, path: str) -> HttpResponse:
        try:
            tile = parse_tile_path(f"tile/{path}")
        except ValueError as exc:
            raise TileNotFound(f"tile/{path} names no tile: {exc}") from None
        found = tile_bytes(tile)
        if found is None:
            raise TileNotFound(f"the tree does not hold tile/{path} (yet)")
        response = HttpResponse(found, content_type="application/octet-stream")
        response["Cache-Control"] = PARTIAL if tile.width else IMMUTABLE
        return response


class ProofView(AgentEndpoint):
    """A party's proof that one of its session's entries is in the log: its index, the
    checkpoint and the inclusion path."""

    def get(self, request: Request, session_id: str) -> HttpResponse:
        def checks(agent: AgentCredential) -> Act:
            session = selectors.visible_session(agent=agent, session_id=session_id)
            seq = request.query_params.get("seq", "")
            if not seq.isdigit() or not 0 < int(seq) < 1 << 31:
                raise SchemaInvalid(
                    "seq is the entry's position in the session, from 1",
                    errors=[FieldError("seq", "a positive integer is required")],
                )

            def prove() -> HttpResponse:
                proof = entry_proof(session, int(seq))
                if proof is None:
                    raise NotIntegrated(
                        f"entry {seq} of {session_id} is not in a checkpoint yet: try again in "
                        "a second"
                    )
                return HttpResponse(json.dumps(proof), content_type=JSON)

            return admitted(prove)

        return self.answer(request, checks)
