"""Log lines: one per request and per task with what an operator searches by, as text or JSON
lines, and never a secret."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from typing import Any

import pytest

from arbiter_app import services, tasks
from oanp_site.logs import JsonFormatter, RedactSecrets, TextFormatter, logging_config
from tests.conftest import ROOT
from tests.support.factories.agents import post


def record(message: str, *args: Any, **fields: Any) -> logging.LogRecord:
    made = logging.LogRecord("oanp.test", logging.INFO, __file__, 1, message, args, None)
    made.oanp = fields
    return made


def test_json_lines_carry_the_message_and_every_field() -> None:
    line = JsonFormatter().format(record("%s done", "task", session_id="s-1", duration_ms=2.5))
    parsed = json.loads(line)
    assert parsed["message"] == "task done"
    assert parsed["level"] == "INFO"
    assert parsed["logger"] == "oanp.test"
    assert parsed["time"].endswith("Z")
    assert parsed["session_id"] == "s-1"
    assert parsed["duration_ms"] == 2.5


def test_text_lines_append_fields_as_key_value_and_quote_spaces() -> None:
    line = TextFormatter().format(record("hello", agent_id="a-1", detail="two words", code=""))
    assert line.endswith(' INFO oanp.test hello agent_id=a-1 detail="two words"')


@pytest.mark.parametrize(
    "secret",
    [
        "oanp_0123456789ab_Zm9vYmFyYmF6cXV4LXNlY3JldA",
        "whsec_c2VjcmV0LXNpZ25pbmcta2V5LWJ5dGVz",
        "Bearer some.opaque-token",
    ],
)
def test_secrets_are_redacted_in_messages_arguments_and_fields(secret: str) -> None:
    made = record("sent %s", secret, header=f"Authorization: {secret}")
    assert RedactSecrets().filter(made)
    text = TextFormatter().format(made) + JsonFormatter().format(made)
    assert secret.removeprefix("Bearer ") not in text
    assert "[redacted]" in text


def test_an_unknown_log_format_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="text or json"):
        logging_config(fmt="xml", level="INFO")


@pytest.mark.django_db
def test_a_refused_envelope_is_one_line_with_agent_session_code_and_no_key(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    issued = services.issue_credential(agent_id="buyer-log", role="buyer")

    class Key:
        agent_id = "buyer-log"
        headers = {"Authorization": f"Bearer {issued.api_key}"}  # noqa: RUF012

    envelope = {"session_id": "sess-log", "type": "offer.propose"}  # not a whole envelope
    with caplog.at_level(logging.INFO):
        response = post(client, Key, envelope)
    assert response.status_code in (400, 422)
    lines = [r for r in caplog.records if r.name == "oanp.request"]
    assert len(lines) == 1
    fields = lines[0].oanp
    assert fields["agent_id"] == "buyer-log"
    assert fields["code"] == response.json()["code"]
    assert fields["status"] == response.status_code
    assert fields["duration_ms"] >= 0
    assert issued.api_key not in caplog.text


@pytest.mark.django_db
def test_an_envelope_names_its_session_on_the_request_line(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.support.factories.agents import ClientNegotiation, make_agent

    run = ClientNegotiation(
        client, make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    )
    with caplog.at_level(logging.INFO):
        run.open()
    opened = next(r for r in caplog.records if r.name == "oanp.request" and r.oanp["status"] == 201)
    assert opened.oanp["session_id"] == "sess-sfo-jfk"
    assert opened.oanp["agent_id"] == "buyer-001"


@pytest.mark.django_db
def test_a_task_is_one_line_with_its_outcome_duration_and_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        tasks.expire_session.apply(args=["sess-none"])
    line = next(r for r in caplog.records if r.name == "oanp.worker")
    assert line.oanp["task"] == "arbiter_app.tasks.expire_session"
    assert line.oanp["outcome"] == "success"
    assert line.oanp["session_id"] == "sess-none"
    assert line.oanp["duration_ms"] >= 0


def test_json_lines_from_a_real_process() -> None:
    script = (
        "import logging; logging.getLogger('oanp.request').info("
        "'GET / 200', extra={'oanp': {'agent_id': 'a-1', 'status': 200}})"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env={**os.environ, "OANP_LOG_FORMAT": "json"},
        capture_output=True,
        text=True,
        check=True,
    )
    line = json.loads(done.stderr.strip().splitlines()[-1])
    assert line["message"] == "GET / 200"
    assert line["agent_id"] == "a-1"
    assert line["status"] == 200


def test_a_traceback_quoting_a_secret_is_redacted_in_both_formats() -> None:
    key = "oanp_0123456789ab_Zm9vYmFyYmF6cXV4LXNlY3JldA"
    try:
        raise ValueError(f"refused {key}")
    except ValueError:
        made = logging.LogRecord(
            "oanp.test", logging.ERROR, __file__, 1, "failed", None, sys.exc_info()
        )
    made.oanp = {"nested": {"headers": [f"Bearer {key}"]}}
    RedactSecrets().filter(made)
    for formatter in (TextFormatter(), JsonFormatter()):
        text = formatter.format(made)
        assert "ValueError" in text
        assert key not in text
