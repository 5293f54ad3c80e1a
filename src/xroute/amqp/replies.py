"""The replies RabbitMQ gives, code and text, for what `Topology` refuses.

`Topology` raises typed errors worded for a library user; on the wire a client sees RabbitMQ's
own words (``PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x' in vhost '/':
received 'direct' but current is 'topic'``). An error that carries its reply (``error.reply``,
set where it is raised) is answered with it; the others are mapped here by class. Values are
printed as Erlang's ``io_lib`` prints them (``~p``, or ``~tp`` from RabbitMQ 4.0), since that
is how RabbitMQ's texts show them.
"""

from __future__ import annotations

import re
from typing import Any

from xroute.amqp.errors import (
    ACCESS_REFUSED,
    COMMAND_INVALID,
    INTERNAL_ERROR,
    NOT_FOUND,
    PRECONDITION_FAILED,
    AMQPError,
    not_found,
)
from xroute.core.errors import (
    AccessRefused,
    BindingNotFound,
    BrokerCrash,
    InequivalentArgument,
    InvalidArgumentType,
    RoutingFailed,
    UnknownExchange,
    UnknownExchangeType,
    UnknownQueue,
    XRouteError,
)
from xroute.core.values import field_type
from xroute.erlang.terms import io_format

# An atom that ~p prints without quotes: a lowercase letter, then letters, digits, _ and @.
_BARE_ATOM = re.compile(r"[a-z][A-Za-z0-9_@]*")
_RESERVED = {"after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl", "bsr", "bxor",
             "case", "catch", "cond", "div", "end", "fun", "if", "let", "not", "of", "or",
             "orelse", "receive", "rem", "try", "when", "xor", "maybe", "else"}


def erlang_atom(name: str) -> str:
    """An atom as ``~p`` prints it: quoted unless it reads as one bare word."""
    if _BARE_ATOM.fullmatch(name) and name not in _RESERVED:
        return name
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _equivalence_value(value: Any, typed: bool, unicode: bool) -> str:
    """``rabbit_misc:val/1``: none, 'V', or (when the two sides differ in presence or type)
    "the value 'V' of type 'T'"."""
    if value is None:
        return "none"
    if isinstance(value, bool) and not typed:
        return "'" + ("true" if value else "false") + "'"
    if typed:
        shown = _text(value) if isinstance(value, (str, bytes)) else io_format(value, unicode)
        return f"the value '{shown}' of type '{field_type(value)}'"
    return "'" + (_text(value) if isinstance(value, (str, bytes)) else io_format(value)) + "'"


def _text(value: str | bytes) -> str:
    # ~s of a binary: its bytes as they are (UTF-8 text shows as text).
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _inequivalent(error: InequivalentArgument, vhost: str, unicode: bool) -> AMQPError:
    what, received, current = error.argument, error.received, error.current
    if what == "type":
        # Exchange types are atoms on both sides: ~p quotes the ones with a '-' in them.
        shown_received = f"'{erlang_atom(str(received))}'"
        shown_current = f"'{erlang_atom(str(current))}'"
    else:
        # Both present: the bare values, whatever their types; else the typed pair, or none.
        typed = what == "alternate-exchange" and (received is None or current is None)
        shown_received = _equivalence_value(received, typed, unicode)
        shown_current = _equivalence_value(current, typed, unicode)
    return AMQPError(
        PRECONDITION_FAILED,
        f"inequivalent arg '{what}' for exchange '{error.exchange}' in vhost '{vhost}': "
        f"received {shown_received} but current is {shown_current}",
    )


def refusal(error: XRouteError, vhost: str, unicode: bool = True) -> AMQPError:
    """The reply RabbitMQ gives for what `Topology` refused (as the topology's profile words
    it, where versions differ; ``unicode``: RabbitMQ 4.x prints values with ``~tp``)."""
    if isinstance(error, AMQPError):
        return error
    if error.reply is not None:
        return AMQPError(*error.reply)
    if isinstance(error, UnknownExchange):
        return not_found("exchange", error.name, vhost)
    if isinstance(error, UnknownQueue):
        return not_found("queue", error.name, vhost)
    if isinstance(error, AccessRefused):
        return AMQPError(ACCESS_REFUSED, str(error))
    if isinstance(error, UnknownExchangeType):
        # 3.x: rabbit_exchange:check_type's command_invalid, on the connection.
        if error.reply_code == COMMAND_INVALID:
            return AMQPError(COMMAND_INVALID, f"unknown exchange type '{error.exchange_type}'")
        # RabbitMQ 4.x: a precondition failure, on the channel.
        return AMQPError(PRECONDITION_FAILED, f"unknown exchange type '{error.exchange_type}'")
    if isinstance(error, InequivalentArgument):
        return _inequivalent(error, vhost, unicode)
    if isinstance(error, InvalidArgumentType):
        return AMQPError(
            PRECONDITION_FAILED,
            f"invalid type '{field_type(error.value)}' for arg '{error.argument}' in exchange "
            f"'{error.exchange}' in vhost '{vhost}'",
        )
    if isinstance(error, (RoutingFailed, BrokerCrash)):
        # The broker's own code crashed (a JMS selector that cannot be evaluated, a history
        # replay with nowhere to go): the channel process dies and the connection closes
        # with the bare INTERNAL_ERROR (seen on 3.10.8).
        return AMQPError(INTERNAL_ERROR, "")
    if isinstance(error, BindingNotFound):
        return AMQPError(NOT_FOUND, str(error))
    # PreconditionFailed, InvalidArguments (a bad x-match), InvalidPattern,
    # InvalidRoutingKey, InvalidHeaders: RabbitMQ's 406.
    return AMQPError(PRECONDITION_FAILED, str(error))
