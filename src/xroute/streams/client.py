"""A stream's head, tail and offset ranges through `rstream` (RabbitMQ's Python client for
the stream protocol), used synchronously.

`rstream`'s low-level `Client` is used directly rather than its `Consumer`: a bounded read
needs the chunk boundaries (``chunk_first_offset``, ``num_entries``) and the raw entries (xroute
decodes them keeping the AMQP types, `xroute.streams.amqp10`), both of which `Consumer` hides
behind a callback per message.

Offsets are the stream's own: every entry has one, consecutive. ``tail`` is the offset the
next message will get (the end of a range: ranges are ``[start, end)``).

The synchronous functions (`tails`, `positions`, `read_range`) outlive a broker restart: each
attempt opens its own connection, a lost one raises `StreamDisconnected`, and
`xroute.streams.reconnect.retrying` tries again for ``reconnect_s`` seconds (a range read
resumes after the last offset it got).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from xroute.core.errors import StreamDisconnected, StreamError, StreamNotFound, StreamTruncated
from xroute.streams.offsets import OffsetSpec
from xroute.streams.reconnect import DEFAULT_TIMEOUT_S, is_transient, retrying
from xroute.streams.uri import StreamEndpoint

# How long an empty stream is given to deliver something before it counts as empty: RabbitMQ
# 3.10 has no command that says a stream's tail (StreamStats came in 3.11), so the tail is the
# end of the last chunk, which an empty stream never sends.
EMPTY_WAIT_S = 1.0
READ_TIMEOUT_S = 120.0  # a range that stops arriving (a broker gone) fails rather than hangs
CREDIT = 64  # chunks in flight per subscription (a 0-9-1 publisher writes small chunks)
ALIVE_CHECK_S = 0.5  # how often a waiting read looks whether its connection is still open
_ids = itertools.count(1)
# What a subscription's queue gets when the broker says the stream's metadata changed: it was
# deleted, or (in a cluster) its leader moved; either way the broker ended the subscription.
_METADATA_CHANGED = object()


@dataclass(frozen=True)
class Chunk:
    """One delivered chunk: its first offset, when it was written (ms), its entries."""

    first: int
    timestamp: int
    entries: list[bytes]


def run(coroutine):  # type: ignore[no-untyped-def]
    """Run ``coroutine`` on a private event loop (Spark's Python workers have none)."""
    return asyncio.run(coroutine)


@contextlib.asynccontextmanager
async def connected(endpoint: StreamEndpoint) -> AsyncIterator[object]:
    """An open `rstream` client on ``endpoint``; `StreamError` naming it when it cannot be."""
    from xroute.extras import require

    require("rstream", what="reading a RabbitMQ stream")
    from rstream.client import ClientPool

    pool = ClientPool(
        endpoint.host, endpoint.port, vhost=endpoint.vhost, username=endpoint.user,
        password=endpoint.password, frame_max=1024 * 1024, heartbeat=60,
        load_balancer_mode=False, max_retries=1,
    )
    try:
        client = await pool.get(connection_name="xroute")
    except Exception as error:  # rstream raises several kinds: all mean "cannot connect"
        # A node away (refused, reset, still starting) is worth retrying; a refused password
        # or an unknown virtual host is not.
        kind = StreamDisconnected if is_transient(error) else StreamError
        with contextlib.suppress(Exception):
            await pool.close()
        raise kind(
            f"cannot open a stream connection to {endpoint.uri}: "
            f"{type(error).__name__}: {error}"
        ) from None
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            await pool.close()


async def exists(client: object, stream: str) -> bool:
    """Whether ``stream`` exists on the client's node."""
    return await client.stream_exists(stream)  # type: ignore[attr-defined]


async def chunks(
    client: object, stream: str, spec: OffsetSpec, wait_s: float
) -> AsyncIterator[Chunk]:
    """The chunks from ``spec`` on, as the broker delivers them; stops after ``wait_s`` seconds
    without one."""
    from rstream import exceptions, schema
    from rstream.constants import OffsetType

    kinds = {"first": OffsetType.FIRST, "last": OffsetType.LAST, "next": OffsetType.NEXT,
             "offset": OffsetType.OFFSET, "timestamp": OffsetType.TIMESTAMP}
    queue: asyncio.Queue = asyncio.Queue()
    sid = next(_ids) % 250
    client.add_handler(schema.Deliver, lambda frame: None, name=str(sid))  # type: ignore[attr-defined]

    def metadata_changed(frame: object) -> None:
        if frame.metadata_info.stream == stream:  # type: ignore[attr-defined]
            queue.put_nowait(_METADATA_CHANGED)

    client.add_handler(schema.MetadataUpdate, metadata_changed, name=str(sid))  # type: ignore[attr-defined]
    await client.run_queue_listener_task(subscriber_id=sid, handler=queue.put_nowait)  # type: ignore[attr-defined]
    try:
        await client.subscribe(  # type: ignore[attr-defined]
            stream, sid, schema.OffsetSpec.from_params(kinds[spec.kind], spec.value),
            initial_credit=CREDIT,
        )
    except exceptions.StreamDoesNotExist:
        raise StreamNotFound(f"stream {stream!r} does not exist", stream) from None
    except Exception as error:
        kind = StreamDisconnected if is_transient(error) else StreamError
        raise kind(
            f"cannot subscribe to stream {stream!r}: {type(error).__name__}: {error}", stream
        ) from None
    owed = 0
    try:
        while True:
            if queue.empty():  # wait_for costs a task: only when there is nothing to take
                frame = await _next_frame(client, queue, stream, wait_s)
                if frame is None:
                    return
            else:
                frame = queue.get_nowait()
            if frame is _METADATA_CHANGED:
                await _ended_by_broker(client, stream)
            if frame.subscription_id != sid:
                continue
            owed += 1
            if owed >= CREDIT // 2:  # one credit frame per half window, not one per chunk
                await client.credit(sid, owed)  # type: ignore[attr-defined]
                owed = 0
            yield Chunk(frame.chunk_first_offset, frame.timestamp, frame.get_messages())
    finally:
        client.remove_handler(schema.Deliver, name=str(sid))  # type: ignore[attr-defined]
        client.remove_handler(schema.MetadataUpdate, name=str(sid))  # type: ignore[attr-defined]
        await client.stop_queue_listener_task(subscriber_id=sid)  # type: ignore[attr-defined]
        # A lost connection has nobody to tell.
        if client.is_connection_alive():  # type: ignore[attr-defined]
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.unsubscribe(sid), 5)  # type: ignore[attr-defined]


