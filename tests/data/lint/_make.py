"""Writes the one-finding definitions files beside it (run once; the files are committed)."""
import json, pathlib

HERE = pathlib.Path(__file__).parent


def q(name):
    return {"name": name, "durable": True, "auto_delete": False, "arguments": {}}


def x(name, kind, **arguments):
    return {"name": name, "type": kind, "durable": True, "auto_delete": False, "internal": False,
            "arguments": {k.replace("_", "-"): v for k, v in arguments.items()}}


def b(source, destination, key="", arguments=None, kind="queue"):
    return {"source": source, "destination": destination, "destination_type": kind,
            "routing_key": key, "arguments": arguments or {}}


FILES = {
    "duplicate-binding": ([q("q")], [x("t", "topic")], [b("t", "q", "a.*"), b("t", "q", "a.*")]),
    "equivalent-bindings": (
        [q("q")],
        [x("d", "direct")],
        [b("d", "q", "k", {"origin": "eu"}), b("d", "q", "k", {"origin": "us"})],
    ),
    "redundant-binding": (
        [q("q"), q("h")],
        [x("t", "topic"), x("docs", "headers")],
        [
            b("t", "q", "a.#"),
            b("t", "q", "a.*"),
            b("docs", "h", "", {"x-match": "all", "format": "pdf"}),
            b("docs", "h", "", {"x-match": "all", "format": "pdf", "type": "report"}),
        ],
    ),
    "non-canonical-pattern": ([q("q")], [x("t", "topic")], [b("t", "q", "a.#.#")]),
    "topic-without-wildcards": ([q("q1"), q("q2")], [x("t", "topic")], [b("t", "q1", "a.b"), b("t", "q2", "c")]),
    "client-addressing": (
        [q("c1"), q("c2"), q("c3")],
        [x("t", "topic")],
        [b("t", "c1", "#.client1.#"), b("t", "c2", "#.client2.#"), b("t", "c3", "#.client3.#")],
    ),
    "leading-hash": (
        [q("q1"), q("q2"), q("q3")],
        [x("t", "topic")],
        [b("t", "q1", "#.a"), b("t", "q2", "b.*"), b("t", "q3", "c.#")],
    ),
    "unbound-queue": ([q("q"), q("idle")], [x("f", "fanout")], [b("f", "q")]),
    "dead-end-exchange": ([q("q")], [x("f", "fanout"), x("nowhere", "topic")], [b("f", "q")]),
    "exchange-cycle": (
        [q("q1"), q("q2")],
        [x("x1", "fanout"), x("x2", "direct", alternate_exchange="x1")],
        [b("x1", "q1"), b("x1", "x2", kind="exchange"), b("x2", "q2", "k")],
    ),
    "invalid-x-match": (
        [q("q")],
        [x("h", "headers")],
        [b("h", "q", "", {"x-match": "some", "a": 1}), b("h", "q", "", {"x-match": "any", "a": 1})],
    ),
    "dangling-alternate": ([q("q")], [x("f", "fanout", alternate_exchange="nope")], [b("f", "q")]),
    "invalid-binding": ([q("q")], [x("f", "fanout")], [b("f", "q"), b("f", "missing")]),
}

for code, (queues, exchanges, bindings) in FILES.items():
    text = json.dumps({"queues": queues, "exchanges": exchanges, "bindings": bindings}, indent=1)
    (HERE / f"{code}.json").write_text(text + "\n")
