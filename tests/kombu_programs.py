"""kombu programs run the same way on any transport (a real RabbitMQ through ``pyamqp://``,
``memory://`` and ``redis://`` with xroute.kombu), and what they leave: every operation's
outcome (ok or refused) and every queue's contents as a multiset of (body, headers as
received, redelivered).

A program is a list of operations on logical names (``x1``, ``q1``; ``amq.*`` and ``""`` as
they are); `run` gives every name a prefix of its own, so runs never meet, and ``{t}`` in a
key, pattern or header becomes a per-run token, so that messages sent through the shared
``amq.*`` exchanges of a real broker reach no one else's queues. Operations:

- ``("exchange", name, type, arguments)``, ``("queue", name)``: declare (not durable);
- ``("bind", queue, exchange, key, arguments)``, ``("unbind", ...)``: queue bindings;
- ``("bind_exchange", destination, source, key, arguments)``, ``("unbind_exchange", ...)``;
- ``("delete_queue", name)``, ``("delete_exchange", name)``;
- ``("publish", exchange, key, headers)``: body ``{"n": its number}``; on the default exchange
  the key and the CC/BCC entries are queue names;
- ``("die", queue, count, how)``: another connection takes ``count`` messages (``"get"``, or
  ``"consume"`` with prefetch 1 and one message) without acking, and closes;
- ``("reject", queue, count)``: take ``count`` messages and reject them with requeue;
- ``("other", operation)``: the operation on a second connection (another process).
"""

from __future__ import annotations

import json
import random
import socket
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kombu import Connection, Consumer, Exchange, Producer, Queue
from kombu.exceptions import ChannelError

from tests.kombu_support import HEADER_NAMES, HEADER_VALUES

Program = list[tuple]
Connect = Callable[[], Connection]

# ----------------------------------------------------------------- running