async def _ended_by_broker(client: object, stream: str) -> None:
    """Raise for a subscription the broker ended with a metadata update: `StreamNotFound` if
    the stream was deleted (at once, rather than after `READ_TIMEOUT_S` of silence), else
    `StreamDisconnected`, which a reader retries, resuming after the last offset it got."""
    if not await exists(client, stream):
        raise StreamNotFound(f"stream {stream!r} was deleted while it was being read", stream)
    raise StreamDisconnected(f"the broker ended the subscription to stream {stream!r} "
                             "(its metadata changed)", stream)


async def _next_frame(client: object, queue: asyncio.Queue, stream: str, wait_s: float) -> object:
    """The next delivered frame, None after ``wait_s`` seconds without one;
    `StreamDisconnected` as soon as the connection is found closed (what was delivered before
    it closed is taken first: those chunks are whole)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        if not client.is_connection_alive() and queue.empty():  # type: ignore[attr-defined]
            raise StreamDisconnected(f"the connection reading stream {stream!r} was lost", stream)
        left = deadline - loop.time()
        if left <= 0:
            return None
        try:
            return await asyncio.wait_for(queue.get(), min(left, ALIVE_CHECK_S))
        except asyncio.TimeoutError:
            continue


async def _first_chunk(client: object, stream: str, spec: OffsetSpec, wait_s: float) -> Chunk | None:
    async for chunk in chunks(client, stream, spec, wait_s):
        return chunk
    return None


async def tail_of(client: object, stream: str, known_nonempty: bool = False) -> int:
    """The offset the next message of ``stream`` gets (0 when it is empty).

    The end of the last chunk: RabbitMQ sends the last chunk to a ``last`` subscription at
    once; an empty stream sends nothing, so a stream not known to hold anything is given
    `EMPTY_WAIT_S`."""
    if not await exists(client, stream):
        raise StreamNotFound(f"stream {stream!r} does not exist", stream)
    wait = READ_TIMEOUT_S if known_nonempty else EMPTY_WAIT_S
    chunk = await _first_chunk(client, stream, OffsetSpec("last"), wait)
    return 0 if chunk is None else chunk.first + len(chunk.entries)


async def head_of(client: object, stream: str) -> int | None:
    """The first offset ``stream`` still holds (None when it is empty)."""
    chunk = await _first_chunk(client, stream, OffsetSpec("first"), EMPTY_WAIT_S)
    return None if chunk is None else chunk.first


async def resolve(client: object, stream: str, spec: OffsetSpec, tail: int) -> int:
    """``spec`` as an offset of ``stream`` whose tail is ``tail``."""
    if spec.kind == "offset":
        return min(int(spec.value or 0), tail) if spec.value is not None else 0
    if spec.kind == "next" or tail == 0:
        return tail
    chunk = await _first_chunk(client, stream, spec, EMPTY_WAIT_S)
    return tail if chunk is None else min(chunk.first, tail)


async def read_chunks(
    client: object, stream: str, start: int, end: int, fail_on_loss: bool = True
) -> AsyncIterator[tuple[int, int, list[bytes]]]:
    """Offsets ``[start, end)`` of ``stream`` as ``(first offset, chunk ms, entries)``, cut to
    the range. `StreamTruncated` when retention removed ``start`` already (unless not
    ``fail_on_loss``: then the range starts at the stream's first offset)."""
    if end <= start:
        return
    expected = start
    deadline_s = READ_TIMEOUT_S
    async for chunk in chunks(client, stream, OffsetSpec("offset", start), deadline_s):
        last = chunk.first + len(chunk.entries)
        if last <= expected:
            continue
        if chunk.first > expected:
            if fail_on_loss:
                raise StreamTruncated(stream, expected, chunk.first)
            expected = chunk.first
        if chunk.first >= end:
            return
        low, high = expected - chunk.first, min(last, end) - chunk.first
        yield expected, chunk.timestamp, chunk.entries[low:high]
        expected = chunk.first + high
        if expected >= end:
            return
    raise StreamError(
        f"stream {stream!r} stopped delivering at offset {expected} of {start}..{end - 1} "
        f"({READ_TIMEOUT_S:.0f} s without a chunk)",
        stream,
    )


def tails(
    endpoint: StreamEndpoint,
    streams: list[str],
    known: dict[str, int] | None = None,
    reconnect_s: float = DEFAULT_TIMEOUT_S,
) -> dict[str, int]:
    """Each stream's tail (synchronously, one connection; retried while the node is away)."""

    async def go() -> dict[str, int]:
        async with connected(endpoint) as client:
            return {s: await tail_of(client, s, bool((known or {}).get(s))) for s in streams}

    return retrying(lambda: run(go()), timeout_s=reconnect_s, what=_what("tails", streams),
                    endpoint=endpoint.uri, stream=_one_of(streams))


def positions(
    endpoint: StreamEndpoint,
    streams: list[str],
    spec: OffsetSpec,
    reconnect_s: float = DEFAULT_TIMEOUT_S,
) -> dict[str, int]:
    """``spec`` resolved to an offset in each stream (synchronously, one connection; retried
    while the node is away)."""

    async def go() -> dict[str, int]:
        out = {}
        async with connected(endpoint) as client:
            for stream in streams:
                tail = await tail_of(client, stream)
                out[stream] = await resolve(client, stream, spec, tail)
        return out

    return retrying(lambda: run(go()), timeout_s=reconnect_s,
                    what=_what(f"offset {spec}", streams), endpoint=endpoint.uri,
                    stream=_one_of(streams))


def read_range(
    endpoint: StreamEndpoint,
    stream: str,
    start: int,
    end: int,
    fail_on_loss: bool = True,
    reconnect_s: float = DEFAULT_TIMEOUT_S,
) -> Iterator[tuple[int, int, list[bytes]]]:
    """`read_chunks` synchronously: the chunks are gathered on a private loop, then yielded.
    A connection lost mid-way is opened again and the read resumes after the last offset
    received, so each offset comes once."""
    got: list[tuple[int, int, list[bytes]]] = []
    position = [start]  # the next offset wanted, across attempts

    async def go() -> None:
        async with connected(endpoint) as client:
            async for first, stamp, entries in read_chunks(
                client, stream, position[0], end, fail_on_loss
            ):
                got.append((first, stamp, entries))
                position[0] = first + len(entries)

    retrying(lambda: run(go()), timeout_s=reconnect_s,
             what=f"reading stream {stream!r} offsets {start}..{end - 1}", endpoint=endpoint.uri,
             stream=stream)
    yield from got


def _what(doing: str, streams: list[str]) -> str:
    return f"{doing} of stream{'s' if len(streams) != 1 else ''} " + ", ".join(map(repr, streams))


def _one_of(streams: list[str]) -> str | None:
    return streams[0] if len(streams) == 1 else None
