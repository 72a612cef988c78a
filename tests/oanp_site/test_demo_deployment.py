"""The demo's server as ``make demo ARGS="--port …"`` runs it: it publishes the address it
serves at, and a visitor who mistypes an address meets the site's 404 page, not Django's
technical one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from oanp_site.demo.deployment import environment
from tests.conftest import NO_REQUIRED_SECOND_FACTOR, PRINTED_MAIL, suite_database_url
from tests.support.processes import daphne_argv, free_port, spawn, wait_answering

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_demo_processes_publish_the_port_they_serve_at_with_debug_off(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DEVELOPMENT = True
    monkeypatch.delenv("OANP_PUBLIC_URL", raising=False)
    assert environment("http://127.0.0.1:8311") == {
        "OANP_PUBLIC_URL": "http://127.0.0.1:8311",
        "DJANGO_DEBUG": "0",
        "OANP_DEVELOPMENT": "1",
    }
    # An address set for the deployment (a proxy's, say) is the one it publishes.
    monkeypatch.setenv("OANP_PUBLIC_URL", "https://demo.example")
    assert environment("http://127.0.0.1:8311")["OANP_PUBLIC_URL"] == "https://demo.example"


def test_a_production_start_of_the_demo_stays_one(settings: Any) -> None:
    settings.DEVELOPMENT = False
    assert environment("http://127.0.0.1:8311")["OANP_DEVELOPMENT"] == "0"


def test_the_demo_server_on_another_port_publishes_it_and_shows_the_sites_404(
    settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings.DEVELOPMENT = True
    monkeypatch.delenv("OANP_PUBLIC_URL", raising=False)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DATABASE_URL": suite_database_url(),
        **NO_REQUIRED_SECOND_FACTOR,
        **PRINTED_MAIL,
        **environment(url),
    }
    log = tmp_path / "demo-server.log"
    server = spawn(daphne_argv(port), env, log, new_session=False)
    try:
        wait_answering(server, port, log)
        with httpx.Client(base_url=url, timeout=10) as client:
            document = client.get("/.well-known/oanp.json").json()
            assert document["jwks_uri"] == f"{url}/.well-known/jwks.json"
            assert document["endpoints"]
            assert all(link.startswith(f"{url}/") for link in document["endpoints"].values())
            missing = client.get("/no-such-page/", headers={"Accept": "text/html"})
        assert missing.status_code == 404
        assert "<title>Not found · OANP arbiter</title>" in missing.text
        assert '<a href="/login/?next=/no-such-page/">Sign in</a>' in missing.text
        assert "Django tried these URL patterns" not in missing.text
    finally:
        server.terminate()
        server.wait(10)
