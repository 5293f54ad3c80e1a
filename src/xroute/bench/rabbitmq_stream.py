"""The ``rabbitmq-stream`` source's read rate beside the bare `rstream` client's, on one
private node with the stream plugin, in one run (``python -m xroute.bench.rabbitmq_stream``).

Publishes ``--messages`` AMQP 0-9-1 messages with headers into a stream queue, then measures,
each on the same stream:

- ``rstream``: rstream's own `Consumer` with its AMQP 1.0 decoder (what the client alone
  reads: the ceiling);
- ``xroute_reader``: `xroute.streams` reading the range and building Arrow rows, no Spark;
- ``spark_local_N``: ``spark.read.format("rabbitmq-stream")`` counted, and routed with
  ``route()`` (typed headers), at N executor cores.

Writes ``rabbitmq_stream.json`` under ``--out``. Not yet: routing into Delta through a
streaming query and the lag plot (issue 37's benchmark, part 2).
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
    for n in range(count):
        channel.basic_publish(
            amqp.Message(b"x" * 64, message_id=f"m{n}",
                         application_headers={"device": "sensor", "floor": n % 5}),
            "", stream,
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


def main(argv: list[str] | None = None) -> int:
    """Run the measurements and write the JSON."""
    parser = argparse.ArgumentParser(prog="python -m xroute.bench.rabbitmq_stream")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--out", default="bench-rabbitmq-stream")
    parser.add_argument("--cores", default="1,2")
    args = parser.parse_args(argv)
    from xroute.bench.rabbitmq import _free_port, private_node

    os.environ["RABBITMQ_PASSWORD"] = "guest"
    port = _free_port()
    config = (f"stream.listeners.tcp.1 = 127.0.0.1:{port}\nstream.advertised_host = 127.0.0.1\n"
              f"stream.advertised_port = {port}\n")
    results: dict = {"messages": args.messages, "cpus": os.cpu_count(),
                     "load_before": os.getloadavg()}
    with private_node(plugins=("rabbitmq_stream",), config=config) as node:
        stream = "bench"
        started = time.perf_counter()
        _publish(node.amqp_url, stream, args.messages)
        results["publish_s"] = time.perf_counter() - started
        uri = f"rabbitmq-stream://guest@127.0.0.1:{port}/%2F"
        seconds = _bare_rstream(port, stream, args.messages)
        results["rstream_msgs_per_s"] = args.messages / seconds
        seconds = _xroute_reader(uri, stream, args.messages)
        results["xroute_reader_msgs_per_s"] = args.messages / seconds
        from xroute import Topology
        from xroute.spark import register, route
        from xroute.spark.session import start_spark

        topology = Topology()
        topology.declare_exchange("h", "headers")
        topology.declare_queue("q")
        topology.bind("h", "q", "", {"x-match": "all", "device": "sensor"})
        for cores in [int(c) for c in args.cores.split(",")]:
            spark = start_spark(f"local[{cores}]", app_name="xroute-bench-stream")
            register(spark)
            df = (spark.read.format("rabbitmq-stream")
                  .option("minPartitions", cores).load(f"{uri}?stream={stream}"))
            df.limit(1).collect()  # warm the workers
            started = time.perf_counter()
            assert df.count() == args.messages
            read_s = time.perf_counter() - started
            started = time.perf_counter()
            routed = route(df.drop("exchange"), topology, exchange="h", headers="amqp_headers")
            delivered = routed.where("size(queues) > 0").count()
            route_s = time.perf_counter() - started
            assert delivered == args.messages
            results[f"spark_local_{cores}"] = {
                "read_msgs_per_s": args.messages / read_s,
                "read_and_route_msgs_per_s": args.messages / route_s,
            }
            spark.stop()
    results["load_after"] = os.getloadavg()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rabbitmq_stream.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
