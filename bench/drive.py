"""What the soak does to its deployment from outside, over HTTP as agents do: buyers opening
sessions with deadlines (one after the other, or at a steady pace from threads of their own so
that one slow answer holds back no other), and a slow receiver of an agent's callback.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from bench.load import ENVELOPES, SFO_JFK_ITEM
from bench.service import percentile_ms
from tests.support.factories.sessions import sfo_jfk_agents


@dataclass(frozen=True)
class Opened:
    """One session's opening as the buyer saw it."""

    session_id: str
    #: The deadline it was opened with.
    due: datetime
    #: When it was sent.
    sent_at: datetime
    #: The answer's status, or the name of the error that stood for one.
    status: str


def headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


def open_session(
    client: httpx.Client, pair: dict[str, str], session_id: str, deadline_s: float
) -> Opened:
    """The pair's buyer opens ``session_id`` with a deadline ``deadline_s`` from now; the
    merchant never answers, so only the deadline closes it."""
    buyer, _ = sfo_jfk_agents(
        f"{session_id}-", buyer_id=pair["buyer_id"], merchant_id=pair["merchant_id"]
    )
    now = datetime.now(UTC)
    due = now + timedelta(seconds=deadline_s)
    envelope = buyer.open(
        session_id=session_id,
        merchant_agent_id=pair["merchant_id"],
        item=SFO_JFK_ITEM,
        currency="USD",
        max_rounds=5,
        now=now,
        deadline=due,
    )
    sent_at = datetime.now(UTC)
    try:
        answer = client.post(
            ENVELOPES, content=json.dumps(envelope), headers=headers(pair["buyer_key"])
        )
    except httpx.TransportError as error:
        return Opened(session_id, due, sent_at, type(error).__name__)
    return Opened(session_id, due, sent_at, str(answer.status_code))


def open_sessions(
    url: str, pair: dict[str, str], session_ids: Iterable[str], deadline_s: float
) -> list[Opened]:
    with httpx.Client(base_url=url, timeout=30) as client:
        return [open_session(client, pair, sid, deadline_s) for sid in session_ids]


class Pace:
    """Opens sessions for the pair's buyer, ``rate`` a second, each from a thread of a pool, so
    that an answer slow to come (the broker away) does not hold back the next opening."""

    def __init__(
        self, url: str, pair: dict[str, str], *, tag: str, rate: float, deadline_s: float
    ) -> None:
        self.pair, self.tag, self.rate, self.deadline_s = pair, tag, rate, deadline_s
        self.client = httpx.Client(
            base_url=url, timeout=30, limits=httpx.Limits(max_connections=32)
        )
        self.pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="pace")
        self.stopping = threading.Event()
        self.opened: list[Opened] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="pace", daemon=True)

    def __enter__(self) -> Pace:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join()
        self.pool.shutdown(wait=True)
        self.client.close()

    def _open(self, number: int) -> None:
        opened = open_session(self.client, self.pair, f"{self.tag}-{number:05d}", self.deadline_s)
        with self.lock:
            self.opened.append(opened)

    def _run(self) -> None:
        started = time.monotonic()
        number = 0
        while not self.stopping.wait(max(0.0, started + number / self.rate - time.monotonic())):
            self.pool.submit(self._open, number)
            number += 1


@dataclass(frozen=True)
class Window:
    """A span of time, from ``start`` to ``end``."""

    start: datetime
    end: datetime

    def holds(self, moment: datetime) -> bool:
        return self.start <= moment <= self.end


def statuses(opened: Iterable[Opened]) -> dict[str, int]:
    return dict(sorted(Counter(o.status for o in opened).items()))


def lateness_s(opened: Iterable[Opened], closes: dict[str, str]) -> dict[str, float]:
    """Each closed session's close (the arbiter's entry, ``received_at``) less its deadline."""
    return {
        o.session_id: (datetime.fromisoformat(closes[o.session_id]) - o.due).total_seconds()
        for o in opened
        if o.session_id in closes
    }


def spread(seconds: Sequence[float]) -> dict[str, Any]:
    """p50, p99 and max in milliseconds (none where there is nothing to take them of)."""
    if not seconds:
        return {"count": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    return {
        "count": len(seconds),
        "p50_ms": percentile_ms(seconds, 50),
        "p99_ms": percentile_ms(seconds, 99),
        "max_ms": max(seconds) * 1000,
    }


@dataclass
class SlowReceiver:
    """An agent's callback endpoint on 127.0.0.1 that answers each POST 200 after
    ``delay_s``; it counts the POSTs and the most it was answering at once."""

    delay_s: float
    received: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    last_answered_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    def __enter__(self) -> SlowReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.in_flight += 1
                    receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
                time.sleep(receiver.delay_s)
                with receiver.lock:
                    receiver.in_flight -= 1
                    receiver.received += 1
                    receiver.last_answered_at = time.monotonic()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/callback"
