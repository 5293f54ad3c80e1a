"""Every error xroute raises: one root, `XRouteError`, and a specific subclass per kind of bad input.

Each subclass also derives from the builtin it resembles (so ``except KeyError`` still works
for a missing binding) and keeps the offending value as an attribute.
"""

from __future__ import annotations

from typing import Any

from xroute._show import short_repr


class XRouteError(Exception):
    """The root of every error xroute raises on purpose."""

    # What RabbitMQ answers on the wire for this refusal, where it words it otherwise than
    # xroute's message: (reply code, reply text after the code's name; "" for none). None:
    # `xroute serve` derives its reply from the error's class.
    reply: tuple[int, str] | None = None

    def __str__(self) -> str:
        # KeyError's own __str__ shows the repr of its argument; every xroute error reads as a sentence.
        return str(self.args[0]) if self.args else self.__class__.__name__

    def replying(self, code: int, text: str = "") -> XRouteError:
        """This error, carrying RabbitMQ's reply to it (`reply`); for ``raise ... .replying``."""
        self.reply = (code, text)
        return self


class InvalidRoutingKey(XRouteError, ValueError):
    """A routing key that is not text, not valid UTF-8, or longer than 255 bytes."""

    def __init__(self, key: Any, reason: str) -> None:
        super().__init__(f"invalid routing key {_show(key)}: {reason}")
        self.key = key
        self.reason = reason


class InvalidPattern(XRouteError, ValueError):
    """A binding key (pattern) that is not text, not valid UTF-8, or longer than 255 bytes."""

    def __init__(self, pattern: Any, reason: str) -> None:
        super().__init__(f"invalid binding key {_show(pattern)}: {reason}")
        self.pattern = pattern
        self.reason = reason


class BindingNotFound(XRouteError, KeyError):
    """Removing a binding that does not exist."""

    def __init__(self, pattern: Any, destination: Any) -> None:
        super().__init__(f"no binding {_show(pattern)} -> {_show(destination)}")
        self.pattern = pattern
        self.destination = destination


class UnknownEngine(XRouteError, ValueError):
    """A matcher engine name that is not registered."""

    def __init__(self, engine: Any, known: list[str]) -> None:
        super().__init__(f"unknown engine {_show(engine)}; known engines: {', '.join(known)}")
        self.engine = engine


class UnknownExchange(XRouteError, KeyError):
    """An exchange name that the topology does not declare."""

    def __init__(self, name: Any, context: str = "") -> None:
        where = f" ({context})" if context else ""
        super().__init__(f"unknown exchange {_show(name)}{where}")
        self.name = name


class UnknownQueue(XRouteError, KeyError):
    """A queue name that the topology does not declare."""

    def __init__(self, name: Any, context: str = "") -> None:
        where = f" ({context})" if context else ""
        super().__init__(f"unknown queue {_show(name)}{where}")
        self.name = name


class UnknownExchangeType(XRouteError, ValueError):
    """An exchange type xroute does not know, declared through the library (RabbitMQ refuses
    the declaration; a definitions export with one still loads: `UnsupportedExchangeType`)."""

    def __init__(self, exchange_type: Any, known: list[str], reply_code: int = 503) -> None:
        super().__init__(
            f"unknown exchange type {_show(exchange_type)}; supported: {', '.join(known)} "
            f"(RabbitMQ answers {reply_code})"
        )
        self.exchange_type = exchange_type
        self.reply_code = reply_code


class UnsupportedExchangeType(XRouteError, ValueError):
    """A message reached an exchange whose type xroute does not know (a plugin it does not
    model). The definitions that hold it load; only the messages that reach it fail."""

    def __init__(self, exchange: Any, exchange_type: Any) -> None:
        super().__init__(
            f"exchange {_show(exchange)} has type {_show(exchange_type)}, which xroute does not "
            "support: messages that reach it cannot be routed"
        )
        self.exchange = exchange
        self.exchange_type = exchange_type


class RoutingFailed(XRouteError, RuntimeError):
    """RabbitMQ itself fails while routing this message (its exchange type crashes, or a JMS
    selector cannot be evaluated): the broker answers 541 INTERNAL_ERROR, closing the
    publisher's connection, and the message reaches no queue."""

    reply = (541, "")  # RabbitMQ's bare INTERNAL_ERROR, closing the connection

    def __init__(self, message: str, exchange: Any = None) -> None:
        super().__init__(message)
        self.exchange = exchange


