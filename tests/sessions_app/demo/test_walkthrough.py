"""The demo's walkthrough on a live arbiter, as ``make demo`` runs it: its buyer signs every
envelope of both its sessions with the run's key (registered once it is needed), the first
session is verified with the parties' keys, and the second is closed by the worker's timer."""

from __future__ import annotations

import pytest

from sessions_app.demo.seed import issue_buyer_keys, seed
from sessions_app.demo.walkthrough import Walkthrough
from tests.conftest import LiveServer, Worker


@pytest.mark.django_db(transaction=True)
def test_the_walkthroughs_buyer_signs_both_sessions(
    live_arbiter: LiveServer, celery_worker_process: Worker
) -> None:
    seed()
    said: list[str] = []
    walkthrough = Walkthrough(live_arbiter.url, issue_buyer_keys(), said.append)
    walkthrough.negotiate()
    walkthrough.time_out()  # a second session with the same key: no second registration
    verified = next(line for line in said if line.startswith("Verified offline"))
    assert "signed entries: " in verified
    signed, total = verified.rsplit("signed entries: ", 1)[1].split(" ")[0].split("/")
    assert signed == total != "0"
    assert any("deadline_expired" in line for line in said), said