class _Names:
    def __init__(self) -> None:
        self.prefix = f"xr19-{uuid.uuid4().hex[:8]}-"
        self.token = f"t{uuid.uuid4().hex[:8]}"

    def name(self, logical: str) -> str:
        return logical if logical == "" or logical.startswith("amq.") else self.prefix + logical

    def text(self, value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("{t}", self.token)
        if isinstance(value, list):
            return [self.text(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k): self.text(v) for k, v in value.items()}
        return value


class _Run:
    def __init__(self, connect: Connect) -> None:
        self.connect = connect
        self.names = _Names()
        self.main = connect()
        self.other = connect()
        self.channels = {"main": self.main.channel(), "other": self.other.channel()}
        self.queues: set[str] = set()
        self.exchanges: set[str] = set()
        self.published = 0

    def close(self) -> None:
        self.main.close()
        self.other.close()

    def do(self, operation: tuple, who: str = "main") -> str:
        if operation[0] == "other":
            return self.do(operation[1], "other")
        try:
            self._do(operation, self.channels[who], who)
            return "ok"
        except Exception as error:  # noqa: BLE001 - the outcome is what is compared
            connection = self.main if who == "main" else self.other
            self.channels[who] = connection.channel()  # RabbitMQ closed the channel
            return f"refused ({reply_code(error)})"

    def _do(self, op: tuple, channel: Any, who: str) -> None:
        n, t = self.names.name, self.names.text
        kind = op[0]
        if kind == "exchange":
            _, name, type_, arguments = op
            self.exchanges.add(name)
            Exchange(n(name), type=type_, durable=False, arguments=t(_arguments(arguments, n)),
                     channel=channel).declare()
        elif kind == "queue":
            self.queues.add(op[1])
            Queue(n(op[1]), durable=False, channel=channel).declare()
        elif kind in ("bind", "unbind"):
            _, queue, exchange, key, arguments = op
            method = channel.queue_bind if kind == "bind" else channel.queue_unbind
            method(n(queue), n(exchange), t(key), arguments=t(arguments))
        elif kind in ("bind_exchange", "unbind_exchange"):
            _, destination, source, key, arguments = op
            method = channel.exchange_bind if kind == "bind_exchange" else channel.exchange_unbind
            method(n(destination), n(source), t(key), arguments=t(arguments))
        elif kind == "delete_queue":
            channel.queue_delete(n(op[1]))
        elif kind == "delete_exchange":
            channel.exchange_delete(n(op[1]))
        elif kind == "publish":
            _, exchange, key, headers = op
            headers = t(headers)
            if exchange == "":
                key = n(key)
                headers = {h: [n(v) for v in vs] if h in ("CC", "BCC") else vs
                           for h, vs in headers.items()}
            self.published += 1
            Producer(channel, serializer="json").publish(
                {"n": self.published}, exchange=n(exchange), routing_key=t(key),
                headers=headers, retry=False)
        elif kind == "die":
            self._die(n(op[1]), op[2], op[3])
        elif kind == "reject":
            for _ in range(op[2]):
                message = Queue(n(op[1]), channel=channel).get(no_ack=False)
                if message is not None:
                    message.reject(requeue=True)
        else:
            raise ValueError(f"unknown operation {op!r}")

    def _die(self, queue: str, count: int, how: str) -> None:
        # A consumer that takes messages and goes away without acking them.
        with self.connect() as connection:
            channel = connection.channel()
            waiting = channel.queue_declare(queue, passive=True).message_count
            if how == "get":
                for _ in range(count):
                    Queue(queue, channel=channel).get(no_ack=False)
            else:
                got: list = []
                channel.basic_qos(0, 1, False)
                bound = Queue(queue, channel=channel, no_declare=True)
                consumer = Consumer(channel, queues=[bound], accept=["json"], no_ack=False,
                                    callbacks=[lambda body, message: got.append(message)])
                consumer.consume()
                for _ in range(50 if waiting else 0):
                    if got:
                        break
                    try:
                        connection.drain_events(timeout=0.1)
                    except socket.timeout:
                        pass

    def contents(self) -> dict[str, Any]:
        """Each queue named in the program: None if it does not exist at the end, else its
        messages (body, headers, redelivered), sorted; the queues are deleted after."""
        found: dict[str, Any] = {}
        for logical in sorted(self.queues):
            name = self.names.name(logical)
            channel = self.main.channel()
            try:
                channel.queue_declare(name, passive=True)
            except Exception:  # noqa: BLE001 - missing on every transport alike
                found[logical] = None
                continue
            messages = []
            while (message := Queue(name, channel=channel).get(no_ack=True)) is not None:
                headers = dict(message.headers or {})
                messages.append(json.dumps(
                    [message.payload, self.names_back(headers),
                     bool(message.delivery_info.get("redelivered"))],
                    sort_keys=True, default=repr))
            found[logical] = sorted(messages)
            channel.queue_delete(name)
        channel = self.main.channel()
        for logical in self.exchanges:
            try:
                channel.exchange_delete(self.names.name(logical))
            except Exception:  # noqa: BLE001 - cleaning up
                channel = self.main.channel()
        return found

    def names_back(self, value: Any) -> Any:
        # Headers as received, with this run's prefix and token taken out again.
        if isinstance(value, str):
            return value.replace(self.names.prefix, "").replace(self.names.token, "{t}")
        if isinstance(value, list):
            return [self.names_back(v) for v in value]
        if isinstance(value, dict):
            return {self.names_back(k): self.names_back(v) for k, v in value.items()}
        return value


# The AMQP reply code RabbitMQ closes the channel with, for xroute's typed errors.
XROUTE_CODES = {
    "UnknownExchange": 404, "UnknownQueue": 404, "AccessRefused": 403,
    "PreconditionFailed": 406, "InvalidArguments": 406,
}


def reply_code(error: Exception) -> Any:
    """The AMQP reply code of a refusal: py-amqp's errors carry it, kombu's virtual
    ChannelError in its arguments, xroute's by class."""
    code = getattr(error, "code", None) or getattr(error, "reply_code", None)
    if isinstance(code, int):
        return code
    if isinstance(error, ChannelError) and len(error.args) == 4 and str(error.args[3]).isdigit():
        return int(error.args[3])
    for kind in type(error).__mro__:  # the nearest class named (InequivalentArgument: 406)
        if kind.__name__ in XROUTE_CODES:
            return XROUTE_CODES[kind.__name__]
    return type(error).__name__


def _arguments(arguments: dict | None, name: Callable[[str], str]) -> dict | None:
    if arguments and "alternate-exchange" in arguments:
        return {**arguments, "alternate-exchange": name(arguments["alternate-exchange"])}
    return arguments


def run(program: Program, connect: Connect) -> dict[str, Any]:
    """Run ``program`` with connections from ``connect``: ``{"outcomes": [...], "queues":
    {queue: None or [message, ...]}}``."""
    state = _Run(connect)
    try:
        outcomes = [state.do(operation) for operation in program]
        return {"outcomes": outcomes, "queues": state.contents()}
    finally:
        state.close()


def differences(program: Program, want: dict[str, Any], got: dict[str, Any]) -> str:
    """A readable account of where two runs of ``program`` differ ('' if they agree)."""
    lines = []
    for number, (op, w, g) in enumerate(zip(program, want["outcomes"], got["outcomes"])):
        if w != g:
            lines.append(f"  op {number} {op}: want {w}, got {g}")
    for queue in sorted(set(want["queues"]) | set(got["queues"])):
        w, g = want["queues"].get(queue), got["queues"].get(queue)
        if w != g:
            lines.append(f"  queue {queue}: want {w}\n{' ' * (9 + len(queue))}got  {g}")
    if not lines:
        return ""
    return "\n".join(["program:", *[f"  {i}: {op}" for i, op in enumerate(program)], *lines])


# ----------------------------------------------------------------- the scenarios

ORDER, REFUND = {"type": "order"}, {"type": "refund"}

SCENARIOS: dict[str, Program] = {
    # 1. Headers bindings that differ only in their arguments are two bindings; an unbind
    # with arguments removes its own.
    "headers-bindings-differing-in-arguments": [
        ("exchange", "x", "headers", None), ("queue", "q"),
        ("bind", "q", "x", "", ORDER), ("bind", "q", "x", "", REFUND),
        ("publish", "x", "", ORDER), ("publish", "x", "", REFUND),
        ("unbind", "q", "x", "", REFUND),
        ("publish", "x", "", ORDER), ("publish", "x", "", REFUND),
        ("unbind", "q", "x", "", {"type": "other"}),  # matches nothing: nothing happens
        ("publish", "x", "", ORDER),
    ],
    # 2. The default exchange is a direct exchange: CC/BCC apply, BCC is removed, a message
    # for a missing queue is dropped.
    "default-exchange-cc-bcc": [
        ("queue", "q1"), ("queue", "q2"), ("queue", "q3"),
        ("publish", "", "q1", {"CC": ["q2"], "BCC": ["q3"]}),
        ("publish", "", "missing", {}),
        ("publish", "", "missing", {"CC": ["q1"]}),
        ("publish", "", "q1", {"BCC": ["q1", "missing"]}),
    ],
    # 3. Unbind takes effect, from another connection too.
    "unbind-takes-effect": [
        ("exchange", "x", "topic", None), ("queue", "q"),
        ("bind", "q", "x", "a.#", None), ("publish", "x", "a.b", {}),
        ("other", ("unbind", "q", "x", "a.#", None)),
        ("publish", "x", "a.b", {}),
        ("bind", "q", "x", "a.*", {"k": 1}), ("unbind", "q", "x", "a.*", None),  # other args
        ("publish", "x", "a.c", {}),
    ],
    # 4. Another connection publishes by name to exchanges this one declared.
    "exchange-types-shared": [
        ("exchange", "t", "topic", None), ("exchange", "f", "fanout", None),
        ("exchange", "h", "headers", None), ("queue", "q1"), ("queue", "q2"),
        ("bind", "q1", "t", "a.#", None), ("bind", "q2", "f", "zzz", None),
        ("bind", "q1", "h", "", {"x-match": "any", "h1": 1}),
        ("other", ("publish", "t", "a", {})), ("other", ("publish", "f", "k", {})),
        ("other", ("publish", "h", "", {"h1": 1})), ("other", ("publish", "t", "b", {})),
    ],
    # 5. Unacked and rejected messages go back to their own queue, redelivered, not re-routed.
    "requeue-to-own-queue": [
        ("exchange", "x", "topic", None), ("queue", "q1"), ("queue", "q2"),
        ("bind", "q1", "x", "a", None), ("bind", "q2", "x", "#", None),
        ("publish", "x", "b", {"CC": ["a"]}), ("publish", "x", "z", {}),
        ("die", "q1", 1, "get"), ("die", "q2", 1, "consume"), ("reject", "q2", 1),
        ("publish", "x", "a", {}), ("die", "q1", 5, "get"),
    ],
    # 6. Queue delete removes messages and bindings, from any connection; re-declared, the
    # queue starts empty and unbound.
    "queue-delete-and-redeclare": [
        ("exchange", "x", "direct", None), ("queue", "q"), ("queue", "lone"),
        ("bind", "q", "x", "k", None), ("publish", "x", "k", {}), ("publish", "", "lone", {}),
        ("other", ("delete_queue", "q")), ("delete_queue", "lone"),
        ("queue", "q"), ("queue", "lone"), ("publish", "x", "k", {}),
        ("bind", "q", "x", "j", None), ("publish", "x", "j", {}),
    ],
    # 7. Exchange delete removes its bindings, and nothing else; a re-declared exchange has none.
    "exchange-delete-and-redeclare": [
        ("exchange", "x", "direct", None), ("exchange", "y", "direct", None),
        ("queue", "q"), ("bind", "q", "x", "k", None), ("bind", "q", "y", "k", None),
        ("delete_exchange", "x"), ("publish", "y", "k", {}), ("publish", "x", "k", {}),
        ("exchange", "x", "topic", None), ("publish", "x", "k", {}),
        ("bind", "q", "x", "#", None), ("publish", "x", "k", {}),
        ("other", ("delete_exchange", "y")), ("publish", "y", "k", {}),
    ],
    # 8. Unbind with other arguments on direct and topic exchanges removes nothing.
    "unbind-arguments-direct-topic": [
        ("exchange", "d", "direct", None), ("exchange", "t", "topic", None), ("queue", "q"),
        ("bind", "q", "d", "k", {"a": 1}), ("bind", "q", "t", "k.#", {"a": 1}),
        ("unbind", "q", "d", "k", {"a": 2}), ("unbind", "q", "t", "k.#", None),
        ("publish", "d", "k", {}), ("publish", "t", "k", {}),
        ("unbind", "q", "d", "k", {"a": 1}), ("publish", "d", "k", {}),
    ],
    # 9. Exchange-to-exchange bindings (a cycle too), alternate exchanges, and amq.*.
    "exchange-bindings-and-alternates": [
        ("exchange", "ae", "fanout", None),
        ("exchange", "t", "topic", {"alternate-exchange": "ae"}),
        ("exchange", "d", "direct", None), ("queue", "q1"), ("queue", "q2"), ("queue", "lost"),
        ("bind", "lost", "ae", "", None), ("bind", "q1", "t", "a.*", None),
        ("bind_exchange", "d", "t", "#", None), ("bind_exchange", "t", "d", "a.x", None),
        ("bind", "q2", "d", "a.x", None),
        ("publish", "t", "a.x", {}), ("publish", "t", "b", {}), ("publish", "d", "a.x", {}),
        ("unbind_exchange", "d", "t", "#", None), ("publish", "t", "a.x", {}),
        ("publish", "t", "zz", {"CC": ["a.y"]}),
    ],
    "built-in-exchanges": [
        ("queue", "q1"), ("queue", "q2"), ("queue", "q3"),
        ("bind", "q1", "amq.direct", "{t}", None), ("bind", "q2", "amq.topic", "{t}.#", None),
        ("bind", "q3", "amq.headers", "", {"{t}": 1}), ("bind", "q3", "amq.match", "",
                                                        {"x-match": "any", "{t}-b": "y"}),
        ("publish", "amq.direct", "{t}", {"BCC": ["{t}.z"]}),
        ("publish", "amq.topic", "{t}.a.b", {}), ("publish", "amq.topic", "{t}", {}),
        ("publish", "amq.headers", "", {"{t}": 1}), ("publish", "amq.match", "", {"{t}-b": "y"}),
        ("delete_exchange", "amq.topic"), ("bind", "q1", "", "q1", None),
    ],
    # 10. Refusals: a publish to a deleted exchange, redeclaring with another type.
    "refusals": [
        ("exchange", "x", "direct", None), ("queue", "q"), ("bind", "q", "x", "k", None),
        ("delete_exchange", "x"), ("publish", "x", "k", {}),
        ("exchange", "y", "direct", None), ("exchange", "y", "topic", None),
        ("bind", "q", "nowhere", "k", None), ("bind", "nobody", "y", "k", None),
        ("publish", "", "q", {}),
    ],
    # 11. Fanout on Redis is a queue like any other: get() sees it, the key filters nothing.
    "fanout-is-queued": [
        ("exchange", "f", "fanout", None), ("queue", "q1"), ("queue", "q2"),
        ("bind", "q1", "f", "only.this", None), ("bind", "q2", "f", "", None),
        ("publish", "f", "other", {}), ("publish", "f", "", {"CC": ["x"]}),
    ],
    # CC/BCC on every exchange type.
    "cc-bcc-every-type": [
        ("exchange", "d", "direct", None), ("exchange", "t", "topic", None),
        ("exchange", "f", "fanout", None), ("exchange", "h", "headers", None),
        ("queue", "q1"), ("queue", "q2"),
        ("bind", "q1", "d", "a", None), ("bind", "q2", "d", "b", None),
        ("bind", "q1", "t", "a.#", None), ("bind", "q2", "t", "*.b", None),
        ("bind", "q1", "f", "", None),
        ("bind", "q2", "h", "", {"x-match": "any", "h1": 1}),
        *[("publish", x, "a", {"CC": ["b"], "BCC": ["c.b"]}) for x in "dtfh"],
        *[("publish", x, "z", {"BCC": ["a", "x.b"], "h1": 1}) for x in "dtfh"],
        *[("publish", x, "z", {"CC": ["z.b"]}) for x in "dtfh"],
    ],
}

# ----------------------------------------------------------------- random programs with churn

KEYS = ["", "a", "b", "a.b", "a.b.c", "a..b", "b.c"]
PATTERNS = ["#", "*", "a.#", "#.b", "a.*", "*.b", "a", "", "a.#.b", "*.*", "b.c"]
TYPES = ["direct", "topic", "fanout", "headers"]
ARGUMENTS = [None, {"k": 1}, {"k": "1"}]


def random_program(seed: int, length: int = 40) -> Program:
    """A seeded program: three exchanges and four queues, then ``length`` operations of
    binding, unbinding (with and without matching arguments), exchange bindings, deletes and
    re-declares (an exchange perhaps with another type), publishes with headers and CC/BCC,
    consumers that die, rejects, some from a second connection."""
    rng = random.Random(seed)
    exchanges = {f"x{i}": rng.choice(TYPES) for i in range(3)}
    queues = [f"q{i}" for i in range(4)]
    program: Program = []
    for name, kind in exchanges.items():
        program.append(("exchange", name, kind, _alternate(rng, name, exchanges)))
    program += [("queue", q) for q in queues]
    bound: list[tuple] = []

    def arguments(exchange: str) -> dict | None:
        if exchanges.get(exchange) == "headers" and rng.random() < 0.8:
            table = {rng.choice(HEADER_NAMES): rng.choice(HEADER_VALUES)
                     for _ in range(rng.randint(0, 2))}
            mode = rng.choice([None, "all", "any"])
            return {**table, "x-match": mode} if mode else table
        return rng.choice(ARGUMENTS)

    def headers() -> dict:
        table = {rng.choice(HEADER_NAMES): rng.choice(HEADER_VALUES)
                 for _ in range(rng.randint(0, 2))}
        if rng.random() < 0.3:
            table[rng.choice(["CC", "BCC"])] = rng.sample(KEYS, rng.randint(1, 2))
        return table

    for _ in range(length):
        roll = rng.random()
        exchange = rng.choice(list(exchanges))
        queue = rng.choice(queues)
        if roll < 0.25:
            op: tuple = ("bind", queue, exchange, rng.choice(PATTERNS), arguments(exchange))
            bound.append(op)
        elif roll < 0.35 and bound:
            _, queue, exchange, key, args = rng.choice(bound)
            if rng.random() < 0.3:
                args = rng.choice(ARGUMENTS)  # perhaps not the binding's own
            op = ("unbind", queue, exchange, key, args)
        elif roll < 0.42:
            other = rng.choice([x for x in exchanges if x != exchange])
            op = (rng.choice(["bind_exchange", "bind_exchange", "unbind_exchange"]),
                  other, exchange, rng.choice(PATTERNS), None)
        elif roll < 0.47:
            op = ("delete_queue", queue)
            program.append(_maybe_other(rng, op))
            op = ("queue", queue)
        elif roll < 0.52:
            op = ("delete_exchange", exchange)
            program.append(_maybe_other(rng, op))
            exchanges[exchange] = rng.choice(TYPES)
            op = ("exchange", exchange, exchanges[exchange], _alternate(rng, exchange, exchanges))
        elif roll < 0.58:
            op = ("die", queue, rng.randint(1, 2), rng.choice(["get", "consume"]))
        elif roll < 0.62:
            op = ("reject", queue, 1)
        elif roll < 0.66:
            op = ("publish", "", rng.choice(queues + ["nobody"]),
                  {"CC": rng.sample(queues, 1)} if rng.random() < 0.5 else {})
        else:
            op = ("publish", exchange, rng.choice(KEYS), headers())
        program.append(_maybe_other(rng, op))
    return program


def _alternate(rng: random.Random, name: str, exchanges: dict) -> dict | None:
    if rng.random() < 0.3:
        return {"alternate-exchange": rng.choice([x for x in exchanges if x != name])}
    return None


def _maybe_other(rng: random.Random, op: tuple) -> tuple:
    return ("other", op) if op[0] not in ("die",) and rng.random() < 0.2 else op


# ----------------------------------------------------------------- RabbitMQ's answers, recorded

#: RabbitMQ's results for the scenarios and these seeds, kept in `RECORDED` so that the default
#: test run checks memory and Redis without a broker; ``make conformance`` checks that the
#: live broker still gives them (XROUTE_KOMBU_RECORD=1 rewrites the file from it).
RECORDED_SEEDS = range(12)
RECORDED = Path(__file__).parent / "data" / "kombu_rabbitmq_programs.json"


def program(name: str) -> Program:
    """A scenario by name, or ``seed=N``'s random program."""
    return random_program(int(name[5:])) if name.startswith("seed=") else SCENARIOS[name]


def recorded_names() -> list[str]:
    """The programs whose RabbitMQ results are recorded."""
    return [*SCENARIOS, *(f"seed={seed}" for seed in RECORDED_SEEDS)]


def recorded() -> dict[str, Any]:
    """RabbitMQ's recorded results, by program name."""
    return json.loads(RECORDED.read_text())["results"]
