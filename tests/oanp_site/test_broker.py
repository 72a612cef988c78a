"""The embedded broker (oanp_site.broker): a message is delivered whole or not at all, only once
it is acknowledged is it gone, a bad file never stops the worker, and a real Celery worker
consumes thousands of tasks from several racing producers without losing one.

The unit tests drive the transport through kombu in this process; the soak tests run a real
``celery worker`` and producer processes on a folder of their own, as ``make demo`` runs them.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kombu import Connection, Exchange, Queue

from oanp_site import broker
from tests.support.processes import ROOT, spawn, terminate, worker_argv
from tests.support.waiting import wait_for

FOLDERS = ("queue", "claimed", "rejected", "control")


def _options(folder: Path) -> dict[str, str]:
    return {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "claimed_folder": str(folder / "claimed"),
        "rejected_folder": str(folder / "rejected"),
        "control_folder": str(folder / "control"),
    }


def _connect(folder: Path) -> Connection:
    for name in FOLDERS:
        (folder / name).mkdir(parents=True, exist_ok=True)
    return Connection(
        "filesystem://localhost/", transport=broker.Transport, transport_options=_options(folder)
    )


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    # kombu keeps the bindings it made in a process-wide state; a binding made for another
    # test's folder would keep this one's exchange table from being written.
    broker.Transport.global_state.clear()
    yield tmp_path / "broker"
    broker.Transport.global_state.clear()


@pytest.fixture
def connection(folder: Path) -> Iterator[Connection]:
    with _connect(folder) as conn:
        yield conn


QUEUE = Queue("work", Exchange("work"), routing_key="work")


def _send(connection: Connection, body: str) -> None:
    connection.Producer().publish(
        body, exchange=QUEUE.exchange, routing_key="work", declare=[QUEUE]
    )


def _files(folder: Path, name: str) -> list[str]:
    return sorted(os.listdir(folder / name))


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


# Unit tests ------------------------------------------------------------------------------------


def test_a_message_is_gone_only_once_acknowledged(connection: Connection, folder: Path) -> None:
    _send(connection, "one")
    message = QUEUE(connection.default_channel).get()
    assert message is not None
    assert message.payload == "one"
    assert _files(folder, "queue") == []
    [claimed] = _files(folder, "claimed")
    assert claimed.startswith(f"{os.getpid()}~")
    message.ack()
    assert _files(folder, "claimed") == []
    assert QUEUE(connection.default_channel).get() is None


def test_a_rejected_message_with_requeue_goes_back_to_the_queue(
    connection: Connection, folder: Path
) -> None:
    _send(connection, "again")
    first = QUEUE(connection.default_channel).get()
    assert first is not None
    first.reject(requeue=True)
    assert _files(folder, "claimed") == []
    second = QUEUE(connection.default_channel).get()
    assert second is not None
    assert second.payload == "again"
    second.reject()
    assert _files(folder, "claimed") == _files(folder, "queue") == []


def test_a_channel_closed_with_a_message_unacknowledged_gives_it_back(folder: Path) -> None:
    with _connect(folder) as conn:
        _send(conn, "unfinished")
        assert QUEUE(conn.default_channel).get() is not None
    assert _files(folder, "claimed") == []
    with _connect(folder) as conn:
        message = QUEUE(conn.default_channel).get()
        assert message is not None
        assert message.payload == "unfinished"


def test_an_undecodable_file_is_set_aside_and_the_next_message_delivered(
    connection: Connection, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _send(connection, "good")
    # Sorts first: what kombu's own transport leaves when a consumer takes a file it had only
    # begun to write; and one that is JSON but no message.
    bad = [f"{0:020d}_empty.work.msg", f"{1:020d}_not-a-message.work.msg"]
    (folder / "queue" / bad[0]).write_bytes(b"")
    (folder / "queue" / bad[1]).write_bytes(b'["secret-argument"]')
    with caplog.at_level(logging.WARNING, logger="oanp.broker"):
        message = QUEUE(connection.default_channel).get()
    assert message is not None
    assert message.payload == "good"
    assert _files(folder, "rejected") == bad
    warnings = [r for r in caplog.records if r.name == "oanp.broker"]
    assert [r.levelno for r in warnings] == [logging.WARNING] * 2
    assert all(name in r.getMessage() for name, r in zip(bad, warnings, strict=True))
    assert "secret-argument" not in caplog.text


def test_a_half_written_file_is_never_delivered(connection: Connection, folder: Path) -> None:
    # What _put leaves if it dies mid-write: the message's name plus a temporary suffix.
    QUEUE(connection.default_channel).declare()
    half = folder / "queue" / "00000000000000000001_x.work.msg.0123abcd.tmp"
    half.write_bytes(b'{"body": "hal')
    channel = connection.default_channel
    assert QUEUE(channel).get() is None
    assert channel._size("work") == 0
    assert channel._purge("work") == 0
    assert half.exists()


def test_a_failed_write_leaves_nothing_in_the_queue(
    connection: Connection, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    QUEUE(connection.default_channel).declare()

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(broker.os, "replace", full_disk)
    with pytest.raises(Exception, match="Cannot write"):
        connection.default_channel._put("work", {"body": "lost"})
    assert _files(folder, "queue") == []


def test_a_message_claimed_by_a_dead_process_is_put_back(folder: Path) -> None:
    with _connect(folder) as conn:
        _send(conn, "orphan")
        _send(conn, "held")
    [orphan, held] = _files(folder, "queue")
    claimed = folder / "claimed"
    os.rename(folder / "queue" / orphan, claimed / f"{_dead_pid()}~{orphan}")
    # A live claimer (here, this test's parent) keeps its message.
    os.rename(folder / "queue" / held, claimed / f"{os.getppid()}~{held}")
    with _connect(folder) as conn:
        conn.default_channel  # noqa: B018 - a new channel is what looks for orphans
        assert _files(folder, "queue") == [orphan]
        assert _files(folder, "claimed") == [f"{os.getppid()}~{held}"]
        message = QUEUE(conn.default_channel).get()
        assert message is not None
        assert message.payload == "orphan"
        message.ack()


def test_claims_under_this_pid_before_its_first_claim_were_a_predecessors(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _connect(folder) as conn:
        _send(conn, "inherited")
    [name] = _files(folder, "queue")
    mine = f"{os.getpid()}~{name}"
    os.rename(folder / "queue" / name, folder / "claimed" / mine)
    # As a worker restarted in a container finds its predecessor's claims under its own pid.
    monkeypatch.setattr(broker, "_inherited_checked", False)
    with _connect(folder) as conn:
        conn.default_channel  # noqa: B018 - a new channel is what looks for orphans
        assert _files(folder, "queue") == [name]
        message = QUEUE(conn.default_channel).get()
        assert message is not None
        assert _files(folder, "claimed") == [mine]
        with _connect(folder) as later:
            later.default_channel  # noqa: B018 - a later channel leaves live claims alone
            assert _files(folder, "claimed") == [mine]
        message.ack()
    assert _files(folder, "claimed") == []


def test_two_consumers_never_take_the_same_message(folder: Path) -> None:
    with _connect(folder) as producer:
        for number in range(200):
            _send(producer, str(number))
    with _connect(folder) as first, _connect(folder) as second:
        channels = [first.default_channel, second.default_channel]
        taken: list[str] = []
        while (message := QUEUE(channels[len(taken) % 2]).get()) is not None:
            taken.append(message.payload)
            message.ack()
    assert sorted(taken, key=int) == [str(n) for n in range(200)]


def _bind(folder: str, start: int) -> None:
    with _connect(Path(folder)) as conn:
        channel = conn.default_channel
        fanout = Exchange("everyone", type="fanout")
        for number in range(start, start + 25):
            Queue(f"member-{number}", fanout)(channel).declare()
            # A publisher reading the table meanwhile must never find it half-written.
            channel.get_table("everyone")


def test_concurrent_bindings_to_a_fanout_all_survive(folder: Path) -> None:
    with _connect(folder):
        pass
    # An empty table, as kombu's own transport leaves one; the first binding rewrites it.
    (folder / "control" / "everyone.exchange").write_bytes(b"")
    context = multiprocessing.get_context("spawn")
    binders = [context.Process(target=_bind, args=(str(folder), 25 * n)) for n in range(4)]
    for binder in binders:
        binder.start()
    for binder in binders:
        binder.join(60)
        assert binder.exitcode == 0
    with _connect(folder) as conn:
        table = conn.default_channel.get_table("everyone")
    assert sorted(entry.queue for entry in table) == sorted(f"member-{n}" for n in range(100))


# Soak tests: a real worker ---------------------------------------------------------------------

PRODUCERS = 4
TASKS_PER_PRODUCER = 1_500
SOAK_SECONDS = 45


def _environment(folder: Path) -> dict[str, str]:
    """The embedded default on ``folder``: no Redis, and a database of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="oanp_site.settings",
        DATABASE_URL=f"sqlite:///{folder / 'db.sqlite3'}",
        OANP_BROKER_DIR=str(folder),
        OANP_BROKER_TEST_RECORD=str(folder / "record"),
        PYTHONUNBUFFERED="1",
    )
    return env


