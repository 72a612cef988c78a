"""The deployment's database connections: a share of the server divided among its processes, so
that the pools together stay within PostgreSQL's max_connections."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from oanp_site import serve
from oanp_site.connections import (
    DEFAULT_CONNECTIONS,
    WEB_POOL_CAP,
    budget,
    from_environment,
    task_connections,
)
from tests.support.processes import ROOT, product_free_environment

PROCFILE = """\
web: python -m oanp_site.serve
# a comment: celery -A oanp_site worker --concurrency 99
timers: celery -A oanp_site worker -Q timers --pool threads --concurrency 4 --loglevel INFO
worker: celery -A oanp_site worker -Q deliveries,background --pool threads -c 8
embedded: celery -A oanp_site worker --concurrency=2 -B
beat: celery -A oanp_site beat --loglevel INFO
"""


def test_the_web_processes_share_what_the_workers_and_beat_leave() -> None:
    shared = budget(connections=50, web_processes=4, task_connections=20)
    assert (shared.web_pool, shared.most) == (7, 48)
    assert shared.most <= 50


def test_a_web_pool_is_capped_and_never_empty() -> None:
    roomy = budget(connections=500, web_processes=2, task_connections=4)
    assert roomy.web_pool == WEB_POOL_CAP
    # 32 web processes and 18 task slots in a share of 50: one each, and the sum says so.
    crowded = budget(connections=50, web_processes=32, task_connections=18)
    assert (crowded.web_pool, crowded.most) == (1, 50)
    squeezed = budget(connections=10, web_processes=4, task_connections=20)
    assert (squeezed.web_pool, squeezed.most) == (1, 24)


def test_an_explicit_pool_size_wins_and_is_counted() -> None:
    chosen = budget(connections=50, web_processes=4, task_connections=4, pool_size=20)
    assert (chosen.web_pool, chosen.most) == (20, 84)
    assert chosen.as_json() == {
        "connections": 50,
        "web_processes": 4,
        "web_pool": 20,
        "task_connections": 4,
        "most": 84,
    }


@pytest.mark.parametrize(
    "arguments",
    [
        {"connections": 0, "web_processes": 1, "task_connections": 0},
        {"connections": 10, "web_processes": 0, "task_connections": 0},
        {"connections": 10, "web_processes": 1, "task_connections": -1},
        {"connections": 10, "web_processes": 1, "task_connections": 0, "pool_size": 0},
    ],
)
def test_a_budget_of_nothing_is_refused(arguments: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"at least 1|negative"):
        budget(**arguments)


def test_the_procfile_says_what_the_workers_and_beat_hold() -> None:
    # timers 4 + 1, worker 8 + 1, embedded 2 + 1 + its beat 1, beat 1; web and comments none.
    assert task_connections(PROCFILE, {}) == 19


def test_the_budget_counts_the_lines_the_runner_would_start_and_skips_the_others() -> None:
    # The runner refuses such a file; the settings still load, counting what it would start.
    broken = "worker\nbeat: celery -A x beat -l 'INFO\n" + PROCFILE
    assert task_connections(broken, {}) == task_connections(PROCFILE, {})


def test_a_worker_without_a_concurrency_takes_celerys_default() -> None:
    procfile = "worker: celery -A oanp_site worker --loglevel INFO\n"
    assert task_connections(procfile, {"CELERY_WORKER_CONCURRENCY": "6"}) == 7
    assert task_connections(procfile, {}) == (os.cpu_count() or 1) + 1


def test_the_environment_sets_the_share_the_pool_and_the_task_connections() -> None:
    assert from_environment({}, 4, PROCFILE) == budget(
        connections=DEFAULT_CONNECTIONS, web_processes=4, task_connections=19
    )
    given = {
        "OANP_DB_CONNECTIONS": "200",
        "OANP_DB_TASK_CONNECTIONS": "10",
        "OANP_DB_POOL_SIZE": "3",
    }
    assert from_environment(given, 4, PROCFILE) == budget(
        connections=200, web_processes=4, task_connections=10, pool_size=3
    )


def _settings(env: dict[str, str]) -> dict[str, Any]:
    """What the product's settings make of ``env`` alone, read in a process of their own."""
    program = (
        "import json; from django.conf import settings as s; "
        "print(json.dumps({'pool': s.DATABASES['default'].get('OPTIONS', {}).get('pool'), "
        "'cursors_off': s.DATABASES['default'].get('DISABLE_SERVER_SIDE_CURSORS'), "
        "'budget': s.OANP_DB_BUDGET and s.OANP_DB_BUDGET.as_json()}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT,
        env={
            **{
                key: value
                for key, value in product_free_environment().items()
                if key not in ("WEB_CONCURRENCY", "CELERY_WORKER_CONCURRENCY")
            },
            "DJANGO_SETTINGS_MODULE": "oanp_site.settings",
            **env,
        },
        capture_output=True,
        text=True,
        check=True,
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def test_the_settings_size_the_pool_from_the_budget_not_twenty() -> None:
    url = "postgres://postgres@127.0.0.1:5432/oanp"
    default = _settings({"DATABASE_URL": url, "WEB_CONCURRENCY": "4"})
    expected = from_environment({}, 4, (ROOT / "Procfile").read_text())
    assert default["budget"] == expected.as_json()
    assert default["pool"]["max_size"] == expected.web_pool <= WEB_POOL_CAP
    assert default["pool"]["min_size"] == 1
    assert default["cursors_off"] is False

    chosen = _settings({"DATABASE_URL": url, "WEB_CONCURRENCY": "4", "OANP_DB_POOL_SIZE": "20"})
    assert chosen["pool"]["max_size"] == 20
    assert chosen["budget"]["most"] == 4 * 20 + expected.task_connections

    pooled = _settings({"DATABASE_URL": url, "OANP_DB_TRANSACTION_POOLER": "1"})
    assert pooled["cursors_off"] is True
    assert pooled["budget"]["web_processes"] == serve.PROCESSES_PER_CORE * len(
        os.sched_getaffinity(0)
    )

    embedded = _settings({})
    assert (embedded["pool"], embedded["budget"]) == (None, None)
