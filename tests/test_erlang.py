"""xroute.erlang against Erlang/OTP itself, on random values: phash2, exs1024, jump hash."""

from __future__ import annotations

import random

import pytest

from tests.erlang_oracle import evaluate, term_text
from xroute.erlang import Atom, Exs1024, phash2
from xroute.exchanges.consistent_hash import jump_consistent_hash

ATOMS = ["undefined", "longstr", "signedint", "long", "bool", "double", "true", "é", "a_b", ""]


def random_term(rng: random.Random, depth: int = 0):
    choice = rng.randrange(9 if depth < 3 else 5)
    if choice == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
    if choice == 1:
        bits = rng.choice([8, 27, 28, 31, 32, 59, 60, 64, 65, 200])
        return rng.randrange(-(2**bits), 2**bits)
    if choice == 2:
        return rng.choice([Atom(rng.choice(ATOMS)), True, False])
    if choice == 3:
        return rng.choice([0.0, -0.0, rng.uniform(-1e6, 1e6), rng.random() * 1e300])
    if choice == 4:
        return "".join(rng.choice("ab.#*é") for _ in range(rng.randrange(10)))
    if choice in (5, 6):
        return tuple(random_term(rng, depth + 1) for _ in range(rng.randrange(5)))
    if rng.random() < 0.5:  # a string, maybe with a tail of other terms
        return [rng.randrange(256) for _ in range(rng.randrange(9))] + [random_term(rng, depth + 1)]
    return [random_term(rng, depth + 1) for _ in range(rng.randrange(5))]


@pytest.mark.parametrize("seed", range(3))
def test_phash2_equals_erlang(seed):
    rng = random.Random(seed)
    terms = [random_term(rng) for _ in range(300)]
    text = "[" + ",".join(term_text(t) for t in terms) + "]"
    ranges = [rng.choice([1, 7, 2**27, 2**32, rng.randrange(1, 2**32)]) for _ in terms]
    got = evaluate(
        f"[[erlang:phash2(T), erlang:phash2(T, R)] || {{T, R}} <- lists:zip({text}, {ranges})]"
    )
    mine = [[phash2(t), phash2(t, r)] for t, r in zip(terms, ranges)]
    assert mine == got


def test_exs1024_equals_erlang_rand():
    rng = random.Random(7)
    keys = [rng.randrange(-(2**70), 2**70) for _ in range(40)] + [0, 1, -1, 2**27 - 1]
    got = evaluate(
        f"[element(1, lists:foldl(fun(_, {{Acc, S}}) -> {{V, S2}} = rand:uniform_s(S), "
        f"{{Acc ++ [V], S2}} end, {{[], rand:seed_s(exs1024, {{K, K, K}})}}, lists:seq(1, 40))) "
        f"|| K <- {keys}]"
    )
    for key, values in zip(keys, got):
        generator = Exs1024((key, key, key))
        assert [generator.uniform() for _ in range(40)] == values, key


def test_jump_consistent_hash_equals_rabbitmqs_in_erlang():
    # RabbitMQ's jump_consistent_hash/2 written out in Erlang, run on random keys and sizes.
    rng = random.Random(11)
    cases = [(rng.choice([rng.randrange(2**27), rng.randrange(-(2**64), 2**64)]),
              rng.randint(1, 3000)) for _ in range(300)]
    jump = (
        "fun Jump(B, J, N, _) when J >= N -> B; Jump(_, J, N, S) -> "
        "{R, S2} = rand:uniform_s(S), Jump(J, trunc((J + 1) / R), N, S2) end"
    )
    pairs = [list(case) for case in cases]  # a Python list of lists is Erlang text too
    got = evaluate(
        f"[case N of 1 -> 0; _ -> ({jump})(-1, 0, N, rand:seed_s(exs1024, {{K, K, K}})) end "
        f"|| [K, N] <- {pairs}]"
    )
    assert [jump_consistent_hash(k, n) for k, n in cases] == got
    # any other term goes through phash2 first
    binaries = [bytes(rng.randrange(256) for _ in range(rng.randrange(12))) for _ in range(50)]
    assert [jump_consistent_hash(b, 100) for b in binaries] == [
        jump_consistent_hash(phash2(b), 100) for b in binaries
    ]


def test_modulus_hash_of_43_equals_rabbitmqs_in_erlang():
    # RabbitMQ 4.3's route/3 of x-modulus-hash over #resource{} destinations, in Erlang.
    from xroute import Topology

    rng = random.Random(13)
    names = ["a", "b", "q1", "q10", "q2", "é"]
    t = Topology(rabbitmq="4.3")
    t.declare_exchange("m", "x-modulus-hash")
    t.declare_exchange("x", "fanout")
    bound = []
    for name in names:
        t.declare_queue(name)
    for _ in range(9):
        kind, name = rng.choice([("queue", n) for n in names] + [("exchange", "x")])
        key = rng.choice(["", "k", "z"])
        if (kind, name, key) not in bound:
            bound.append((kind, name, key))
            t.bind("m", name, key, destination_type=kind)
    destinations = "[" + ",".join(
        f"{{resource, <<\"/\">>, {kind}, {term_text(name)}}}" for kind, name, _ in bound
    ) + "]"
    messages = [[random_key(rng) for _ in range(rng.randint(1, 3))] for _ in range(60)]
    got = evaluate(
        f"[binary_to_list(element(4, lists:nth(erlang:phash2(Keys, 134217728) rem {len(bound)} "
        f"+ 1, lists:sort({destinations})))) "
        f"|| Keys <- {term_text([[k.encode() for k in m] for m in messages])}]"
    )
    for keys, name in zip(messages, got):
        headers = {"CC": keys[1:]} if keys[1:] else None
        reached = t.route("m", keys[0], headers)
        expected = bytes(name).decode()  # a queue, or the exchange 'x' (no queue behind it)
        assert reached == ({expected} if expected in names else set())


def random_key(rng: random.Random) -> str:
    return ".".join(rng.choice(["a", "b", "é", ""]) for _ in range(rng.randint(0, 3)))


def test_values_print_as_rabbitmq_s_texts_print_them():
    # ~p (3.x) and ~tp (4.x), as in "Invalid x-match field value <<"foo">>" (seen on 3.10.8).
    from xroute.core.values import short
    from xroute.erlang.terms import io_format

    assert io_format("any", False) == '<<"any">>' and io_format(b"a\"b", False) == '<<"a\\"b">>'
    assert io_format("é", False) == "<<195,169>>" and io_format("é", True) == '<<"é"/utf8>>'
    assert [io_format(v) for v in (short(5), 1.0, 1e16, True, None)] == [
        "5", "1.0", "1.0e16", "true", "undefined"]
