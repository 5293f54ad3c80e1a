"""Dead-lettering (RabbitMQ's ``rabbit_dead_letter``): where a copy of a message goes when a
queue rejects it, it expires or it overflows.

- The queue's ``x-dead-letter-exchange`` argument, else the ``dead-letter-exchange`` of the
  policy of highest priority that matches it, names the exchange (none: the message is
  dropped; an exchange that does not exist: dropped too). The routing key likewise, from
  ``x-dead-letter-routing-key`` / ``dead-letter-routing-key``.
- The copy keeps the message's routing keys (the key, CC and BCC) unless a dead-letter routing
  key is set: then it has that one key only, and its ``CC`` header is removed.
- It carries an ``x-death`` history, newest first, and ``x-first-death-*`` headers (also
  ``x-last-death-*`` from RabbitMQ 3.13), which headers exchanges may match. An entry's
  ``routing-keys`` are the message's key and its CC keys (BCC is gone from the headers); a
  second death in the same queue for the same reason counts up the first entry, which keeps
  its other fields, and moves it to the front (``rabbit_dead_letter``, ``mc:record_death``).
- Cycles: a queue the copy would reach is dropped if the copy already died there and every
  death since (this one included) was automatic, not ``rejected``. A rejected message is
  never dropped as a cycle.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xroute.core.errors import InvalidArguments, short_repr

REASONS = ("rejected", "expired", "maxlen", "delivery_limit")
X_DEATH = "x-death"


@dataclass(frozen=True)
class DeadLetter:
    """A dead-lettered copy: the exchange it is published to (None: dropped), its keys and
    headers, and why it was made."""

    queue: str
    reason: str
    exchange: str | None
    keys: list[str]
    headers: dict[str, Any]


def policy_definition(
    policies: Sequence[Mapping[str, Any]], name: str, kind: str = "queues"
) -> Mapping[str, Any]:
    """The definition of the policy of highest priority whose pattern matches ``name`` and
    that applies to ``kind`` (``queues`` or ``exchanges``); empty if none does."""
    best: tuple[int, Mapping[str, Any]] | None = None
    applies = ["all", kind]
    if kind == "queues":
        applies += ["classic_queues", "quorum_queues"]
    for policy in policies:
        if policy.get("apply-to", "all") not in applies:
            continue
        try:
            matches = re.search(str(policy.get("pattern", "")), name)
        except re.error:
            continue
        priority = policy.get("priority", 0)
        if matches and isinstance(priority, int) and (best is None or priority > best[0]):
            best = (priority, policy.get("definition") or {})
    return best[1] if best else {}


def dead_letter_settings(
    arguments: Mapping[str, Any], policies: Sequence[Mapping[str, Any]], queue: str
) -> tuple[str | None, str | None]:
    """(dead-letter exchange, dead-letter routing key) of a queue: each from its argument,
    else from its policy (RabbitMQ's ``res_arg``: the argument wins)."""
    definition = policy_definition(policies, queue)
    exchange = arguments.get("x-dead-letter-exchange", definition.get("dead-letter-exchange"))
    key = arguments.get("x-dead-letter-routing-key", definition.get("dead-letter-routing-key"))
    return (
        exchange if isinstance(exchange, str) else None,
        key if isinstance(key, str) else None,
    )


def make_dead_letter(
    queue: str,
    arguments: Mapping[str, Any],
    policies: Sequence[Mapping[str, Any]],
    keys: list[str],
    headers: Mapping[str, Any],
    reason: str,
    original_exchange: str = "",
    last_death_headers: bool = True,
    time: Any = None,
    expiration: Any = None,
) -> DeadLetter:
    """The copy a queue makes of a message it dead-letters: ``keys`` are the message's routing
    keys (the key, CC, BCC) and ``headers`` its checked headers without BCC. A new x-death
    entry gets ``time`` and, when the message had one, its ``expiration`` property as
    ``original-expiration`` (the broker gives both; None leaves them out)."""
    if reason not in REASONS:
        raise InvalidArguments(
            f"unknown dead-letter reason {short_repr(reason)}; RabbitMQ's are {', '.join(REASONS)}"
        )
    table = dict(headers)
    cc = table.get("CC")
    death_keys = keys[:1] + [k for k in cc if isinstance(k, str)] if isinstance(cc, list) else keys[:1]
    exchange, dl_key = dead_letter_settings(arguments, policies, queue)
    keys = list(keys)
    if dl_key is not None:
        keys = [dl_key]
        table.pop("CC", None)
    deaths = [d for d in table.get(X_DEATH) or [] if isinstance(d, Mapping)]
    death: dict[str, Any] = {"count": 1, "reason": reason, "queue": queue}
    if time is not None:
        death["time"] = time
    death["exchange"] = original_exchange
    death["routing-keys"] = death_keys
    if expiration is not None:
        death["original-expiration"] = expiration
    # One entry per (queue, reason): a repeat counts up the entry, which keeps its other
    # fields, and moves it to the front.
    for old in deaths:
        if old.get("queue") == queue and old.get("reason") == reason:
            death = {**old, "count": int(old.get("count", 1)) + 1}
            deaths = [d for d in deaths if d is not old]
            break
    table[X_DEATH] = [death, *deaths]
    table.setdefault("x-first-death-reason", reason)
    table.setdefault("x-first-death-queue", queue)
    table.setdefault("x-first-death-exchange", original_exchange)
    if last_death_headers:
        table["x-last-death-reason"] = reason
        table["x-last-death-queue"] = queue
        table["x-last-death-exchange"] = original_exchange
    return DeadLetter(queue, reason, exchange, keys, table)


def cycling(target: str, deaths: Sequence[Mapping[str, Any]], reason: str) -> bool:
    """Whether reaching queue ``target`` would close a fully automatic cycle (then RabbitMQ
    drops the copy for that queue). ``deaths`` is the copy's x-death, newest first."""
    if reason == "rejected":
        return False
    for index, death in enumerate(deaths):
        if death.get("queue") == target:
            return all(d.get("reason") != "rejected" for d in deaths[: index + 1])
    return False
