"""How many PostgreSQL connections the deployment's processes may hold, and each web process's
pool.

Every process keeps a pool of its own, and PostgreSQL refuses connections past
``max_connections`` whoever asks, other tenants of the server included. So the deployment is
given a share of the server, ``OANP_DB_CONNECTIONS`` (default :data:`DEFAULT_CONNECTIONS`), and
its processes divide it:

- the workers and beat take what they run at once: each worker one connection per task slot
  (a thread, or a process of its prefork pool) and one for its heartbeat thread, which is the
  pool each worker gives itself (``arbiter_app.pools``); beat one. The Procfile says how many
  slots (:func:`task_connections`); ``OANP_DB_TASK_CONNECTIONS`` overrides it where processes
  are started otherwise;
- the web processes (``$WEB_CONCURRENCY``) share the rest equally, each at most
  :data:`WEB_POOL_CAP` and at least one; ``OANP_DB_POOL_SIZE`` sets that pool outright.

Settings cannot ask the server its ``max_connections`` when they load (every process would pay
a connection at import), so the budget comes from the environment alone and ``/readyz``
compares it with the server's real limit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from oanp_site import procfile_format

#: Half of PostgreSQL's default ``max_connections`` (100): the rest stays for other tenants of
#: the server, migrations, consoles and the superuser's reserved slots.
DEFAULT_CONNECTIONS = 50

#: The most a web process pools unless told otherwise. Django gives every request in flight a
#: thread of its own, so a busy process asks for as many connections as it has requests; but
#: its Python runs one thread at a time, so past a few connections more only hold sessions that
#: wait for the interpreter (docs/scaling.md, Connections, has the measurements).
WEB_POOL_CAP = 8


@dataclass(frozen=True)
class Budget:
    """The deployment's connections: its share, and how its processes divide it."""

    #: ``OANP_DB_CONNECTIONS``: what this deployment may open on the server.
    connections: int
    web_processes: int
    #: The pool's ``max_size`` in each web process.
    web_pool: int
    #: What the workers and beat hold at most, all together.
    task_connections: int

    @property
    def most(self) -> int:
        """Connections the deployment's processes may hold at once."""
        return self.web_processes * self.web_pool + self.task_connections

    def as_json(self) -> dict[str, int]:
        return {**asdict(self), "most": self.most}


def budget(
    *, connections: int, web_processes: int, task_connections: int, pool_size: int | None = None
) -> Budget:
    """Divide ``connections``: ``task_connections`` to the workers and beat, the rest among
    the web processes; ``pool_size``, when given, is each web process's pool whatever the share
    allows."""
    for name, value in (("connections", connections), ("web_processes", web_processes)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, not {value}")
    if task_connections < 0:
        raise ValueError(f"task_connections cannot be negative, not {task_connections}")
    if pool_size is not None and pool_size < 1:
        raise ValueError(f"the pool size must be at least 1, not {pool_size}")
    if pool_size is None:
        # At least one: a share too small for that shows on /readyz, not as refused requests.
        pool_size = max(1, min(WEB_POOL_CAP, (connections - task_connections) // web_processes))
    return Budget(connections, web_processes, pool_size, task_connections)


def default_concurrency(environ: Mapping[str, str]) -> int:
    """A worker's slots when its command line names none, as Celery decides them:
    ``CELERY_WORKER_CONCURRENCY`` (``celery worker`` reads it as ``--concurrency``), else one
    per core."""
    value = environ.get("CELERY_WORKER_CONCURRENCY", "").strip().lower()
    if value == "auto":
        return len(os.sched_getaffinity(0))
    if value and value != "0":
        return int(value)
    return os.cpu_count() or 1


def _option(args: list[str], *names: str) -> str | None:
    for number, arg in enumerate(args):
        for name in names:
            if arg == name and number + 1 < len(args):
                return args[number + 1]
            if name.startswith("--") and arg.startswith(f"{name}="):
                return arg.partition("=")[2]
    return None


def task_connections(procfile: str, environ: Mapping[str, str]) -> int:
    """What the Procfile's Celery processes hold at most: each worker its slots and one for its
    heartbeat (and one for beat when it runs embedded, ``-B``); each beat one."""
    total = 0
    processes, _ = procfile_format.read(procfile)  # a bad line starts nothing, so holds nothing
    for process in processes:
        args = process.args
        if os.path.basename(args[0]) != "celery":
            continue
        if "worker" in args:
            slots = _option(args, "--concurrency", "-c")
            total += (int(slots) if slots else default_concurrency(environ)) + 1
            total += 1 if {"-B", "--beat"} & set(args) else 0
        elif "beat" in args:
            total += 1
    return total


def from_environment(environ: Mapping[str, str], web_processes: int, procfile: str) -> Budget:
    """The budget the environment asks for (``OANP_DB_CONNECTIONS``, ``OANP_DB_POOL_SIZE``,
    ``OANP_DB_TASK_CONNECTIONS``), for ``web_processes`` and the processes ``procfile``
    starts."""
    pool_size = environ.get("OANP_DB_POOL_SIZE", "").strip()
    tasks = environ.get("OANP_DB_TASK_CONNECTIONS", "").strip()
    return budget(
        connections=int(environ.get("OANP_DB_CONNECTIONS", "").strip() or DEFAULT_CONNECTIONS),
        web_processes=web_processes,
        task_connections=int(tasks) if tasks else task_connections(procfile, environ),
        pool_size=int(pool_size) if pool_size else None,
    )
