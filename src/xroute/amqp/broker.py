"""`Broker`: the in-memory AMQP 0-9-1 server, in its own thread or on the caller's loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import logging
import resource
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from xroute.amqp.vhost import Record, VirtualHost
from xroute.amqp.view import BrokerView
from xroute.core.errors import XRouteError
from xroute.core.profiles import profile
from xroute.core.topology import Topology

T = TypeVar("T")
DEFAULT_USERS = {"guest": "guest"}
log = logging.getLogger(__name__)


def _connection_budget() -> int:
    """How many connections the process's descriptor limit leaves room for: the soft limit
    less a reserve for the listening socket, logs, and what the process opens itself."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    return max(1, soft - max(24, soft // 8))


class BrokerNotRunning(XRouteError, RuntimeError):
    """A call that needs a started broker, on one that is stopped (or never started)."""


class Broker:
    """An AMQP 0-9-1 broker in memory, on asyncio; routing is `Topology`'s.

    Nothing is persisted: messages, queues and declarations live as long as the broker.
    It meets hostile and broken clients as RabbitMQ does (docs/amqp.md): a login and open
    within ``handshake_timeout`` seconds, ``guest`` (``loopback_users``) only from loopback,
    no blank passwords, deliveries that wait for a slow consumer's socket, and with
    ``memory_limit`` (bytes of messages held) publishers blocked by ``connection.blocked``
    until consumers catch up.
    ``rabbitmq="3.10"`` (a profile of `xroute.core.profiles.VERSIONS`) routes and replies as that
    version where versions differ; the default follows RabbitMQ 4.3.

    ``with Broker() as broker:`` runs it in a thread of its own (for synchronous code);
    ``async with Broker() as broker:`` runs it on the running loop. ``port=0`` picks a free
    port; ``broker.url`` is the ``amqp://`` URL to give a client.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        topology: Topology | None = None,
        definitions: str | Path | Mapping[str, Any] | None = None,
        vhost: str = "/",
        users: Mapping[str, str] | None = None,
        heartbeat: int = 60,
        record: bool = True,
        rabbitmq: str | None = None,
        handshake_timeout: float = 10.0,  # RabbitMQ's handshake_timeout
        memory_limit: int | None = None,
        loopback_users: Iterable[str] = ("guest",),
        silent_close_delay: float = 3.0,  # RabbitMQ's ?SILENT_CLOSE_DELAY
    ) -> None:
        if topology is not None and definitions is not None:
            raise XRouteError("give a topology or definitions, not both")
        chosen = profile(rabbitmq)  # UnknownProfile names the known ones
        if topology is not None and rabbitmq is not None and topology.profile != chosen:
            raise XRouteError(
                f"the topology routes as {topology.profile.name or 'the default'} profile, not "
                f"{rabbitmq}: build it with Topology(rabbitmq={rabbitmq!r})"
            )
        if definitions is not None:
            topology = Topology.from_definitions(definitions, rabbitmq=rabbitmq)
        elif topology is None:
            topology = Topology(rabbitmq=rabbitmq)
        self.host = host
        self.port = port
        self.vhost = VirtualHost(vhost, topology)
        self.users = dict(users if users is not None else DEFAULT_USERS)
        # As RabbitMQ's loopback_users: these log in only from the machine itself.
        self.loopback_users = frozenset(loopback_users)
        self.heartbeat = heartbeat
        self.handshake_timeout = handshake_timeout
        self.silent_close_delay = silent_close_delay
        if memory_limit is not None and memory_limit <= 0:
            raise XRouteError(f"memory_limit must be a positive number of bytes, not {memory_limit}")
        self.vhost.memory.limit = memory_limit
        self.vhost.memory.on_alarm = self._memory_alarm
        self.max_connections = _connection_budget()
        self._out_of_descriptors = False
        self._evicting = False  # logged once an episode of dropping connections
        self.record = record  # keep acks and nacks for the test view (RECORD_LIMIT of them)
        self.rabbitmq = rabbitmq  # the profile (xroute.core.profiles) its topology routes and replies as
        self.connections: set[Any] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    # ------------------------------------------------------------------ address

    @property
    def view(self) -> BrokerView:
        """The test side: queues, messages, unacked, bindings, returned, dead-lettered."""
        return BrokerView(self)

    @property
    def url(self) -> str:
        """``amqp://guest:guest@host:port/`` (the first user's credentials)."""
        if self._server is None:
            raise BrokerNotRunning("the broker is not running: start it first")
        user, password = next(iter(self.users.items()), ("guest", "guest"))
        vhost = "" if self.vhost.name == "/" else "/" + self.vhost.name.replace("/", "%2F")
        return f"amqp://{user}:{password}@{self.host}:{self.port}{vhost or '/'}"

    # ------------------------------------------------------------------ asyncio

    async def start_async(self) -> Broker:
        """Listen on the running loop."""
        from xroute.amqp.connection import Connection

        self.loop = asyncio.get_running_loop()
        self.loop.set_exception_handler(self._loop_exception)
        self.vhost.attach(self.loop)
        self._server = await self.loop.create_server(
            lambda: Connection(self), self.host, self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop_async(self) -> None:
        """Close every connection (320 CONNECTION_FORCED) and stop listening."""
        if self._server is None:
            return
        self._server.close()
        for connection in list(self.connections):
            connection.force_close()
        await self._server.wait_closed()
        for queue in self.vhost.queues.values():
            queue.stop_timers()
        self._server = None

    async def __aenter__(self) -> Broker:
        return await self.start_async()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop_async()

    # ------------------------------------------------------------------ protection

    def admitted(self, connection: Any) -> None:
        """A connection was accepted: if the open connections near the process's limit of
        file descriptors, one that has not logged in is dropped to make room (a port scan or
        a flood of silent sockets must not lock healthy clients out): the oldest that has
        sent nothing, else the oldest still in its handshake; with none to drop, the
        newcomer."""
        self._out_of_descriptors = False
        excess = len(self.connections) - self.max_connections
        if excess <= 0:
            self._evicting = False
            return
        if not self._evicting:  # one line an episode, not one a connection
            self._evicting = True
            log.warning("xroute.amqp: %d connections, the most the descriptor limit allows; "
                        "dropping those that have not logged in", len(self.connections))
        waiting = [c for c in self.connections if c.pre_open and c is not connection]
        # Sets keep no order: the connections' serial numbers say which came first.
        waiting.sort(key=lambda c: (c.spoke, c.serial))
        for victim in (waiting + [connection])[:excess]:
            victim._abort()
            # Out of the count now, not when asyncio reports the loss a turn later: in a
            # burst of accepts, victims still counted would make each newcomer evict more,
            # until those that had logged in or were logging in went too.
            self.connections.discard(victim)

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        # asyncio retries accept() a second after running out of descriptors, logging a
        # traceback every time; one line per episode says it.
        error = context.get("exception")
        if isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE):
            if not self._out_of_descriptors:
                self._out_of_descriptors = True
                log.error("xroute.amqp: out of file descriptors (%s); new connections wait "
                          "until some close", error.strerror)
            return
        loop.default_exception_handler(context)

    def _memory_alarm(self, on: bool) -> None:
        memory = self.vhost.memory
        if on:
            log.warning("xroute.amqp: memory alarm: %d bytes of messages held, over the "
                        "limit of %d; publishers are blocked", memory.held, memory.limit)
            return
        log.warning("xroute.amqp: memory alarm cleared (%d bytes held)", memory.held)
        for connection in list(self.connections):
            connection.unblocked()

    # ------------------------------------------------------------------ thread

    def start(self) -> Broker:
        """Run the broker in a daemon thread of its own; returns once it listens."""
        if self._thread is not None:
            raise XRouteError("the broker is already running")
        ready: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as error:  # noqa: BLE001 - handed to the starting thread
                ready.set_exception(error)
                loop.close()
                return
            self._stopped = asyncio.Event()
            ready.set_result(None)
            loop.run_until_complete(self._stopped.wait())
            loop.run_until_complete(self.stop_async())
            loop.close()

        self._thread = threading.Thread(target=run, name="xroute-amqp-broker", daemon=True)
        self._thread.start()
        try:
            ready.result()
        except BaseException:
            self._thread = None
            raise
        return self

    def stop(self) -> None:
        """Stop a broker started with `start`."""
        if self._thread is None:
            return
        loop, stopped = self.loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stopped.set)
        self._thread.join(10)
        self._thread = None

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def call(self, function: Callable[[], T], timeout: float = 10.0) -> T:
        """Run ``function`` on the broker's loop (safe from any thread) and return its result."""
        loop = self.loop
        if loop is None or loop.is_closed():
            raise BrokerNotRunning("the broker is not running: start it first")
        try:
            if asyncio.get_running_loop() is loop:
                return function()
        except RuntimeError:
            pass

        async def run() -> T:
            return function()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)

    # ------------------------------------------------------------------ waiting

    def wait_for(
        self, predicate: Callable[[Record], bool], timeout: float = 5.0, kinds: tuple = ()
    ) -> Record:
        """The first record (returned, dead-lettered, ack, nack) matching ``predicate``,
        waiting up to ``timeout`` seconds for it; TimeoutError if none comes."""
        deadline = time.monotonic() + timeout
        seen = 0
        changed = self.vhost.changed
        with changed:
            while True:
                records = self.vhost.records
                for record in records[seen:]:
                    if (not kinds or record.kind in kinds) and predicate(record):
                        return record
                seen = len(records)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no matching record within {timeout} s")
                changed.wait(left)
