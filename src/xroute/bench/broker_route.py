"""RabbitMQ's own topic route function, timed inside the node (issue 36).

`rabbit_exchange_type_topic:route/2` is called in a loop by ``rabbitmqctl eval`` on a broker
found on this machine (the node answering ``rabbitmqctl``) or a private node started for the
run (`xroute.bench.rabbitmq.private_node`). The shape's bindings go to one topic exchange,
each to a fanout exchange standing for a queue (``rabbit_binding:add/2``: 10k queue processes
would measure the node, not the function; `destinations` numbers them); the
deliveries are made before the clock starts (``rabbit_basic:message/4``, ``delivery/4``), so
what is timed is the route alone, best of `PASSES` passes. Every exchange made is deleted
afterwards. The bindings and keys reach the node through a file of Erlang terms.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any

PASSES = 3
EVAL_TIMEOUT_S = 1_800  # 80k bindings bind at 2-4k/s in 3.10.8

# One expression sequence for ``rabbitmqctl eval``: binds, times, cleans up, and answers
# {BindMicros, [PassMicros...], Routed} where Routed counts the destinations of the last pass.
_PROGRAM = """
{ok, [Bs, Ks]} = file:consult("%(path)s"),
V = <<"/">>, User = <<"xroute-bench">>, P = <<"%(prefix)s">>,
XName = rabbit_misc:r(V, exchange, <<P/binary, "topic">>),
X = rabbit_exchange:declare(XName, topic, false, false, false, [], User),
NDest = lists:max([0 | [D + 1 || {_, D} <- Bs]]),
Dests = list_to_tuple([begin
    N = rabbit_misc:r(V, exchange, <<P/binary, "d", (integer_to_binary(I))/binary>>),
    rabbit_exchange:declare(N, fanout, false, false, false, [], User), N end
  || I <- lists:seq(0, NDest - 1)]),
{BindUs, _} = timer:tc(fun() -> lists:foreach(fun({K, D}) ->
    ok = rabbit_binding:add({binding, XName, K, element(D + 1, Dests), []}, User) end, Bs) end),
Ds = [rabbit_basic:delivery(false, false, rabbit_basic:message(XName, K, [], <<>>), undefined)
      || K <- Ks],
Pass = fun() -> timer:tc(fun() ->
    lists:foldl(fun(D, A) -> A + length(rabbit_exchange_type_topic:route(X, D)) end, 0, Ds)
  end) end,
Passes = [Pass() || _ <- lists:seq(1, %(passes)d)],
rabbit_exchange:delete(XName, false, User),
[rabbit_exchange:delete(element(I, Dests), false, User) || I <- lists:seq(1, NDest)],
{BindUs, [U || {U, _} <- Passes], element(2, lists:last(Passes))}.
"""


class BrokerRouteFailed(RuntimeError):
    """``rabbitmqctl eval`` failed or answered something else than the program's result."""


def rabbitmqctl() -> str | None:
    """The ``rabbitmqctl`` program, if this machine has one."""
    return shutil.which("rabbitmqctl", path=os.pathsep.join(
        [os.environ.get("PATH", ""), "/usr/sbin", "/usr/lib/rabbitmq/bin"]))


def _erlang_binary(text: str) -> str:
    # A UTF-8 binary literal: every byte as a number, so no escaping question arises.
    return "<<" + ",".join(str(b) for b in text.encode("utf-8")) + ">>"


def destinations(bindings: Sequence[tuple[str, str]]) -> list[tuple[str, int]]:
    """(pattern, destination number) per distinct binding: the n-th queue bound with a pattern
    gets destination n. route/2 lists a destination per matched binding whatever it is, so
    this matches and lists as the shape's own queues do, with as few destination exchanges
    as the most shared pattern needs (NATS's 37k subjects: one, not 37k declares)."""
    seen: dict[str, int] = {}
    numbered = []
    for pattern, _ in dict.fromkeys(bindings):
        number = seen.get(pattern, 0)
        seen[pattern] = number + 1
        numbered.append((pattern, number))
    return numbered


def measure(bindings: Sequence[tuple[str, str]], keys: Sequence[str],
            node: str | None = None, environment: dict[str, str] | None = None,
            passes: int = PASSES) -> dict[str, Any]:
    """Bind ``bindings`` (pattern, queue) in the node and time RabbitMQ's route of ``keys``:
    ``route_us`` (µs a route, best pass), ``bind_per_s``, ``passes_us``, ``routed``."""
    ctl = rabbitmqctl()
    if ctl is None:
        raise BrokerRouteFailed("rabbitmqctl not found")
    with tempfile.NamedTemporaryFile("w", suffix=".erl-terms", delete=False) as terms:
        terms.write("[" + ",".join(f"{{{_erlang_binary(p)},{d}}}"
                                   for p, d in destinations(bindings)) + "].\n")
        terms.write("[" + ",".join(_erlang_binary(k) for k in keys) + "].\n")
    os.chmod(terms.name, 0o644)  # the node runs as its own user
    program = _PROGRAM % {"path": terms.name, "prefix": f"xroute.bench.{os.getpid()}.",
                          "passes": passes}
    try:
        done = subprocess.run([ctl, *(["-n", node] if node else []), "eval", program],
                              capture_output=True, text=True, timeout=EVAL_TIMEOUT_S,
                              env=environment)
    finally:
        os.unlink(terms.name)
    found = re.search(r"\{(\d+),\[([\d,]+)\],(\d+)\}", done.stdout.replace("\n", "").replace(" ", ""))
    if done.returncode != 0 or found is None:
        raise BrokerRouteFailed(f"rabbitmqctl eval failed ({done.returncode}): "
                                f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    bind_us = int(found.group(1))
    passes_us = [int(x) for x in found.group(2).split(",")]
    return {"route_us": min(passes_us) / max(len(keys), 1),
            "passes_us": passes_us, "bind_per_s": len(bindings) / max(bind_us, 1) * 1e6,
            "routed": int(found.group(3)), "keys": len(keys), "bindings": len(bindings)}
