"""What Daphne does with a request before the application sees it: an oversize body is refused
from its headers, before it is read (401 without a key, as section 7 orders, 413 with one);
a body that grows past the limit while read is refused then; multipart bodies reach the
application, which answers them as anything else it cannot parse."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer, serve, suite_database_url
from tests.support.factories.agents import make_agent

pytestmark = pytest.mark.django_db(transaction=True)

ENVELOPES = "/oanp/v0.1/envelopes"


def exchange(server: LiveServer, head: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read the whole answer until the server closes; (status, headers, body)."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    raw_head, _, content = received.partition(b"\r\n\r\n")
    status_line, *lines = raw_head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, content


def request_head(path: str, length: int, **headers: str) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: localhost", f"Content-Length: {length}"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return "\n".join(lines) + "\n"


def test_an_oversize_body_without_a_key_is_401_before_it_is_sent(
    live_arbiter: LiveServer,
) -> None:
    started = time.monotonic()
    # 400 MB declared, none sent: the answer comes from the headers alone.
    status, headers, content = exchange(live_arbiter, request_head(ENVELOPES, 400_000_000))
    assert time.monotonic() - started < 2
    assert status == 401
    assert headers["content-type"] == "application/problem+json"
    assert headers["www-authenticate"] == 'Bearer realm="oanp"'
    assert json.loads(content)["code"] == "unauthorized"


def test_an_oversize_body_with_a_key_is_413_before_it_is_sent(live_arbiter: LiveServer) -> None:
    key = make_agent("buyer-big", "buyer").api_key
    head = request_head(ENVELOPES, 400_000_000, Authorization=f"Bearer {key}")
    status, headers, content = exchange(live_arbiter, head)
    assert status == 413
    assert headers["connection"] == "close"
    body = json.loads(content)
    assert body["code"] == "envelope_too_large"
    assert body["instance"] == ENVELOPES


def test_a_chunked_body_is_refused_once_it_passes_the_limit(live_arbiter: LiveServer) -> None:
    key = make_agent("buyer-chunked", "buyer").api_key
    chunk = b"x" * 16384
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(8)) + b"0\r\n\r\n"
    head = "\n".join(
        [
            f"POST {ENVELOPES} HTTP/1.1",
            "Host: localhost",
            "Transfer-Encoding: chunked",
            f"Authorization: Bearer {key}",
        ]
    )
    status, _, content = exchange(live_arbiter, head + "\n", body)
    assert status == 413
    assert json.loads(content)["code"] == "envelope_too_large"


def test_a_page_refuses_a_body_over_django_s_limit(live_arbiter: LiveServer, settings: Any) -> None:
    status, headers, _ = exchange(
        live_arbiter, request_head("/login/", settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    )
    assert status == 413
    assert headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize(
    ("authorized", "status", "code"),
    [(False, 401, "unauthorized"), (True, 400, "malformed_json")],
)
def test_multipart_bodies_reach_the_application(
    live_arbiter: LiveServer, authorized: bool, status: int, code: str
) -> None:
    headers = {"Content-Type": "multipart/form-data"}  # no boundary: unparsable
    if authorized:
        headers["Authorization"] = f"Bearer {make_agent('buyer-form', 'buyer').api_key}"
    response = httpx.post(live_arbiter.url + ENVELOPES, content=b"x", headers=headers)
    assert response.status_code == status
    assert response.json()["code"] == code
    form = httpx.post(live_arbiter.url + ENVELOPES, files={"f": b"x"}, headers=headers)
    assert form.status_code == status


def test_headers_over_the_limit_get_a_431(live_arbiter: LiveServer) -> None:
    for head in (
        # One header of 100 KB: a line longer than any the server reads.
        f"GET /healthz HTTP/1.1\nHost: localhost\nX-Big: {'a' * 100_000}\n",
        # Many headers, each short, 20 KB together.
        "GET /healthz HTTP/1.1\nHost: localhost\n"
        + "".join(f"X-Many-{n}: {'b' * 90}\n" for n in range(200)),
    ):
        status, headers, content = exchange(live_arbiter, head)
        assert status == 431
        assert headers["connection"] == "close"
        assert content == b"the request's headers are over 16 KiB\n"


def test_headers_that_trickle_in_are_cut_at_their_deadline(django_db_setup: None) -> None:
    with serve(
        {"DATABASE_URL": suite_database_url(), "OANP_HEADER_TIMEOUT_SECONDS": "2"}
    ) as server:
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as connection:

            def cut() -> bool:
                try:
                    return connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
                except BlockingIOError:
                    return False  # open, with nothing to read
                except OSError:
                    return True  # reset

            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
            started = time.monotonic()
            # A byte every 0.2 s: each restarts Twisted's own idle timeout, not this deadline.
            while time.monotonic() - started < 25 and not cut():
                try:
                    connection.sendall(b"X")
                except OSError:
                    break
                time.sleep(0.2)
            held = time.monotonic() - started
        assert 1.5 < held < 25
        # A request that sends its headers at once is untouched.
        assert httpx.get(f"{server.url}/healthz").status_code == 200
