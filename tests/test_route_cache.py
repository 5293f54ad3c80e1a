"""`Topology.route`'s cache (`xroute.core.route_cache`): the same frozensets as a topology without
it, whatever declares, binds, unbinds and deletes come between routes."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from xroute import Topology, XRouteError
from xroute.core.route_cache import ROUTE_CACHE_PRECISE_SCAN, TopologyRouteCache

# A small universe, so that random sessions often hit the same names and keys.
EXCHANGES = ["t1", "t2", "d1", "f1", "h1", "x1"]
TYPES = {"t1": "topic", "t2": "topic", "d1": "direct", "f1": "fanout", "h1": "headers",
         "x1": "x-delimiter"}
QUEUES = ["q0", "q1", "q2", "a"]
WORDS = ["a", "b", "*", "#", ""]
ROUTING_KEYS = ["a", "a.b", "b.a", "", "q0", ":a:b"]

binding_keys = st.lists(st.sampled_from(WORDS), max_size=3).map(".".join) | st.sampled_from(
    ROUTING_KEYS
)
exchange_names = st.sampled_from(EXCHANGES)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("declare_exchange"), exchange_names,
                  st.none() | st.sampled_from(EXCHANGES + ["nowhere"])),
        st.tuples(st.just("declare_queue"), st.sampled_from(QUEUES)),
        st.tuples(st.just("delete_exchange"), exchange_names),
        st.tuples(st.just("delete_queue"), st.sampled_from(QUEUES)),
        st.tuples(st.just("bind"), exchange_names, st.sampled_from(QUEUES + EXCHANGES),
                  binding_keys, st.booleans()),
        st.tuples(st.just("unbind"), exchange_names, st.sampled_from(QUEUES + EXCHANGES),
                  binding_keys, st.booleans()),
        st.tuples(st.just("route"), st.sampled_from(EXCHANGES + ["", "amq.topic"]),
                  st.sampled_from(ROUTING_KEYS)),
    ),
    max_size=60,
)


def apply(topology: Topology, operation: tuple) -> object:
    """Run one operation; its result, or the type of the error it raised."""
    name, *args = operation
    try:
        if name == "declare_exchange":
            exchange, alternate = args
            return topology.declare_exchange(exchange, TYPES[exchange], alternate)
        if name in ("bind", "unbind"):
            source, destination, key, to_exchange = args
            kind = "exchange" if to_exchange and destination in EXCHANGES else "queue"
            return getattr(topology, name)(source, destination, key, None, kind)
        return getattr(topology, name)(*args)
    except XRouteError as error:
        return type(error)


@settings(max_examples=200, deadline=None)
@given(alternates=st.lists(st.none() | st.sampled_from(EXCHANGES + ["nowhere"]),
                           min_size=len(EXCHANGES), max_size=len(EXCHANGES)),
       session=operations)
def test_cached_routes_equal_uncached_routes(alternates, session):
    _compare_sessions(alternates, session, None)


@settings(max_examples=200, deadline=None)
@given(alternates=st.lists(st.none() | st.sampled_from(EXCHANGES + ["nowhere"]),
                           min_size=len(EXCHANGES), max_size=len(EXCHANGES)),
       session=operations, precise_scan=st.sampled_from([0, 1, 2]))
def test_cached_routes_equal_uncached_routes_when_changes_go_by_first_word(
        alternates, session, precise_scan):
    """As above, with so low a bound on tests that wildcard changes drop routes by their
    key's first word (`TopologyRouteCache.heads`) or drop them all, and a bound on routes
    that sweeps them often."""
    _compare_sessions(alternates, session, precise_scan)


def _compare_sessions(alternates: list, session: list, precise_scan: int | None) -> None:
    cached, plain = Topology(), Topology(route_cache=False)
    if precise_scan is not None:  # and a bound that sweeps often
        cached._route_cache = TopologyRouteCache(max_size=4, sweep_to=2)
        cached._route_cache.precise_scan = precise_scan
    for topology in (cached, plain):
        for queue in QUEUES:
            topology.declare_queue(queue)
        for exchange, alternate in zip(EXCHANGES, alternates):
            topology.declare_exchange(exchange, TYPES[exchange], alternate)
    # After every change, every route twice: the cache is warm whenever a change comes.
    every_route = [("route", e, k) for e in EXCHANGES + [""] for k in ROUTING_KEYS]
    for change in [("route", "t1", "a"), *session]:
        for step in [change, *every_route, *every_route]:
            got, expected = apply(cached, step), apply(plain, step)
            assert got == expected, f"after {session!r}: {step!r} gave {got!r}, not {expected!r}"
    if session:
        assert cached.route_cache_stats()["route_cache_hits"] > 0


def test_a_hit_returns_the_same_frozenset_and_headers_bypass_the_cache():
    topology = Topology()
    topology.declare_queue("q")
    topology.bind("amq.topic", "q", "a.*")
    first = topology.route("amq.topic", "a.b")
    assert first == frozenset({"q"}) and topology.route("amq.topic", "a.b") is first
    stats = topology.route_cache_stats()
    assert (stats["route_cache_hits"], stats["route_cache_misses"]) == (1, 1)
    assert topology.route("amq.topic", "x", {"CC": ["a.c"]}) == frozenset({"q"})
    assert topology.route_cache_stats()["route_cache_entries"] == 1


def test_only_matching_routes_are_dropped_by_a_topic_binding():
    topology = Topology()
    topology.declare_queue("q")
    topology.bind("amq.topic", "q", "a.#")
    for key in ("a.b", "c.d"):
        topology.route("amq.topic", key)
    topology.bind("amq.topic", "q", "c.*")
    assert topology.route_cache_stats()["route_cache_invalidations"] == 1
    assert topology.route("amq.topic", "c.d") == frozenset({"q"})


def test_declaring_a_dangling_alternate_drops_the_routes_that_looked_it_up():
    topology = Topology()
    topology.declare_queue("q")
    topology.declare_exchange("main", "direct", alternate_exchange="spare")
    assert topology.route("main", "k") == frozenset()  # "spare" does not exist: ignored
    topology.declare_exchange("spare", "fanout")
    topology.bind("spare", "q")
    assert topology.route("main", "k") == frozenset({"q"})


def test_many_routes_through_one_exchange_are_dropped_untested():
    topology = Topology()
    topology.declare_queue("q")
    topology.bind("amq.topic", "q", "k.*")
    keys = [f"k.{i}" for i in range(ROUTE_CACHE_PRECISE_SCAN + 10)]
    for key in keys:
        topology.route("amq.topic", key)
    topology.bind("amq.topic", "q", "nothing.*.this")
    assert topology.route_cache_stats()["route_cache_entries"] == 0
    assert all(topology.route("amq.topic", key) == frozenset({"q"}) for key in keys)


def test_a_literal_binding_drops_its_own_key_alone_however_many_routes_are_kept():
    topology = Topology()
    topology.declare_queue("q")
    topology.declare_queue("r")
    topology.bind("amq.topic", "q", "k.*")
    keys = [f"k.{i}" for i in range(ROUTE_CACHE_PRECISE_SCAN + 10)]
    for key in keys:
        topology.route("amq.topic", key)
    topology.bind("amq.topic", "r", "k.7")
    stats = topology.route_cache_stats()
    assert (stats["route_cache_entries"], stats["route_cache_invalidations"]) == (len(keys) - 1, 1)
    assert topology.route("amq.topic", "k.7") == frozenset({"q", "r"})
    topology.unbind("amq.topic", "r", "k.7")
    assert topology.route("amq.topic", "k.7") == frozenset({"q"})
    assert topology.route("amq.topic", "k.8") == frozenset({"q"})


def test_the_cache_stays_within_its_bound_of_routes_per_exchange():
    from xroute.core.route_cache import TopologyRouteCache

    cache = TopologyRouteCache(max_size=100, sweep_to=60, max_cells=1_000)
    names = frozenset({"q"})
    for i in range(1_000):
        cache.keep("x", f"k{i}", names)
        assert len(cache) <= 100 and cache.get("x", f"k{i}") is names
    assert cache.get("x", "k0") is None and cache.stats()["route_cache_evictions"] > 0
    wide = frozenset(f"q{i}" for i in range(400))
    for i in range(10):
        cache.keep("y", f"w{i}", wide)
        assert cache.stats()["route_cache_cells"] <= 100 + 1_000 + 400
    assert cache.get("y", "w9") is wide


def test_bad_input_still_raises_typed_errors_with_the_cache():
    topology = Topology()
    for exchange, key, headers in [([], "a", None), ("amq.topic", ["a"], None),
                                   ("amq.topic", "a", []), ("nowhere", "a", None)]:
        try:
            topology.route(exchange, key, headers)
        except XRouteError:
            continue
        raise AssertionError(f"route({exchange!r}, {key!r}, {headers!r}) did not raise")


literal_steps = st.lists(
    st.tuples(st.sampled_from(["bind", "unbind", "fan", "unfan"]),
              st.sampled_from(["k", "k.x", "w.k", "#", "k.*"]),
              st.sampled_from(["q1", "q2", "e"]),
              st.sampled_from([None, {"a": 1}])),
    max_size=40)


@settings(max_examples=100, deadline=None)
@given(steps=literal_steps)
def test_literal_routes_follow_repeats_fan_outs_and_exchange_bindings(steps):
    """A first route of a literal key (`xroute.core.literal_routes`, the `auto` engine's fast path)
    equals the uncached walk: the same key and queue bound twice with other arguments, one
    key bound to more queues than `FREEZE_NOW` and back below it ("fan"), a literal
    exchange-to-exchange binding, a wildcard binding beside them, and catch-all bindings
    (``#``) that take a destination's other wildcard bindings out of `auto`'s trie; all three
    equal the reference engine's."""
    cached, plain, truth = Topology(), Topology(route_cache=False), Topology("reference", False)
    for topology in (cached, plain, truth):
        topology.declare_exchange("t", "topic")
        topology.declare_exchange("e", "fanout")
        topology.declare_queue("via-e")
        topology.bind("e", "via-e")
        for i in range(80):
            topology.declare_queue(f"q{i}")
        topology.bind("t", "q0", "w.*")
    keys = ["k", "k.x", "w.k", "k.y", "#", "z"]
    for operation, key, destination, arguments in [("bind", "k", "q1", None), *steps]:
        kind = "exchange" if destination == "e" else "queue"
        changes = [(operation, destination)]
        if operation in ("fan", "unfan"):
            changes = [(operation[:-3] + "bind", f"q{i}") for i in range(10, 80)]
        for topology in (cached, plain, truth):
            for change, name in changes:
                try:
                    getattr(topology, change)("t", name, key, arguments, kind)
                except XRouteError:
                    pass  # the same on both: the routes below are compared
        expected = [truth.route("t", k) for k in keys]
        assert [cached.route("t", k) for k in keys] == expected
        assert [cached.route("t", k) for k in keys] == expected
        assert [plain.route("t", k) for k in keys] == expected


@settings(max_examples=500, deadline=None)
@given(pattern=st.lists(st.sampled_from(["a", "b", "*", "#", ""]), max_size=5).map(".".join),
       key=st.lists(st.sampled_from(["a", "b", "", "c"]), max_size=5).map(".".join))
def test_the_invalidation_key_test_equals_the_reference(pattern, key):
    from xroute.core.keys import split_words
    from xroute.core.route_cache import key_test
    from xroute.engines.reference import pattern_matches

    assert key_test(pattern)(key) == pattern_matches(split_words(pattern), split_words(key))


@settings(max_examples=500, deadline=None)
@given(pattern=st.lists(st.sampled_from(["a", "b", "ab", "*", "#", ""]), min_size=1,
                        max_size=5).map(".".join),
       keys=st.lists(st.lists(st.sampled_from(["a", "b", "ab", "ba", "", "c"]), max_size=5)
                     .map(".".join), max_size=12, unique=True))
@example(pattern=".#", keys=["", ".a", "a"])  # an empty first word is not an empty key
@example(pattern="*.#", keys=["", "a", "a.b"])
def test_the_keys_a_wildcard_change_drops_are_those_the_pattern_matches(pattern, keys):
    """The prefilters (stem and dot, the longest literal word, the word count) and the
    patterns they decide alone (``a.#``, ``*.#``) pick exactly the reference's keys."""
    from xroute.core.keys import split_words
    from xroute.core.route_cache import _matched_keys
    from xroute.engines.reference import pattern_matches

    words = split_words(pattern)
    if "*" not in words and "#" not in words:
        return  # a literal binding key drops its own key's route alone
    expected = [key for key in keys if pattern_matches(words, split_words(key))]
    assert _matched_keys(dict.fromkeys(keys), pattern, words) == expected
    assert _matched_keys(keys, pattern, words) == expected


def test_past_the_bound_a_wildcard_change_drops_the_routes_of_its_first_word_alone():
    topology = Topology()
    for queue in ("q", "r"):
        topology.declare_queue(queue)
    topology.bind("amq.topic", "q", "#")
    cache = topology._route_cache
    cache.precise_scan = 4
    keys = [f"s{i}.floor{j}.temp" for i in range(10) for j in range(3)]
    for key in keys:
        topology.route("amq.topic", key)
    topology.bind("amq.topic", "r", "*.floor0.#")  # too many to test, no index yet: all go
    assert topology.route_cache_stats()["route_cache_entries"] == 0
    for key in keys:
        assert topology.route("amq.topic", key) == ({"q", "r"} if "floor0" in key else {"q"})
    assert set(cache.heads["amq.topic"]) == {f"s{i}" for i in range(10)}
    topology.bind("amq.topic", "r", "s3.floor1.#")  # s3's three keys tested, one dropped
    assert topology.route_cache_stats()["route_cache_entries"] == len(keys) - 1
    assert topology.route("amq.topic", "s3.floor1.temp") == {"q", "r"}
    topology.unbind("amq.topic", "r", "s3.floor1.#")
    assert topology.route_cache_stats()["route_cache_entries"] == len(keys) - 1
    assert topology.route("amq.topic", "s3.floor1.temp") == {"q"}
    topology.bind("amq.topic", "r", "none.#")  # no cached key begins with it: nothing goes
    assert topology.route_cache_stats()["route_cache_entries"] == len(keys)
    for key in [f"s1.x{i}" for i in range(5)]:
        topology.route("amq.topic", key)
    topology.bind("amq.topic", "r", "s1.#")  # s1 has 8 keys, more than 4: s1's all go
    assert topology.route_cache_stats()["route_cache_entries"] == len(keys) - 3
    assert all(topology.route("amq.topic", key) == {"q", "r"} for key in keys if key[:3] == "s1.")


def test_routes_kept_through_a_sweep_are_still_found_by_a_wildcard_change():
    topology = Topology()
    for queue in ("q", "r"):
        topology.declare_queue(queue)
    topology.bind("amq.topic", "q", "#")
    topology._route_cache = TopologyRouteCache(max_size=4, sweep_to=2)
    topology._route_cache.precise_scan = 1
    for key in ("x.1", "x.2"):
        topology.route("amq.topic", key)
    topology.bind("amq.topic", "r", "y.#")  # more than one route: all go, indexed from now
    for key in ("a.1", "a.2", "b.1", "b.2", "b.3"):  # a sweep keeps the two last routes
        topology.route("amq.topic", key)
    topology.bind("amq.topic", "r", "b.#")
    assert all(topology.route("amq.topic", key) == {"q", "r"} for key in ("b.1", "b.2", "b.3"))


def _cells_add_up(cache: TopologyRouteCache, exchange: str) -> None:
    """An exchange's cells are its small routes' names and its held large sets' names."""
    from xroute.core.route_cache import SHARED_NAMES

    own = cache.own.get(exchange, {})
    large = cache._large.get(exchange, {})
    held = sum(map(len, large.values()))
    assert getattr(cache, "_large_cells", {exchange: held}).get(exchange, 0) == held
    small = sum(len(queues) for queues in own.values() if len(queues) <= SHARED_NAMES)
    assert cache.own_cells.get(exchange, 0 if not own else -1) == small + held


def test_a_broadcast_pattern_change_drops_its_first_word_routes_without_a_test_a_key(
        monkeypatch):
    """RabbitMQ 4.3's broadcast: ``b.#`` bound to 300 queues (an answer of more names than
    `SHARED_NAMES`, counted once), changed between routes. Every cached key that begins with
    ``b`` goes, the others stay, and no key is tested one by one (`key_test`): issue 36,
    goal 5 (a bind between routes tested each cached key, 0.3-1 µs each)."""
    import xroute.core.route_cache as route_cache

    tests = []
    real = route_cache.key_test

    def counted(pattern):
        test = real(pattern)

        def each(key):
            tests.append(key)
            return test(key)

        return each

    monkeypatch.setattr(route_cache, "key_test", counted)
    cached, plain = Topology(), Topology(route_cache=False)
    for topology in (cached, plain):
        topology.declare_exchange("x", "topic")
        for i in range(300):
            topology.declare_queue(f"q{i}")
            topology.bind("x", f"q{i}", "b.#")
        topology.declare_queue("c")
        topology.bind("x", "c", "c.*")
        topology.declare_queue("churn")
    cache = cached._route_cache
    keys = [f"b.k{i}" for i in range(20)] + ["b", "c.1", "c.2"]
    for round in range(6):
        for change in ("bind", "unbind"):
            for key in keys:
                assert cached.route("x", key) == plain.route("x", key)
            _cells_add_up(cache, "x")
            if round == 3:
                cache.heads.setdefault("x", {})  # as past `precise_scan`: the index kept
                for key in keys:
                    cache.heads["x"].setdefault(key.partition(".")[0], {})[key] = None
            for topology in (cached, plain):
                getattr(topology, change)("x", "churn", "b.#")
            assert set(cache.own["x"]) == {"c.1", "c.2"}  # the b keys went, precisely
            _cells_add_up(cache, "x")
    assert tests == []
    cached.bind("x", "churn", "c.*")  # all there is: dropped whole
    assert not cache.own["x"]
    _cells_add_up(cache, "x")
