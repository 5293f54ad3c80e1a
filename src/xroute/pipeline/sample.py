"""The realistic sample that ``make run`` routes: a topology of about 10,000 bindings and a
dataset of messages, some malformed and some unroutable, generated once and cached.

Topology (one virtual host):
- ``home`` (topic) for smart-home sensors as in the seed article, ``floor_N.room.sensor``,
  with an alternate exchange ``home.unrouted`` (fanout, to ``home.dead_letters``) and an
  exchange-to-exchange binding ``#.alarm`` to ``alarms`` (fanout, to ``alarms.log``);
- ``users`` (topic) with per-user patterns ``user_N.*`` and ``#.client_N.#``, no alternate,
  so keys nobody listens to are unroutable;
- ``devices`` (headers) with ``x-match`` all/any bindings on device type, floor and alarm;
- ``alerts`` (direct) on ``severity.service`` keys;
- ``multi`` (x-delimiter, seed 004): one key naming several clients, ``:client_1:client_7``.

Messages: mostly routable; some to keys nobody binds; a few with CC/BCC; about 1% malformed
(missing key, key over 255 bytes, bad headers JSON, CC that is not a list, unknown exchange).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xroute.core.topology import Topology

USERS = 4000  # 2 bindings each on "users"
FLOORS, ROOMS, SENSORS = 5, 10, 8
ROOM_NAMES = [
    "bedroom",
    "kitchen",
    "bathroom",
    "hall",
    "office",
    "garage",
    "attic",
    "cellar",
    "lounge",
    "nursery",
][:ROOMS]
SENSOR_NAMES = [
    "temperature",
    "humidity",
    "air_quality",
    "light",
    "motion",
    "door",
    "smoke",
    "alarm",
][:SENSORS]
SEVERITIES = ["critical", "error", "warning", "info", "debug"]
SERVICES = ["db", "web", "cache", "queue", "auth", "billing", "search", "mail", "cdn", "dns"]
MULTI_CLIENTS = 1700
DEVICE_TYPES = ["sensor", "camera", "lock", "thermostat"]
# Share of messages per exchange; the rest of the 100% are malformed records.
MIX = {"users": 0.55, "home": 0.25, "devices": 0.07, "alerts": 0.06, "multi": 0.06}
VERSION = 2  # bump when the generator changes, so a cached sample is rebuilt


def definitions() -> dict[str, Any]:
    """The sample topology as a RabbitMQ definitions export of the whole broker."""
    topology = Topology(engine="reference")  # checks every declaration as it is made

    def queue(name: str) -> str:
        topology.declare_queue(name)
        return name

    def bind(source: str, destination: str, key: str = "", arguments: Any = None) -> None:
        topology.bind(source, destination, key, arguments)

    topology.declare_exchange("home", "topic", alternate_exchange="home.unrouted")
    topology.declare_exchange("home.unrouted", "fanout")
    topology.declare_exchange("alarms", "fanout")
    topology.declare_exchange("users", "topic")
    topology.declare_exchange("devices", "headers")
    topology.declare_exchange("alerts", "direct")
    topology.declare_exchange("multi", "x-delimiter")
    bind("home.unrouted", queue("home.dead_letters"))
    bind("alarms", queue("alarms.log"))
    topology.bind("home", "alarms", "#.alarm", destination_type="exchange")
    for f in range(1, FLOORS + 1):
        bind("home", queue(f"floor_{f}.all"), f"floor_{f}.#")
        for room in ROOM_NAMES:
            bind("home", queue(f"floor_{f}.{room}"), f"floor_{f}.{room}.*")
            for sensor in SENSOR_NAMES[:4]:
                bind("home", f"floor_{f}.{room}", f"floor_{f}.{room}.{sensor}.#")
    for room in ROOM_NAMES:
        bind("home", queue(f"rooms.{room}"), f"*.{room}.*")
    for sensor in SENSOR_NAMES:
        bind("home", queue(f"sensors.{sensor}"), f"#.{sensor}")
    for n in range(USERS):
        name = queue(f"user_{n}")
        bind("users", name, f"user_{n}.*")
        bind("users", name, f"#.client_{n}.#")
    for kind in DEVICE_TYPES:
        for f in range(1, FLOORS + 1):
            arguments = {"x-match": "all", "type": kind, "floor": f}
            bind("devices", queue(f"devices.{kind}.floor_{f}"), "", arguments)
        bind("devices", queue(f"devices.{kind}"), "", {"x-match": "any", "type": kind})
    bind("devices", queue("devices.alarms"), "", {"x-match": "any", "alarm": True, "smoke": True})
    for severity in SEVERITIES[:3]:
        for service in SERVICES:
            bind("alerts", queue(f"alerts.{service}.{severity}"), f"{severity}.{service}")
    for n in range(MULTI_CLIENTS):
        bind("multi", f"user_{n}", f"client_{n}")
    export = topology.to_definitions()
    for section in ("queues", "exchanges", "bindings"):
        for entry in export[section]:
            entry["vhost"] = "/"
    return {"rabbit_version": "3.12.0", "vhosts": [{"name": "/"}], **export}


def messages(count: int, seed: int = 7) -> pa.Table:
    """``count`` sample messages: exchange, routing_key, headers (JSON text), and two payload
    columns (``sent_at``, ``size``) for ``--keep-columns``."""
    rng = np.random.default_rng(seed)
    share = np.array(list(MIX.values()))
    kinds = rng.choice(len(MIX) + 1, size=count, p=[*share, 1 - share.sum()])
    names = list(MIX)
    exchange = np.empty(count, dtype=object)
    key = np.empty(count, dtype=object)
    headers = np.full(count, None, dtype=object)
    for index, name in enumerate(names):
        rows = np.flatnonzero(kinds == index)
        exchange[rows] = name
        key[rows], headers[rows] = _GENERATORS[name](rng, len(rows))
    _malformed(rng, np.flatnonzero(kinds == len(MIX)), exchange, key, headers)
    start = np.datetime64("2024-05-01T00:00:00", "ms")
    sent_at = start + np.sort(rng.integers(0, 86_400_000, size=count)).astype("timedelta64[ms]")
    return pa.table(
        {
            "exchange": pa.array(exchange.tolist(), pa.string()),
            "routing_key": pa.array(key.tolist(), pa.string()),
            "headers": pa.array(headers.tolist(), pa.string()),
            "sent_at": pa.array(sent_at),
            "size": pa.array(rng.integers(16, 4096, size=count), pa.int32()),
        }
    )


def _users(rng: np.random.Generator, n: int) -> tuple[list[str], list[Any]]:
    # Users 0-199 never send (their bindings never match); users past USERS have none.
    user = rng.integers(200, USERS + 200, size=n)
    style = rng.random(n)
    verbs = np.array(["inbox", "event", "status", "login", "logout"])[rng.integers(0, 5, size=n)]
    keys = [
        f"user_{u}.{v}"
        if s < 0.65
        else f"app.client_{u}.{v}"
        if s < 0.97
        else f"user_{u}.{v}.extra"
        for u, v, s in zip(user.tolist(), verbs.tolist(), style.tolist())
    ]
    headers: list[Any] = [None] * n
    for i in np.flatnonzero(rng.random(n) < 0.03).tolist():
        other = int(rng.integers(0, USERS))
        headers[i] = json.dumps({"CC" if i % 4 else "BCC": [f"user_{other}.inbox"]})
    return keys, headers


def _home(rng: np.random.Generator, n: int) -> tuple[list[str], list[Any]]:
    floor = rng.integers(1, FLOORS + 3, size=n)  # floors 6 and 7 have no floor binding
    room = np.array(ROOM_NAMES + ["roof"])[rng.integers(0, ROOMS + 1, size=n)]
    sensor = np.array(SENSOR_NAMES + ["battery"])[rng.integers(0, SENSORS + 1, size=n)]
    keys = [f"floor_{f}.{r}.{s}" for f, r, s in zip(floor.tolist(), room.tolist(), sensor.tolist())]
    return keys, [None] * n


def _devices(rng: np.random.Generator, n: int) -> tuple[list[str], list[Any]]:
    kinds = np.array(DEVICE_TYPES + ["speaker"])[rng.integers(0, len(DEVICE_TYPES) + 1, size=n)]
    floors = rng.integers(1, FLOORS + 2, size=n)
    alarms = rng.random(n) < 0.05
    headers = [
        json.dumps({"type": k, "floor": int(f), **({"alarm": True} if a else {})})
        for k, f, a in zip(kinds.tolist(), floors.tolist(), alarms.tolist())
    ]
    return [f"device.{k}" for k in kinds.tolist()], headers


def _alerts(rng: np.random.Generator, n: int) -> tuple[list[str], list[Any]]:
    severity = np.array(SEVERITIES)[rng.integers(0, len(SEVERITIES), size=n)]
    service = np.array(SERVICES)[rng.integers(0, len(SERVICES), size=n)]
    return [f"{s}.{v}" for s, v in zip(severity.tolist(), service.tolist())], [None] * n


def _multi(rng: np.random.Generator, n: int) -> tuple[list[str], list[Any]]:
    width = rng.integers(1, 4, size=n)
    clients = rng.integers(0, MULTI_CLIENTS + 300, size=(n, 3))
    keys = [
        ":" + ":".join(f"client_{c}" for c in row[:w])
        for row, w in zip(clients.tolist(), width.tolist())
    ]
    return keys, [None] * n


_GENERATORS = {
    "users": _users,
    "home": _home,
    "devices": _devices,
    "alerts": _alerts,
    "multi": _multi,
}


def _malformed(
    rng: np.random.Generator, rows: np.ndarray, exchange: Any, key: Any, headers: Any
) -> None:
    """Spread the malformed kinds over ``rows``."""
    kinds = rng.integers(0, 5, size=len(rows))
    for row, kind in zip(rows.tolist(), kinds.tolist()):
        exchange[row], key[row] = "users", f"user_{row % USERS}.inbox"
        if kind == 0:
            key[row] = None
        elif kind == 1:
            key[row] = "user_1." + "x" * 260
        elif kind == 2:
            headers[row] = '{"CC": ["user_2.inbox"'  # cut short
        elif kind == 3:
            headers[row] = json.dumps({"CC": "user_3.inbox"})  # CC must be a list
        else:
            exchange[row] = "no-such-exchange"


def ensure_sample(folder: Path, count: int = 1_000_000, seed: int = 7) -> tuple[Path, Path]:
    """(definitions.json, messages.parquet) in ``folder``, generated unless already there."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / "sample.json"
    wanted = {"version": VERSION, "count": count, "seed": seed}
    defs_path, messages_path = folder / "definitions.json", folder / "messages.parquet"
    if stamp.exists() and json.loads(stamp.read_text()) == wanted and messages_path.exists():
        return defs_path, messages_path
    defs_path.write_text(json.dumps(definitions(), indent=1))
    temp = messages_path.with_suffix(".tmp")
    pq.write_table(messages(count, seed), temp, row_group_size=131072)
    temp.replace(messages_path)
    stamp.write_text(json.dumps(wanted))
    return defs_path, messages_path


def main(argv: list[str] | None = None) -> None:
    """``python -m xroute.pipeline.sample FOLDER [COUNT]``: make the sample unless cached."""
    import sys
    import time

    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0] if args else "data/sample")
    count = int(args[1]) if len(args) > 1 else 1_000_000
    started = time.perf_counter()
    defs_path, messages_path = ensure_sample(folder, count)
    print(
        f"sample: {defs_path} and {messages_path} ({count:,} messages; "
        f"{time.perf_counter() - started:.1f} s)"
    )


if __name__ == "__main__":
    main()
