"""Celery's embedded broker: kombu's file transport, made safe for several processes at once.

kombu's own file transport creates a message's file empty and writes it afterwards, so a
consumer can take it half-written and the worker dies decoding it; it moves a taken message to
the system's temporary folder (maybe another file system, so not atomically) and deletes it
before the task ran, so a worker killed mid-task loses it. Here instead:

- a message is written under a name no consumer reads, then renamed to its queue name: a rename
  within a folder is atomic, so a consumer sees the whole message or none of it;
- a consumer takes a message by renaming it into ``claimed_folder`` under a name carrying its
  pid: of several consumers only one rename succeeds;
- the claimed file is deleted when the message is acknowledged, and renamed back into the
  queue when it is rejected with requeue, when the channel closes with it unacknowledged, or
  when a new channel finds that the process which claimed it is gone (a worker killed with
  SIGKILL): at least once;
- bytes that are not a message are logged and set aside in ``rejected_folder``, and the next
  message is taken: one bad file is never fatal to the worker;
- exchange tables (which queues a fanout reaches, such as every worker's control queue) are
  rewritten the same way, under a lock so that two bindings never overwrite each other.

Selected with ``transport="oanp_site.broker:Transport"`` and a ``filesystem://`` URL; the
folders are transport options, ``claimed_folder`` and ``rejected_folder`` beside kombu's.
``store_processed`` is not supported: an acknowledged message is gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from queue import Empty
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads
from kombu.utils.objects import cached_property

from oanp_site import processes

logger = logging.getLogger("oanp.broker")

Table = list[filesystem.exchange_queue_t]

# Between the claimer's pid and the message's own name in a claimed file's name.
_PID_SEPARATOR = "~"
_inherited_lock = threading.Lock()
_inherited_checked = False


def _publish(path: Path, data: bytes) -> None:
    """Write ``data`` to a name no reader matches, then rename it to ``path`` in one step."""
    temporary = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise ChannelError(f"Cannot write {path}") from exc


def _queue_of(name: str) -> str | None:
    # kombu's rule (``<time>_<uuid>.<queue>.msg``), so files of either transport are read.
    rest = name.partition(".")[2]
    return rest.removesuffix(".msg") if rest.endswith(".msg") else None


#: How long one listing of the folder serves a queue found empty. A worker consumes several
#: queues, and listing the folder for each empty one at every message would read thousands of
#: names over and over; a new message waits at most this long, less than the polling interval.
RELIST_SECONDS = 0.05


class Channel(filesystem.Channel):
    def __init__(self, connection: Any, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        # Delivery tag → claimed file, until the message is acknowledged or given back. Acks
        # may come from the pool's threads; single dict operations are atomic under the GIL.
        self._claims: dict[str, Path] = {}
        # Each queue's names from one listing of the folder, taken in order before it is
        # listed again: listing and sorting thousands of names for every message would cost
        # more.
        self._pending: dict[str, deque[str]] = {}
        self._listed_at = float("-inf")
        # Queues consumed without acknowledgements (Celery's control replies): nothing will
        # ever settle their claims, so they are deleted as soon as they are read.
        self._no_ack_queues: set[str] = set()
        for folder in (self.claimed_folder, self.rejected_folder):
            folder.mkdir(parents=True, exist_ok=True)
        self._recover_orphans()

    @cached_property
    def claimed_folder(self) -> Path:
        return Path(self.transport_options.get("claimed_folder", self._queue_path / "claimed"))

    @cached_property
    def rejected_folder(self) -> Path:
        return Path(self.transport_options.get("rejected_folder", self._queue_path / "rejected"))

    @cached_property
    def _queue_path(self) -> Path:
        return Path(self.data_folder_in)

    # Messages ----------------------------------------------------------------------------------

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        # Wall-clock nanoseconds, zero-padded, so names sort by age across processes and
        # reboots (kombu's monotonic milliseconds restart at boot and are not padded).
        name = f"{time.time_ns():020d}_{uuid.uuid4()}.{queue}.msg"
        _publish(Path(self.data_folder_out) / name, str_to_bytes(dumps(payload)))
        self._listed_at = float("-inf")  # this channel's next take lists it

    def _get(self, queue: str) -> Any:
        pending = self._pending.get(queue)
        if not pending and time.monotonic() - self._listed_at >= RELIST_SECONDS:
            self._list()
            pending = self._pending.get(queue)
        while pending:
            name = pending.popleft()
            claimed = self.claimed_folder / f"{os.getpid()}{_PID_SEPARATOR}{name}"
            try:
                os.rename(self._queue_path / name, claimed)
            except FileNotFoundError:
                continue  # another consumer took it first
            decoded = self._decode(claimed)
            if decoded is None:
                continue
            message, delivery_tag = decoded
            if queue in self._no_ack_queues:
                claimed.unlink()
            else:
                self._claims[delivery_tag] = claimed
            return message
        raise Empty()

    def _list(self) -> None:
        """Share one listing of the folder out to every queue, oldest first."""
        found: dict[str, list[str]] = {}
        for name in os.listdir(self._queue_path):
            queue = _queue_of(name)
            if queue is not None:
                found.setdefault(queue, []).append(name)
        self._pending = {queue: deque(sorted(names)) for queue, names in found.items()}
        self._listed_at = time.monotonic()

    def _decode(self, claimed: Path) -> tuple[Any, str] | None:
        """The message in ``claimed`` and its delivery tag, or None once a file that holds
        no message is set aside."""
        name = claimed.name.partition(_PID_SEPARATOR)[2]
        try:
            message = loads(bytes_to_str(claimed.read_bytes()))
            delivery_tag = message["properties"]["delivery_tag"]
        except (ValueError, KeyError, TypeError) as exc:
            # The name only: a payload may hold a task's arguments.
            logger.warning(
                "message %s is not a message (%s); moved to %s",
                name,
                type(exc).__name__,
                self.rejected_folder,
            )
            os.replace(claimed, self.rejected_folder / name)
            return None
        return message, delivery_tag

    def _give_back(self, claimed: Path) -> None:
        """Rename a claimed file back into the queue, under its original name."""
        name = claimed.name.partition(_PID_SEPARATOR)[2]
        with contextlib.suppress(FileNotFoundError):  # another process gave it back first
            os.rename(claimed, self._queue_path / name)
        self._listed_at = float("-inf")  # the next take lists it again

    def _settle(self, delivery_tag: str) -> None:
        claimed = self._claims.pop(delivery_tag, None)
        if claimed is not None:
            claimed.unlink(missing_ok=True)

    def _recover_orphans(self) -> None:
        """Give back every message claimed by a process that no longer runs."""
        global _inherited_checked  # once per process, before its first claim
        with _inherited_lock:
            inherited, _inherited_checked = not _inherited_checked, True
        for claimed in self.claimed_folder.iterdir():
            pid, separator, _ = claimed.name.partition(_PID_SEPARATOR)
            if not (separator and pid.isdigit()):
                continue
            # Claims under this process's own pid, found before it claimed anything, were left
            # by a process gone before it: a restarted container's worker gets the same pid.
            mine = int(pid) == os.getpid()
            if inherited if mine else not processes.alive(int(pid)):
                logger.info("giving back %s, claimed by process %s that is gone", claimed, pid)
                self._give_back(claimed)

    def _restore(self, message: Any) -> None:
        # Requeued or left unacknowledged at close: the claimed file itself goes back, so
        # the message keeps its place and no copy of it stays behind.
        claimed = self._claims.pop(message.delivery_tag, None)
        if claimed is None:
            super()._restore(message)
        else:
            self._give_back(claimed)

    def basic_consume(self, queue: str, no_ack: bool, *args: Any, **kwargs: Any) -> Any:
        if no_ack:
            self._no_ack_queues.add(queue)
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    def basic_cancel(self, consumer_tag: str) -> Any:
        self._no_ack_queues.discard(self._tag_to_queue.get(consumer_tag, ""))
        return super().basic_cancel(consumer_tag)

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        message = super().basic_get(queue, no_ack, **kwargs)
        if message is not None and no_ack:
            self._settle(message.delivery_tag)
        return message

    def basic_ack(self, delivery_tag: str, multiple: bool = False) -> None:
        self._settle(delivery_tag)
        super().basic_ack(delivery_tag, multiple)
        self._wake()

    def basic_reject(self, delivery_tag: str, requeue: bool = False) -> None:
        # With requeue the QoS gives the message back through _restore, which drops the
        # claim; without, the claim is still here and the message is done with.
        super().basic_reject(delivery_tag, requeue)
        self._settle(delivery_tag)
        self._wake()

    def _wake(self) -> None:
        """Tell the transport a prefetch slot is free (see Transport.drain_events)."""
        if self.connection is not None:  # None once the channel is closed
            self.connection.settled.set()

    # Exchange tables ---------------------------------------------------------------------------

    def get_table(self, exchange: str) -> Table:
        # Tables are only ever replaced whole (see _change_table): no lock needed to read one.
        file = self._exchange_file(exchange)
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ChannelError(f"Cannot open {file}") from exc
        try:
            return [filesystem.exchange_queue_t(*q) for q in loads(bytes_to_str(data))]
        except (ValueError, TypeError):
            # One left half-written by kombu's own transport: the next binding rewrites it.
            logger.warning("exchange table %s is unreadable; taken as empty", file.name)
            return []

    def _change_table(self, exchange: str, entry: filesystem.exchange_queue_t, add: bool) -> None:
        """Add ``entry`` to the exchange's table or remove it: read, change, replace whole."""
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(parents=True, exist_ok=True)
        # One lock for every table: bindings are rare, and without it two processes binding
        # at once would each write a table missing the other's queue.
        with (self.control_folder / "tables.lock").open("ab") as guard:
            filesystem.lock(guard, filesystem.LOCK_EX)
            try:
                table = self.get_table(exchange)
                if add and entry not in table:
                    table.insert(0, entry)
                elif not add and entry in table:
                    table.remove(entry)
                else:
                    return
                _publish(file, str_to_bytes(dumps(table)))
            finally:
                filesystem.unlock(guard)

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._change_table(exchange, entry, add=True)

    def _delete(
        self, queue: str, exchange: str, routing_key: str, pattern: str, *args: Any, **kwargs: Any
    ) -> None:
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._change_table(exchange, entry, add=False)


class Transport(filesystem.Transport):
    Channel = Channel

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        # Set by every ack. A busy worker's poll comes back empty because its prefetch slots
        # are full, not because the queue is; kombu would then sleep the whole polling
        # interval, capping a worker at its slots per interval. The wait ends at the ack that
        # frees a slot instead.
        self.settled = threading.Event()

    def drain_events(self, connection: Any, timeout: float | None = None) -> None:
        start = time.monotonic()
        wait = self.polling_interval if timeout is None else min(self.polling_interval, timeout)
        while True:
            self.settled.clear()
            try:
                self.cycle.get(self._deliver, timeout=timeout)
            except Empty:
                if timeout is not None and time.monotonic() - start >= timeout:
                    raise TimeoutError from None  # socket.timeout, as kombu raises
                self.settled.wait(wait)
            else:
                return