class ReplayFailed(RoutingFailed):
    """Binding an ``x-recent-history`` exchange to an exchange through which one of its kept
    messages reaches no queue: the plugin fails the binding (541, closing the connection)
    once it has delivered the kept messages before that one (``replayed``, `Replay` each);
    the binding is not made."""

    def __init__(self, message: str, exchange: Any = None, replayed: Any = ()) -> None:
        super().__init__(message, exchange)
        self.replayed = list(replayed)


class BrokerCrash(XRouteError, ValueError):
    """Input on which RabbitMQ's own code fails instead of refusing it (a ``case`` no value
    of this type meets, as a ``hash-header`` that is not a longstr): the broker answers 541
    INTERNAL_ERROR and closes the connection. ``value`` is the input."""

    reply = (541, "")  # RabbitMQ's bare INTERNAL_ERROR, closing the connection

    def __init__(self, message: str, value: Any = None) -> None:
        super().__init__(message)
        self.value = value


class UnknownProfile(XRouteError, ValueError):
    """A RabbitMQ version profile xroute does not have."""

    def __init__(self, profile: Any, known: list[str]) -> None:
        super().__init__(f"unknown RabbitMQ profile {_show(profile)}; known: {', '.join(known)}")
        self.profile = profile


class SelectorError(XRouteError, ValueError):
    """A JMS selector (``rjms_erlang_selector``) that cannot be parsed or compiled; RabbitMQ
    refuses such a binding with 541, closing the connection."""

    reply = (541, "")  # RabbitMQ's bare INTERNAL_ERROR, closing the connection

    def __init__(self, message: str, selector: Any = None) -> None:
        super().__init__(message)
        self.selector = selector


class InvalidArguments(XRouteError, ValueError):
    """Binding or exchange arguments that RabbitMQ would refuse (a bad ``x-match``, say)."""

    def __init__(self, message: str, arguments: Any = None) -> None:
        super().__init__(message)
        self.arguments = arguments


class InvalidArgumentType(InvalidArguments):
    """A new exchange's argument of a type RabbitMQ refuses for it (an ``alternate-exchange``
    that is no longstr: 406): the exchange, the ``argument`` and its ``value``."""

    def __init__(self, exchange: Any, argument: str, value: Any) -> None:
        super().__init__(
            f"exchange {_show(exchange)}: {argument} must be an exchange name (text), got "
            f"{_show(value)}",
            {argument: value},
        )
        self.exchange = exchange
        self.argument = argument
        self.value = value


class InvalidHeaders(XRouteError, TypeError):
    """Message headers of the wrong shape: a non-dict, a non-text name, an unsupported value
    type, or a ``CC``/``BCC`` header that is not an array. ``erlang_reason``, when set, is
    the reason RabbitMQ names in its 406 (``{unacceptable_type_in_header,"BCC",void}``)."""

    def __init__(
        self, message: str, name: Any = None, value: Any = None, erlang_reason: str | None = None
    ) -> None:
        super().__init__(message)
        self.name = name
        self.value = value
        self.erlang_reason = erlang_reason


class InvalidFieldValue(InvalidHeaders, ValueError):
    """A value no AMQP field can carry: an integer outside its typed width, a float that is
    not finite, a value of a type with no AMQP field type. ``name`` is the type asked for."""