def _worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """The demo's worker, with the tests' task."""
    return spawn(worker_argv(2, include="tests.oanp_site.broker_tasks"), env, log, append=True)


def _producers(env: dict[str, str], count: int) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen(
            [sys.executable, "-m", "tests.oanp_site.broker_tasks", f"p{n}", str(count)],
            cwd=ROOT,
            env=env,
        )
        for n in range(PRODUCERS)
    ]


def _executed(folder: Path) -> list[str]:
    try:
        return (folder / "record").read_text(encoding="utf-8").split()
    except FileNotFoundError:
        return []


def _wait_for(folder: Path, expected: set[str], worker: subprocess.Popen[bytes], log: Path) -> None:
    def all_ran() -> bool:
        if expected <= set(_executed(folder)):
            return True
        assert worker.poll() is None, log.read_text(errors="replace")[-4000:]
        return False

    wait_for(
        all_ran,
        SOAK_SECONDS,
        interval=0.2,
        message=lambda: (
            f"{len(expected - set(_executed(folder)))} of {len(expected)} tasks never ran"
        ),
    )


def _markers(count: int) -> set[str]:
    return {f"p{p}-{n}" for p in range(PRODUCERS) for n in range(count)}


def test_a_worker_runs_every_task_of_racing_producers(folder: Path) -> None:
    folder.mkdir()
    env = _environment(folder)
    log = folder / "worker.log"
    # Producers and the worker start together: the first of them creates the exchange table
    # while the others read it.
    worker = _worker(env, log)
    producers = _producers(env, TASKS_PER_PRODUCER)
    try:
        for producer in producers:
            assert producer.wait(SOAK_SECONDS) == 0
        _wait_for(folder, _markers(TASKS_PER_PRODUCER), worker, log)
        assert worker.poll() is None
    finally:
        terminate(worker)
    output = log.read_text(errors="replace")
    # Nothing fatal, and nothing the broker found unreadable.
    assert "CRITICAL" not in output
    assert "oanp.broker" not in output
    assert _files(folder, "rejected") == []
    assert _files(folder, "claimed") == _files(folder, "queue") == []


