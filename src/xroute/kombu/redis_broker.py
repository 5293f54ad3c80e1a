"""The broker state of xroute.kombu's Redis channels, kept in Redis so that every connection
and process shares it, beside (and without changing) what kombu's own Redis transport keeps.

Keys (each under kombu's ``global_keyprefix``):

- ``_kombu.binding.<exchange>`` and ``_kombu.binding_permanent.<exchange>``: kombu's own sets of
  queue-binding rows ``routing_key SEP pattern SEP queue``, written as kombu writes them, so a
  process without xroute still routes (its own way) and consumes;
- ``_kombu.xroute.exchanges``: a hash, exchange name to its declaration (JSON);
- ``_kombu.xroute.queues``: the set of declared queues (``_kombu.xroute.auto_delete``: those
  declared auto-delete);
- ``_kombu.xroute.bindings``: the set of bindings as RabbitMQ identifies them, JSON
  ``[source, "queue" or "exchange", destination, routing key, arguments]`` (typed text); two
  bindings that differ only in arguments share one kombu row, which stays while either does;
- ``_kombu.xroute.version``: a counter every change increments.

A channel keeps the `Topology` built from these keys and reads only the counter and the
publish's own kombu set on each publish: a change made anywhere shows at the next publish, a
row written by a process without xroute too (routed with no arguments, or those its headers
row carries).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kombu.transport.virtual import exchange as kombu_exchange

from xroute.core.model import Binding, Exchange, Queue
from xroute.core.topology import DEFAULT_EXCHANGE, Topology
from xroute.engines import DEFAULT_ENGINE
from xroute.kombu.broker import Broker
from xroute.kombu.table import decode_arguments, decode_table, encode_arguments, encode_table

EXCHANGES = "_kombu.xroute.exchanges"
QUEUES = "_kombu.xroute.queues"
AUTO_DELETE = "_kombu.xroute.auto_delete"
BINDINGS = "_kombu.xroute.bindings"
VERSION = "_kombu.xroute.version"
# kombu's topic rows carry its regex of the binding key, which kombu without xroute reads.
_KOMBU_TOPIC = kombu_exchange.TopicExchange(None)


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def identity(binding: Binding) -> str:
    """A binding as a member of ``_kombu.xroute.bindings`` (equal bindings, equal text)."""
    kind, name = binding.destination
    return json.dumps(
        [binding.source, kind, name, binding.routing_key, encode_table(binding.arguments)],
        separators=(",", ":"), ensure_ascii=False,
    )


@dataclass
class _State:
    version: bytes | None
    topology: Topology
    implicit: set[str]  # exchanges known only from a kombu row (routed as direct, as kombu does)
    rows: dict[str, frozenset[str]] = field(default_factory=dict)  # expected kombu sets


class RedisBroker(Broker):
    """Exchanges, queues and bindings stored in Redis through a kombu Redis ``channel``
    (its client, key prefix and row separator)."""

    def __init__(self, channel: Any, engine: str = DEFAULT_ENGINE) -> None:
        super().__init__()
        self.channel = channel
        self.engine = engine
        self._state: _State | None = None
        self.builds = 0  # topologies built from Redis (a publish reads, and rarely rebuilds)

    # ----------------------------------------------------------------- keys and rows

    def _raw(self, key: str) -> str:
        # kombu's prefixed client prefixes only the commands it uses itself (not GET, INCR,
        # HGETALL): those get the prefix here.
        return self.channel.global_keyprefix + key

    def _set_of(self, exchange: str) -> str:
        return self.channel.keyprefix_queue % (exchange,)

    def _permanent_of(self, exchange: str) -> str:
        return self.channel.keyprefix_binding_permanent % (exchange,)

    def row(self, exchange_type: str, routing_key: str, arguments: Any, queue: str) -> str:
        """The kombu row of a queue binding, as kombu (or xroute's headers type) writes it."""
        if exchange_type == "topic":
            pattern = _KOMBU_TOPIC.key_to_pattern(routing_key)
        elif exchange_type == "headers":
            pattern = encode_arguments(arguments)
        else:
            pattern = ""
        return self.channel.sep.join([routing_key or "", pattern, queue])

    def _row_of(self, binding: Binding, topology: Topology) -> str:
        return self.row(topology.exchanges[binding.source].type, binding.routing_key,
                        binding.arguments, binding.destination.name)

    # ----------------------------------------------------------------- reading

    def current(self) -> Topology:
        """The topology, rebuilt if the version counter moved since it was built."""
        with self.channel.conn_or_acquire() as client:
            version = client.get(self._raw(VERSION))
        state = self._state
        if state is None or state.version != version:
            state = self._load()
        return state.topology

    def routing(self, exchange: str) -> Topology:
        """The topology for a publish to ``exchange``: one round trip reads the counter and
        the exchange's kombu set (a row another process wrote or removed shows here)."""
        with self.channel.conn_or_acquire() as client:
            with client.pipeline(transaction=False) as pipe:
                pipe.get(self._raw(VERSION))
                if exchange:
                    pipe.smembers(self._set_of(exchange))
                found = pipe.execute()
        state = self._state
        if state is None or state.version != found[0] or (
            exchange and self._rows(state, exchange) != frozenset(map(_text, found[1]))
        ):
            state = self._load(exchange)
        return state.topology

    def _rows(self, state: _State, exchange: str) -> frozenset[str]:
        rows = state.rows.get(exchange)
        if rows is None:
            topology = state.topology
            rows = frozenset(
                self._row_of(b, topology) for b in topology.bindings(exchange)
                if b.destination.kind == "queue"
            ) if exchange in topology.exchanges else frozenset()
            state.rows[exchange] = rows
        return rows

    def _load(self, extra: str = "") -> _State:
        channel = self.channel
        with channel.conn_or_acquire() as client:
            with client.pipeline(transaction=False) as pipe:
                pipe.execute_command("HGETALL", self._raw(EXCHANGES))
                pipe.smembers(QUEUES)
                pipe.smembers(AUTO_DELETE)
                pipe.smembers(BINDINGS)
                pipe.get(self._raw(VERSION))
                declared, queues, auto_delete, bindings, version = pipe.execute()
            declared = {_text(k): json.loads(_text(v)) for k, v in _pairs(declared)}
            edges = [json.loads(_text(member)) for member in bindings]
            names = sorted((set(declared) | {e[0] for e in edges} | {extra}) - {DEFAULT_EXCHANGE})
            with client.pipeline(transaction=False) as pipe:
                for name in names:
                    pipe.smembers(self._set_of(name))
                rows = {name: {_text(m) for m in members}
                        for name, members in zip(names, pipe.execute())}
        topology = Topology(self.engine)
        implicit: set[str] = set()
        for name, info in declared.items():
            topology.declare_exchange(
                name, info["type"], durable=info["durable"], auto_delete=info["auto_delete"],
                arguments=decode_table(info["arguments"]),
            )
        for queue in queues:
            topology.declare_queue(_text(queue), auto_delete=queue in auto_delete)

        def exchange(name: str) -> bool:
            if name not in topology.exchanges:
                if name.startswith("amq.") or name not in rows:
                    return False
                topology.declare_exchange(name, "direct")
                implicit.add(name)
            return True

        covered: set[tuple[str, str]] = set()
        for source, kind, destination, key, arguments in edges:
            arguments = decode_table(arguments)
            if not exchange(source):
                continue
            if kind == "queue":
                member = self.row(topology.exchanges[source].type, key, arguments, destination)
                if member not in rows.get(source, ()):
                    continue  # its row was removed by a process without xroute
                covered.add((source, member))
                topology.declare_queue(destination)
            elif not exchange(destination):
                continue
            topology.bind(source, destination, key, arguments, kind)
        # Rows written by processes without xroute.
        for source, members in rows.items():
            for member in members:
                if (source, member) in covered or not exchange(source):
                    continue
                key, pattern, queue = member.split(channel.sep)
                headers = topology.exchanges[source].type == "headers"
                topology.declare_queue(queue)
                topology.bind(source, queue, key, decode_arguments(pattern) if headers else None)
        self.builds += 1
        self._state = _State(version, topology, implicit)
        return self._state

    # ----------------------------------------------------------------- writing

    def _commit(self, write: Any) -> None:
        """Run ``write(pipe)`` and increment the version in one transaction; the kept topology
        (already changed) stays current unless another process changed something meanwhile."""
        with self.channel.conn_or_acquire() as client:
            with client.pipeline() as pipe:
                write(pipe)
                pipe.execute_command("INCR", self._raw(VERSION))
                new = pipe.execute()[-1]
        state = self._state
        if state is not None and int(state.version or 0) + 1 == new:
            state.version = str(new).encode()
            state.rows.clear()
        else:
            self._state = None

    def declare_exchange(self, name: str, exchange_type: str, **kwargs: Any) -> None:
        """As `Broker.declare_exchange`; an exchange known only from kombu rows (declared by a
        process without xroute, so of unknown type) takes the declared type."""
        with self.lock:
            self.current()
            if self._state is not None and name in self._state.implicit:
                self._save_exchange(name, exchange_type, kwargs.get("durable", True),
                                    kwargs.get("auto_delete", False), kwargs.get("arguments"))
                self._state = None
            super().declare_exchange(name, exchange_type, **kwargs)

    def _save_exchange(self, name: str, kind: str, durable: bool, auto_delete: bool,
                       arguments: Any) -> None:
        text = json.dumps({"type": kind, "durable": durable, "auto_delete": auto_delete,
                           "arguments": encode_table(arguments)})
        self._commit(lambda pipe: pipe.hset(EXCHANGES, name, text))

    def _saved_exchange(self, exchange: Exchange) -> None:
        self._save_exchange(exchange.name, exchange.type, exchange.durable, exchange.auto_delete,
                            exchange.arguments)

    def _deleted_exchange(self, name: str, bindings: list[Binding]) -> None:
        def write(pipe: Any) -> None:
            pipe.hdel(EXCHANGES, name)
            pipe.delete(self._set_of(name), self._permanent_of(name))
            for binding in bindings:
                pipe.srem(BINDINGS, identity(binding))

        self._commit(write)

    def _saved_queue(self, queue: Queue) -> None:
        def write(pipe: Any) -> None:
            pipe.sadd(QUEUES, queue.name)
            if queue.auto_delete:
                pipe.sadd(AUTO_DELETE, queue.name)

        self._commit(write)

    def _deleted_queue(self, name: str, bindings: list[Binding]) -> None:
        topology = self._state.topology if self._state is not None else None

        def write(pipe: Any) -> None:
            pipe.srem(QUEUES, name)
            pipe.srem(AUTO_DELETE, name)
            for binding in bindings:
                pipe.srem(BINDINGS, identity(binding))
                if topology is not None and binding.source in topology.exchanges:
                    member = self._row_of(binding, topology)
                    pipe.srem(self._set_of(binding.source), member)
                    pipe.srem(self._permanent_of(binding.source), member)
            pipe.delete(*{self.channel._q_for_pri(name, p) for p in self.channel.priority_steps})

        self._commit(write)

    def _saved_binding(self, binding: Binding, topology: Topology) -> None:
        def write(pipe: Any) -> None:
            pipe.sadd(BINDINGS, identity(binding))
            if binding.destination.kind == "queue":
                member = self._row_of(binding, topology)
                pipe.sadd(self._set_of(binding.source), member)
                pipe.sadd(self._permanent_of(binding.source), member)

        self._commit(write)

    def _deleted_binding(self, binding: Binding, topology: Topology) -> None:
        member = None
        if binding.destination.kind == "queue":
            member = self._row_of(binding, topology)
            # Another binding that differs only in its arguments keeps the shared row.
            if any(
                b.destination == binding.destination and b.routing_key == binding.routing_key
                and self._row_of(b, topology) == member
                for b in topology.bindings(binding.source)
            ):
                member = None

        def write(pipe: Any) -> None:
            pipe.srem(BINDINGS, identity(binding))
            if member is not None:
                pipe.srem(self._set_of(binding.source), member)
                pipe.srem(self._permanent_of(binding.source), member)

        self._commit(write)


def _pairs(reply: Any) -> list:
    # HGETALL through execute_command: a dict from redis-py's parser, or a flat list.
    if isinstance(reply, dict):
        return list(reply.items())
    return list(zip(reply[::2], reply[1::2]))


__all__ = ["AUTO_DELETE", "BINDINGS", "EXCHANGES", "QUEUES", "VERSION", "RedisBroker", "identity"]