class FieldTableError(XRouteError, ValueError):
    """Bytes that are not a well-formed AMQP field table: an unknown type code, a length
    past the end, nesting past the limit. ``offset`` is where the decoder stopped."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


class PreconditionFailed(XRouteError, ValueError):
    """Redeclaring an exchange with another type or other arguments (AMQP 406)."""


class InequivalentArgument(PreconditionFailed):
    """Redeclaring an exchange with another type, flag or ``alternate-exchange`` (AMQP 406):
    the exchange, the ``argument``, and the values ``received`` and ``current`` (None: none)."""

    def __init__(self, exchange: Any, argument: str, received: Any, current: Any) -> None:
        super().__init__(
            f"exchange {_show(exchange)} exists with {argument} {current!r}; cannot redeclare "
            f"it with {argument} {received!r} (AMQP 406 inequivalent arg)"
        )
        self.exchange = exchange
        self.argument = argument
        self.received = received
        self.current = current


class AccessRefused(XRouteError, PermissionError):
    """An operation RabbitMQ forbids: binding the default exchange, publishing to an internal
    exchange, declaring a reserved ``amq.`` name (AMQP 403)."""


class InclusionTooCostly(XRouteError, ValueError):
    """Deciding whether one topic pattern includes another would take more than
    ``xroute.tools.patterns.MAX_STATES`` steps (a pathological pair; real binding sets stay far below)."""

    def __init__(self, including: Any, included: Any, limit: int) -> None:
        super().__init__(
            f"deciding whether {_show(including)} includes {_show(included)} needs more than "
            f"{limit} states"
        )
        self.including = including
        self.included = included
        self.limit = limit


class InvalidLintInput(XRouteError, ValueError):
    """A keys file or pipeline summary given to ``xroute lint`` that cannot be read or has the
    wrong shape."""

    def __init__(self, message: str, path: Any = None) -> None:
        super().__init__(message)
        self.path = path


class DefinitionsError(XRouteError, ValueError):
    """A RabbitMQ definitions export that cannot be read: bad JSON, a missing field, a field of
    the wrong type, or an ambiguous virtual host."""

    def __init__(self, message: str, where: Any = None) -> None:
        super().__init__(message)
        self.where = where


class DatasetError(XRouteError, ValueError):
    """A message dataset the pipeline cannot read: no such path, an unknown format, no
    ``routing_key`` column, a column of the wrong type, an unknown ``--keep-columns`` name."""

    def __init__(self, message: str, path: Any = None) -> None:
        super().__init__(message)
        self.path = path


class OutputExists(XRouteError, FileExistsError):
    """The pipeline's output folder exists and ``--overwrite`` was not given."""

    def __init__(self, path: Any) -> None:
        super().__init__(f"output folder {str(path)!r} exists; pass --overwrite to replace it")
        self.path = path


class OutputNotOurs(OutputExists):
    """An output folder that holds files xroute did not write (no ``_SUCCESS`` or
    ``_stream.json`` of xroute's): refused with ``--overwrite`` or without, so that nothing of
    the user's is ever deleted or overwritten."""

    def __init__(self, message: str, path: Any = None) -> None:
        XRouteError.__init__(self, message)
        self.path = path


class OutputOverlapsInput(XRouteError, ValueError):
    """An output folder that is, contains, or lies inside one of the run's inputs (the
    messages, the definitions, a stream's source): writing it would read or delete the input."""

    def __init__(self, message: str, path: Any = None) -> None:
        super().__init__(message)
        self.path = path


class OtherStreamOutput(OutputExists):
    """A stream's output folder that another stream (another checkpoint) writes: with a new
    checkpoint batch ids restart at 0, and batches already marked in it would be skipped."""

    def __init__(self, message: str, path: Any = None) -> None:
        XRouteError.__init__(self, message)
        self.path = path


class MissingDependency(XRouteError, ImportError):
    """A part of xroute whose optional dependency is not installed; the message names the
    ``pip install 'xroute[EXTRA]'`` that brings it."""

    def __init__(self, message: str, module: Any = None) -> None:
        super().__init__(message)
        self.module = module


class JavaUnavailable(XRouteError, RuntimeError):
    """Spark cannot start: no Java runtime, or one older than Spark needs."""

    def __init__(self, message: str, java: Any = None) -> None:
        super().__init__(message)
        self.java = java


class SparkConnectUnavailable(XRouteError, RuntimeError):
    """A Spark Connect session cannot be made: the client libraries are missing, or the server
    at ``url`` does not answer."""

    def __init__(self, message: str, url: Any = None) -> None:
        super().__init__(message)
        self.url = url


class PipelineFailed(XRouteError, RuntimeError):
    """A pipeline run that could not prove its result (input = delivered + unroutable +
    rejected, and every written file counted), or whose Spark job failed; nothing was kept."""

    def __init__(self, message: str, counts: Any = None) -> None:
        super().__init__(message)
        self.counts = counts