def test_a_worker_killed_mid_run_loses_no_task(folder: Path) -> None:
    folder.mkdir()
    env = _environment(folder)
    log = folder / "worker.log"
    count = 100
    for producer in _producers(env, count):
        assert producer.wait(SOAK_SECONDS) == 0
    # Tasks that take a while, so that the worker is killed in the middle of some.
    worker = _worker({**env, "OANP_BROKER_TEST_TASK_SECONDS": "0.05"}, log)
    try:
        while len(_executed(folder)) < count // 2:
            assert worker.poll() is None, log.read_text(errors="replace")[-4000:]
            time.sleep(0.01)
        # Frozen, so what it holds cannot change before the kill; between two tasks it may hold
        # nothing for an instant, so it runs on a little until it holds something.
        while True:
            os.killpg(worker.pid, signal.SIGSTOP)
            held = _files(folder, "claimed")
            if held:
                break
            os.killpg(worker.pid, signal.SIGCONT)
            assert len(_executed(folder)) < count, "the worker ran every task before the kill"
            time.sleep(0.005)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        assert all(name.startswith(f"{worker.pid}~") for name in held)
        # The next worker's first channel finds the claims' owner gone and gives them back.
        worker = _worker(env, log)
        _wait_for(folder, _markers(count), worker, log)
    finally:
        terminate(worker)
    assert _files(folder, "claimed") == _files(folder, "queue") == []
