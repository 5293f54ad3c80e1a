"""xroute inside kombu: RabbitMQ's routing for every kombu virtual transport (Redis, memory,
SQS, filesystem...), exact and fast.

    import xroute.kombu
    xroute.kombu.install()      # before connections are opened

From then on, ``memory://`` and ``redis://`` connections keep RabbitMQ's broker state
(bindings identified with their arguments, the default exchange and ``amq.*``,
exchange-to-exchange bindings, alternate exchanges, deletes, requeueing to the message's own
queue; `xroute.kombu.channel`), and every other virtual transport routes ``direct``,
``topic``, ``fanout``, ``headers`` and ``x-delimiter`` exchanges with xroute's semantics
(SEMANTICS.md), CC and BCC included. Producers, consumers and Celery's routing settings stay
as they are. `uninstall` gives kombu its own back. For one connection only, without touching
kombu's classes, give it an xroute transport class::

    Connection("redis://localhost:6379/0", transport=xroute.kombu.transport_class("redis"))

kombu is an optional dependency: ``pip install 'xroute[kombu]'``.
"""

from __future__ import annotations

from typing import Any

try:
    import kombu.transport as kombu_transport
    from kombu.transport import memory as kombu_memory
    from kombu.transport import resolve_transport
    from kombu.transport.virtual import Channel as VirtualChannel
    from kombu.transport.virtual import Transport as VirtualTransport
except ImportError as error:  # pragma: no cover - depends on the environment
    from xroute.core.errors import MissingDependency

    raise MissingDependency(
        "xroute.kombu needs kombu: pip install 'xroute[kombu]' (kombu>=5.3; redis>=4 for the "
        "Redis transport)", "kombu",
    ) from error

from xroute.core.errors import XRouteError
from xroute.kombu.broker import Broker, MemoryBroker
from xroute.kombu.channel import MemoryTransport, XRouteChannel, redis_classes
from xroute.kombu.exchange import (
    EXCHANGE_TYPES,
    DelimiterExchange,
    DirectExchange,
    FanoutExchange,
    HeadersExchange,
    TopicExchange,
    XRouteExchangeType,
)
from xroute.kombu.table import RouterStats, TableRouter, decode_arguments, encode_arguments

# kombu's own table, kept while xroute's is installed (None: not installed).
_kombu_exchange_types: dict[str, type] | None = None
# kombu's transport aliases that install() points at xroute's transports, and kombu's values.
_ALIASES = {"memory": lambda: MemoryTransport, "redis": lambda: redis_classes()[1],
            "rediss": lambda: redis_classes()[1]}
_kombu_aliases: dict[str, str] = {}


class NotAVirtualTransport(XRouteError, TypeError):
    """`transport_class` was given a transport that does not route messages itself (a real
    broker's, such as ``pyamqp``, where the broker routes), or no transport at all."""

    def __init__(self, transport: Any) -> None:
        super().__init__(
            f"transport {transport!r} is not one of kombu's virtual transports (memory, redis, "
            "SQS, filesystem, ...): its broker routes messages, so xroute has nothing to do there"
        )
        self.transport = transport


def install() -> None:
    """Make every kombu virtual channel opened from now on route with xroute: the aliases
    ``memory``, ``redis`` and ``rediss`` resolve to xroute's transports (RabbitMQ's broker
    state), other virtual channels get xroute's exchange types.

    A connection keeps the transport it resolved when it first connected; channels already
    open keep their types, and so does a transport that brings its own table (``pgmq``).
    Installing twice is installing once.
    """
    global _kombu_exchange_types
    if _kombu_exchange_types is None:
        _kombu_exchange_types = VirtualChannel.exchange_types
        for alias, transport in _ALIASES.items():
            _kombu_aliases[alias] = kombu_transport.TRANSPORT_ALIASES[alias]
            kombu_transport.TRANSPORT_ALIASES[alias] = transport  # kombu calls a callable alias
    VirtualChannel.exchange_types = {**_kombu_exchange_types, **EXCHANGE_TYPES}
    _forget_resolved()


def uninstall() -> None:
    """Give kombu its own exchange types back (for channels opened from now on)."""
    global _kombu_exchange_types
    if _kombu_exchange_types is not None:
        VirtualChannel.exchange_types = _kombu_exchange_types
        _kombu_exchange_types = None
        kombu_transport.TRANSPORT_ALIASES.update(_kombu_aliases)
        _kombu_aliases.clear()
        _forget_resolved()


def _forget_resolved() -> None:
    # kombu caches the class each alias resolved to.
    for alias in _ALIASES:
        kombu_transport._transport_cache.pop(alias, None)


def installed() -> bool:
    """True between `install` and `uninstall`."""
    return _kombu_exchange_types is not None


def transport_class(transport: str | type) -> type:
    """A subclass of a virtual transport (a kombu alias such as ``"redis"`` or
    ``"memory"``, a ``"module:Class"`` path, or the class) whose channels route with xroute,
    whether or not `install` was called; for ``Connection(url, transport=...)``.

    kombu's memory and Redis transports get xroute's whole broker state (`xroute.kombu.channel`);
    any other virtual transport gets xroute's exchange types only.
    """
    if isinstance(transport, str):
        base = kombu_transport.TRANSPORT_ALIASES.get(transport)
        base = base() if callable(base) else resolve_transport(transport)
    else:
        base = transport
    if not (isinstance(base, type) and issubclass(base, VirtualTransport)):
        raise NotAVirtualTransport(transport)
    if issubclass(base.Channel, XRouteChannel):
        return base
    if base is kombu_memory.Transport:
        return MemoryTransport
    redis = _kombu_redis_transport()
    if redis is not None and base is redis:
        return redis_classes()[1]
    channel = type(
        f"XRoute{base.Channel.__name__}",
        (base.Channel,),
        {
            "exchange_types": {**base.Channel.exchange_types, **EXCHANGE_TYPES},
            "__module__": __name__,
            "__doc__": f"{base.Channel.__qualname__}, routing with xroute.",
        },
    )
    return type(
        f"XRoute{base.__name__}",
        (base,),
        {"Channel": channel, "__module__": __name__, "__doc__": f"{base.__qualname__} with xroute."},
    )


def _kombu_redis_transport() -> type | None:
    try:
        from kombu.transport import redis as kombu_redis
    except ImportError:  # pragma: no cover - redis-py missing
        return None
    return kombu_redis.Transport if kombu_redis.redis is not None else None


__all__ = [
    "EXCHANGE_TYPES",
    "Broker",
    "MemoryBroker",
    "MemoryTransport",
    "XRouteChannel",
    "DelimiterExchange",
    "DirectExchange",
    "FanoutExchange",
    "HeadersExchange",
    "NotAVirtualTransport",
    "RouterStats",
    "TableRouter",
    "TopicExchange",
    "XRouteExchangeType",
    "decode_arguments",
    "encode_arguments",
    "install",
    "installed",
    "transport_class",
    "uninstall",
]