class ManagementError(XRouteError):
    """The RabbitMQ management API could not give the definitions; the subclasses say why.
    Keeps the ``url`` asked (never with a password in it)."""

    def __init__(self, message: str, url: Any = None) -> None:
        super().__init__(message)
        self.url = url


class ManagementURLError(XRouteError, ValueError):
    """A management API URL that cannot be used: not http(s), no host, a password written in
    it (it must come from ``RABBITMQ_PASSWORD`` or the prompt), or no password at all."""

    def __init__(self, message: str, url: Any = None) -> None:
        super().__init__(message)
        self.url = url


class ManagementAuthFailed(ManagementError, PermissionError):
    """The management API refused the credentials (HTTP 401/403): a wrong user or password, or
    a user without the ``administrator`` tag that ``/api/definitions`` needs."""

    def __init__(self, message: str, url: Any = None, user: Any = None) -> None:
        super().__init__(message, url)
        self.user = user


class ManagementUnavailable(ManagementError, ConnectionError):
    """Nothing answers as a RabbitMQ management API at the URL: the connection was refused,
    the host is unknown, or ``/api`` is not there (the ``rabbitmq_management`` plugin is off)."""


class ManagementTimeout(ManagementError, TimeoutError):
    """The management API did not answer in time."""

    def __init__(self, message: str, url: Any = None, timeout: float | None = None) -> None:
        super().__init__(message, url)
        self.timeout = timeout


class VhostNotFound(ManagementError, LookupError):
    """The broker has no virtual host of that name."""

    def __init__(self, message: str, url: Any = None, vhost: Any = None) -> None:
        super().__init__(message, url)
        self.vhost = vhost


class StorageError(XRouteError, OSError):
    """A path or URI that cannot be read or written: an unknown scheme, a missing filesystem
    library, refused credentials, an unreachable endpoint, a missing file."""

    def __init__(self, message: str, uri: Any = None) -> None:
        super().__init__(message)
        self.uri = uri


_show = short_repr


class TraceFormatError(XRouteError, ValueError):
    """A trace record (firehose capture, tracing plugin log, event) that cannot be read."""


class StreamError(XRouteError, RuntimeError):
    """A RabbitMQ stream (``rabbitmq-stream://``) that cannot be read: the node does not
    answer, refuses the credentials, or the read went wrong; the message says which stream."""

    def __init__(self, message: str, stream: str | None = None) -> None:
        super().__init__(message)
        self.stream = stream


class StreamURIError(StreamError, ValueError):
    """A ``rabbitmq-stream://`` URI or a stream source option that cannot be used."""


class StreamNotFound(StreamError, LookupError):
    """The stream named does not exist on the node (or is not a stream)."""


class StreamTruncated(StreamError):
    """Messages a read needed are gone: retention removed the offsets before ``first``.

    ``wanted`` is the first offset the read asked for, ``first`` the first one the stream still
    holds. Nothing was skipped silently: restart from ``first`` on purpose (option
    ``failOnDataLoss=false`` does so and counts the skipped offsets)."""

    def __init__(self, stream: str, wanted: int, first: int) -> None:
        super().__init__(
            f"stream {stream!r} no longer holds offsets {wanted}..{first - 1}: retention "
            f"removed them before they were read (its first offset is now {first}); set "
            "failOnDataLoss=false to go on from there, or start a new checkpoint",
            stream,
        )
        self.wanted = wanted
        self.first = first


class StreamDisconnected(StreamError, ConnectionError):
    """The connection to the node could not be opened, or was lost during a read (the node
    stopped, restarted, or the network failed): what a reader retries until its
    ``reconnectTimeout`` runs out."""


class StreamUnreachable(StreamError):
    """The node did not answer within the reader's ``reconnectTimeout``: the connection was
    retried with a growing back-off meanwhile. ``endpoint`` is the URI (without a password)."""

    def __init__(self, message: str, stream: str | None = None, endpoint: str = "") -> None:
        super().__init__(message, stream)
        self.endpoint = endpoint


class StreamVanished(StreamNotFound):
    """A stream a query was reading is gone from the broker (deleted while a task read it, or
    no longer matched among the streams of a ``streamPattern``): its unread messages, if any,
    cannot be read; the query stops rather than skip it."""

