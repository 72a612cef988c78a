"""The processes tests and the bench run: free ports, Daphne's and Celery's command lines, and
Daphne, a worker and Redis started and waited for until they answer or say they are ready."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from cryptography.fernet import Fernet

from tests.support.waiting import Message, fail, wait_for

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on at the moment."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def daphne_argv(port: int) -> list[str]:
    """Daphne serving the project's ASGI application on 127.0.0.1:``port``, as in production."""
    return [
        sys.executable,
        "-m",
        "daphne",
        "-b",
        "127.0.0.1",
        "-p",
        str(port),
        "oanp_site.asgi:application",
    ]


def celery_argv(*args: str) -> list[str]:
    """``celery -A oanp_site`` with ``args``, in this interpreter."""
    return [sys.executable, "-m", "celery", "-A", "oanp_site", *args]


def worker_argv(
    concurrency: int, *, beat_schedule: Path | None = None, include: str | None = None
) -> list[str]:
    """A Celery worker on a threads pool of ``concurrency`` threads, without the cluster chatter
    (heartbeat, gossip, mingle); with beat embedded (``-B``) keeping its schedule in
    ``beat_schedule`` where one is named, and the tasks of module ``include`` besides the
    project's own."""
    argv = celery_argv("worker")
    if include is not None:
        argv += ["--include", include]
    if beat_schedule is not None:
        argv += [
            "-B",
            "--scheduler",
            "celery.beat:PersistentScheduler",
            "--schedule",
            str(beat_schedule),
        ]
    return [
        *argv,
        "--pool",
        "threads",
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "INFO",
        "--without-heartbeat",
        "--without-gossip",
        "--without-mingle",
    ]


def purge(env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """Drop every task waiting on the broker ``env`` names; what celery said is returned."""
    return subprocess.run(
        celery_argv("purge", "-f"), cwd=ROOT, env=env, check=True, capture_output=True
    )


def spawn(
    argv: list[str],
    env: dict[str, str],
    log_path: Path,
    *,
    append: bool = False,
    new_session: bool = True,
) -> subprocess.Popen[bytes]:
    """``argv`` run from the project's folder with ``env``, its output and errors written to
    ``log_path`` (added to it with ``append``). With ``new_session``, in a process group of its
    own, so that :func:`kill_group` takes down its children too (a worker's beat)."""
    with log_path.open("ab" if append else "wb") as log:
        return subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=new_session,
        )


def tail(path: Path) -> str:
    """The last 4,000 characters of a log ('' where it cannot be read)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-4000:]
    except OSError:
        return ""


def wait_ready(
    process: subprocess.Popen[bytes],
    log_path: Path,
    *,
    offset: int = 0,
    timeout: float = 60.0,
    message: Message | None = None,
    error: type[Exception] | None = None,
) -> None:
    """Until the worker's log, from byte ``offset`` on, says it is ready; :func:`fail` with
    ``message`` (by default, the log's tail) if it exits first or ``timeout`` seconds pass."""

    def did_not_start() -> str:
        return f"the Celery worker did not start:\n{tail(log_path)}"

    def ready() -> bool:
        if b" ready." in log_path.read_bytes()[offset:]:
            return True
        if process.poll() is not None:
            fail(message or did_not_start, error)
        return False

    wait_for(ready, timeout, interval=0.1, message=message or did_not_start, error=error)


def start_redis(port: int, *, error: type[Exception] | None = None) -> subprocess.Popen[bytes]:
    """``redis-server`` on 127.0.0.1:``port``, keeping nothing on disk, once it takes a
    connection; :func:`fail` (or ``error``) if it has not within 10 s."""
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
        stdout=subprocess.DEVNULL,
    )

    def answers() -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(answers, 10, message=f"redis-server did not answer on port {port}", error=error)
    except BaseException:
        process.kill()
        process.wait(5)
        raise
    return process


def start_daphne(
    port: int, env: dict[str, str], log_path: Path, *, error: type[Exception] | None = None
) -> subprocess.Popen[bytes]:
    """Daphne serving the project's ASGI application on ``port`` with ``env``, once
    ``/healthz`` answers; :func:`fail` (or ``error``) with its log's tail if it exits first or
    has not answered within 30 s, and it is killed then."""
    process = spawn(daphne_argv(port), env, log_path, new_session=False)
    wait_answering(process, port, log_path, error=error)
    return process


def start_web(
    port: int,
    env: dict[str, str],
    log_path: Path,
    processes: int,
    *,
    error: type[Exception] | None = None,
) -> subprocess.Popen[bytes]:
    """The Procfile's web (:mod:`oanp_site.serve`): ``processes`` Daphne processes sharing
    ``port`` on 127.0.0.1, once ``/healthz`` answers, as :func:`start_daphne`."""
    process = spawn(
        [sys.executable, "-m", "oanp_site.serve"],
        {**env, "HOST": "127.0.0.1", "PORT": str(port), "WEB_CONCURRENCY": str(processes)},
        log_path,
        new_session=False,
    )
    wait_answering(process, port, log_path, error=error)
    return process


def wait_answering(
    process: subprocess.Popen[bytes],
    port: int,
    log_path: Path,
    *,
    error: type[Exception] | None = None,
) -> None:
    """Until ``/healthz`` answers on ``port``; the server is killed and the wait fails if it
    exits first or has not answered within 30 s."""

    def did_not_start() -> str:
        process.kill()
        return f"the server did not start:\n{tail(log_path)}"

    def answers() -> bool:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
        except httpx.TransportError:
            if process.poll() is not None:
                fail(did_not_start, error)
            return False
        return True

    wait_for(answers, 30, interval=0.1, message=did_not_start, error=error)


def children(pid: int) -> set[int]:
    """The processes ``pid`` started that still run (none when it is gone)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return set()
    return {int(c) for task in tasks for c in _started_by(task).split()}


def _started_by(task: Path) -> str:
    # A thread can end between the listing and this read: it then started nothing that runs.
    try:
        return (task / "children").read_text()
    except OSError:
        return ""


def kill_group(process: subprocess.Popen[bytes], timeout: float | None = None) -> None:
    """SIGKILL to the process's group, as a crash would: no chance to finish or hand anything
    back."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout)


def terminate(process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """SIGTERM, and SIGKILL to its group if it has not exited within ``timeout`` seconds.

    A process that leads a group of its own (a worker with embedded beat) may exit before a
    child it started; what is left of its group is killed too, so no beat outlives the test.
    """
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_group(process)
    with contextlib.suppress(ProcessLookupError):  # no group of its own, or nothing left
        os.killpg(process.pid, signal.SIGKILL)


def product_free_environment() -> dict[str, str]:
    """This process's environment without the product's own settings, for a child that is
    given exactly the settings it is measured or tested with."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "OANP_")) and key not in ("DATABASE_URL", "REDIS_URL")
    }


@functools.cache
def throwaway_secrets() -> dict[str, str]:
    """Secrets for children that keep nothing (a benchmark's server, worker and helpers): with
    DEBUG off, as in production, they must not start on the development ones. One set per
    process, so every child of a run reads what the others encrypted."""
    return {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "OANP_KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "OANP_VAULT_KEY": Fernet.generate_key().decode(),
    }


def run_json(env: dict[str, str], module: str, *args: str) -> Any:
    """Run ``python -m module args`` and read the JSON value on its last line of output;
    RuntimeError with the end of its stderr when it fails."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args[:1])} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
