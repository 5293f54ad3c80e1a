"""``xroute bench amqp`` runs and checks every delivery (a small run; speed is not asserted)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from xroute.cli import cli


def test_bench_amqp_small_run(tmp_path):
    result = CliRunner().invoke(cli, [
        "bench", "amqp", "--rabbitmq", "", "--clients", "raw,pika", "--bindings", "1,50",
        "--messages", "100", "--out", str(tmp_path),
    ])
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "results.json").read_text())
    cells = {(r["client"], r["confirms"], r["bindings"]) for r in results["runs"]}
    assert cells == {(c, f, b) for c in ("raw", "pika") for f in (False, True) for b in (1, 50)}
    assert all(r["broker"] == "xroute" and r["messages_per_s"] > 0 for r in results["runs"])
    assert results["startup"]["broker_start_in_process_s"] > 0
    assert (tmp_path / "amqp.png").stat().st_size > 0


def test_bench_binds_the_seed_mix():
    # The 10k case must be the seed articles' mix (what slows RabbitMQ 3.10), not keys the
    # first word prunes; the consumed queue's binding matches the bench's key.
    from xroute.amqp import Broker
    from xroute.bench.amqp import BINDINGS_SEED, KEY, declare
    from xroute.bench.workload import seed_patterns

    with Broker() as broker:
        exchange, queue = declare(broker.url, 200, "b-")
        keys = {b.routing_key for b in broker.view.bindings(exchange)}
        assert keys == {"bench.#"} | set(seed_patterns(199, seed=BINDINGS_SEED + 200))
        assert any(k.startswith("#") for k in keys) and any(k.startswith("*") for k in keys)
        assert queue in broker.vhost.topology.route(exchange, KEY)
