"""Reads on the envelope's path whose SQL Django compiles once per database, not per request.

Building a queryset and compiling it (resolving subqueries, joins, the lock clause) costs the
web process more CPU than PostgreSQL spends answering it: for the session's locked read,
1.0 ms against 0.25 ms run from SQL compiled before. A :class:`PreparedRead` has Django
compile its queryset once per database, with a marker where the looked-up value
goes, and then runs that SQL with each new value through ``Model.objects.raw``, which builds
the instances with the same field converters and keeps each extra column (an annotation) as an
attribute, as the queryset would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

from django.db import connections, router
from django.db.models import Model, QuerySet
from django.db.transaction import TransactionManagementError

M = TypeVar("M", bound=Model)

#: Stands for the looked-up value while the SQL is compiled; found again among the parameters.
_MARKER = "\x1foanp-prepared-read-value\x1f"


class PreparedRead(Generic[M]):
    """``build(value)``'s first row, with ``build`` compiled once per database.

    ``build`` must use its argument exactly once, as a parameter (a filter's value), and
    return a queryset of ``model`` of at most one row; its SQL may hold a lock clause, in which
    case :meth:`first` must run in a transaction, as the queryset would have to. The read goes
    to the database the router gives the model's writes, as a locking read's does.
    """

    def __init__(self, model: type[M], build: Callable[[str], QuerySet[M]]) -> None:
        self._model = model
        self._build = build
        self._lock = threading.Lock()
        self._compiled: dict[tuple[str, str], _Compiled] = {}

    def first(self, value: str) -> M | None:
        database = connections[router.db_for_write(self._model)]
        key = (database.alias, database.vendor)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compile(database.alias)
            with self._lock:
                self._compiled[key] = compiled
        if compiled.locks and database.get_autocommit():
            # As the queryset would: outside a transaction the lock would be let go at once.
            raise TransactionManagementError("a locking read must run in a transaction")
        at = compiled.value_at
        values = [*compiled.params[:at], value, *compiled.params[at + 1 :]]
        rows = self._model._default_manager.db_manager(database.alias).raw(compiled.sql, values)
        return next(iter(rows), None)

    def _compile(self, alias: str) -> _Compiled:
        query = self._build(_MARKER).query
        sql, params = query.get_compiler(alias).as_sql()
        where = [index for index, param in enumerate(params) if param == _MARKER]
        if len(where) != 1:
            raise ValueError(f"the prepared read uses its value {len(where)} times, not once")
        return _Compiled(sql, tuple(params), where[0], bool(query.select_for_update))


class _Compiled(NamedTuple):
    sql: str
    params: tuple[object, ...]
    #: Where among the parameters the looked-up value goes.
    value_at: int
    locks: bool
