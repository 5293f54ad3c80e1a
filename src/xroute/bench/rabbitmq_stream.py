"""The ``rabbitmq-stream`` source's read rate beside the bare `rstream` client's, and
``xroute stream`` routing live from the broker into Delta, on one private node with the stream
plugin, in one run (``xroute bench stream --source rabbitmq-stream``, or
``python -m xroute.bench.rabbitmq_stream``).

Publishes ``messages`` AMQP 0-9-1 messages with headers into a stream queue, then measures,
each on the same stream:

- ``rstream``: rstream's own `Consumer` with its AMQP 1.0 decoder (what the client alone
  reads: the ceiling);
- ``xroute_reader``: `xroute.streams` reading the range and building Arrow rows, no Spark;
- ``spark_local_N``: ``spark.read.format("rabbitmq-stream")`` counted (read), routed with
  ``route()`` (read and route), and ``xroute stream`` from the broker into Delta with
  ``--available-now`` in batches of a tenth of the stream (into Delta; each batch's commit time
  and end offset give the lag over time), at N executor cores.

Writes ``rabbitmq_stream.json`` and ``rabbitmq_stream.png`` (the lag over time) under ``out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path


def _publish(amqp_url: str, stream: str, count: int) -> None:
    import amqp

    from xroute.bench.rabbitmq import connect

    connection = connect(amqp_url)
    channel = connection.channel()
    channel.queue_declare(stream, durable=True, auto_delete=False,
                          arguments={"x-queue-type": "stream"})
    # Published to "h" (a fanout into the stream here): each message keeps "h" as its
    # exchange, the headers exchange xroute routes it through (`_topology`).
    channel.exchange_declare("h", "fanout", durable=True, auto_delete=False)
    channel.queue_bind(stream, "h", "")
    for n in range(count):
        channel.basic_publish(
            amqp.Message(b"x" * 64, message_id=f"m{n}",
                         application_headers={"device": "sensor", "floor": n % 5}),
            "h", stream,
        )
    connection.close()


def _bare_rstream(port: int, stream: str, count: int) -> float:
    from rstream import Consumer, ConsumerOffsetSpecification, OffsetType, amqp_decoder

    async def go() -> float:
        done = asyncio.Event()
        seen = 0

        async def on_message(message, context) -> None:  # noqa: ANN001
            nonlocal seen
            seen += 1
            if seen >= count:
                done.set()

        async with Consumer("127.0.0.1", port, username="guest", password="guest") as consumer:
            started = time.perf_counter()
            await consumer.subscribe(
                stream, on_message, decoder=amqp_decoder,
                offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
            )
            await asyncio.wait_for(done.wait(), 600)
            return time.perf_counter() - started

    return asyncio.run(go())


def _xroute_reader(endpoint, stream: str, count: int) -> float:  # noqa: ANN001
    from xroute.spark.rabbitmq_stream import SourceOptions, StreamRange, read_range

    options = SourceOptions.parse({"path": endpoint, "stream": stream})
    started = time.perf_counter()
    rows = sum(b.num_rows for b in read_range(options, StreamRange(stream, 0, count)))
    assert rows == count, (rows, count)
    return time.perf_counter() - started


def _into_delta(spark, uri: str, stream: str, count: int, folder: Path) -> dict:  # noqa: ANN001
    """``xroute stream`` from the broker into Delta, available-now, batches of count/10: the
    rate and each batch's (seconds since start, messages not yet committed)."""
    import shutil

    from xroute.pipeline.stream_commit import committed_batches
    from xroute.spark.stream import StreamOptions, run_stream

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    definitions = folder / "definitions.json"
    definitions.write_text(json.dumps(_topology().to_definitions()))
    options = StreamOptions(
        definitions=str(definitions), source=f"{uri}?stream={stream}", out=str(folder / "out"),
        checkpoint=str(folder / "checkpoint"), exchange="h", available_now=True,
        max_messages=max(count // 10, 1), table_format="delta",
    )
    started = time.time()
    summary = run_stream(spark, options, say=lambda line: None)
    assert summary["counts"]["input"] == count, summary["counts"]
    lag = [(0.0, count)]
    for marker in committed_batches(folder / "out").values():
        done = sum(end for _, end in marker["offsets"].values())
        lag.append((marker["committed_at"] - started, count - done))
    wall = lag[-1][0]
    return {"msgs_per_s": count / wall, "wall_s": wall, "batches": len(lag) - 1, "lag": lag}


def _topology():  # noqa: ANN202
    from xroute import Topology

    topology = Topology()
    topology.declare_exchange("h", "headers")
    topology.declare_queue("q")
    topology.bind("h", "q", "", {"x-match": "all", "device": "sensor"})
    return topology


def plot(results: dict, path: Path) -> None:
    """The lag (messages stored, not yet committed into Delta) over time, per core count, with
    each rate in the legend."""
    from xroute.pipeline.figures import legend_outside, pyplot, save, series_style

    plt = pyplot()
    figure, axes = plt.subplots(figsize=(9, 4.5))
    runs = [(k, v) for k, v in results.items() if k.startswith("spark_local_")]
    for index, (name, run) in enumerate(runs):
        delta = run["into_delta"]
        times, lags = zip(*delta["lag"])
        axes.step(times, lags, where="post", **series_style(index),
                  label=f"{name.removeprefix('spark_local_')} core(s): "
                        f"{delta['msgs_per_s']:,.0f} msgs/s into Delta")
    axes.set_xlabel("seconds since the query started")
    axes.set_ylabel("messages not yet committed (lag)")
    axes.ticklabel_format(axis="y", style="plain")
    axes.set_ylim(bottom=0)
    legend_outside(axes)
    axes.set_title(
        f"xroute stream from a RabbitMQ stream into Delta: {results['messages']:,} messages "
        f"(bare rstream reads {results['rstream_msgs_per_s']:,.0f}/s)"
    )
    save(figure, path)


def run_benchmark(messages: int, cores: list[int], out: Path, say=print) -> dict:  # noqa: ANN001
    """Run every measurement on a private node; the results (also written under ``out``)."""
    from xroute.bench.rabbitmq import _free_port, private_node
    from xroute.spark import register, route
    from xroute.spark.session import start_spark

    os.environ["RABBITMQ_PASSWORD"] = "guest"
    port = _free_port()
    config = (f"stream.listeners.tcp.1 = 127.0.0.1:{port}\nstream.advertised_host = 127.0.0.1\n"
              f"stream.advertised_port = {port}\n")
    results: dict = {"messages": messages, "cpus": os.cpu_count(),
                     "load_before": os.getloadavg()}
    out.mkdir(parents=True, exist_ok=True)
    with private_node(plugins=("rabbitmq_stream",), config=config) as node:
        stream = "bench"
        started = time.perf_counter()
        say(f"publishing {messages:,} messages over AMQP 0-9-1")
        _publish(node.amqp_url, stream, messages)
        results["publish_s"] = time.perf_counter() - started
        uri = f"rabbitmq-stream://guest@127.0.0.1:{port}/%2F"
        say("bare rstream")
        results["rstream_msgs_per_s"] = messages / _bare_rstream(port, stream, messages)
        say("xroute's reader, no Spark")
        results["xroute_reader_msgs_per_s"] = messages / _xroute_reader(uri, stream, messages)
        topology = _topology()
        for n in cores:
            say(f"Spark local[{n}]")
            spark = start_spark(f"local[{n}]", app_name="xroute-bench-stream")
            try:
                register(spark)
                df = (spark.read.format("rabbitmq-stream")
                      .option("minPartitions", n).load(f"{uri}?stream={stream}"))
                df.limit(1).collect()  # warm the workers
                started = time.perf_counter()
                assert df.count() == messages
                read_s = time.perf_counter() - started
                started = time.perf_counter()
                routed = route(df.drop("exchange"), topology, exchange="h",
                               headers="amqp_headers")
                delivered = routed.where("size(queues) > 0").count()
                route_s = time.perf_counter() - started
                assert delivered == messages
                delta = _into_delta(spark, uri, stream, messages, out / f"delta-{n}")
                results[f"spark_local_{n}"] = {
                    "read_msgs_per_s": messages / read_s,
                    "read_and_route_msgs_per_s": messages / route_s,
                    "into_delta": delta,
                    "read_vs_rstream": messages / read_s / results["rstream_msgs_per_s"],
                }
            finally:
                spark.stop()
    results["load_after"] = os.getloadavg()
    (out / "rabbitmq_stream.json").write_text(json.dumps(results, indent=2))
    plot(results, out / "rabbitmq_stream.png")
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the measurements and write the JSON and the plot."""
    parser = argparse.ArgumentParser(prog="python -m xroute.bench.rabbitmq_stream")
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--out", default="bench-results/rabbitmq-stream")
    parser.add_argument("--cores", default="1,2")
    args = parser.parse_args(argv)
    results = run_benchmark(
        args.messages, [int(c) for c in args.cores.split(",")], Path(args.out)
    )
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
