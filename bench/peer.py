"""The service section's peer: a bare Django JSON endpoint doing one INSERT per request.

It does the least a JSON-over-HTTP service on this stack can do per request: parse the body,
one INSERT, a small JSON answer. No authentication, throttle or transaction of its own; the
middleware and the server are the arbiter's. Only :mod:`bench.urls` routes to it.
"""

import json

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

#: Created by the bench with raw SQL in its own database, never by a migration.
BARE_TABLE = "bench_bare"
BARE_PATH = "bench/bare"
CREATE_TABLE = (
    f"CREATE TABLE {BARE_TABLE} (id bigserial PRIMARY KEY, "
    "session_id text NOT NULL, message_id text NOT NULL, body text NOT NULL)"
)
_INSERT = (
    f"INSERT INTO {BARE_TABLE} (session_id, message_id, body) VALUES (%s, %s, %s) RETURNING id"
)


@csrf_exempt
@require_POST
def bare(request: HttpRequest) -> JsonResponse:
    body = json.loads(request.body)
    with connection.cursor() as cursor:
        cursor.execute(_INSERT, [body["session_id"], body["message_id"], request.body.decode()])
        (row_id,) = cursor.fetchone()
    return JsonResponse({"id": row_id, "message_id": body["message_id"]}, status=201)
