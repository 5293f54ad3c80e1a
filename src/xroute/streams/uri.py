"""``rabbitmq-stream://user@host:5552/vhost?stream=NAME`` URIs.

The path is the virtual host (``%2F`` for ``/``, the default when the path is empty); the
query names the streams (``stream=a&stream=b``, or ``stream=a,b``), or a pattern over the
virtual host's streams (``pattern=orders-.*``, a regular expression matching whole names,
listed through the management API at ``management=http://host:15672``, the default on the
stream node's host: `xroute.streams.names`), optionally the range (``start=first``,
``end=last``: `xroute.streams.offsets`), and how long a reader waits for a node that went away
(``reconnect=60``, seconds: `xroute.streams.reconnect`). The password never travels in the
URI (it would land in Spark's plans, logs and checkpoints): it comes from the ``password``
option, else ``RABBITMQ_PASSWORD`` as for every other xroute connection.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlparse

from xroute.core.errors import StreamURIError

SCHEME = "rabbitmq-stream"
DEFAULT_PORT = 5552
PASSWORD_VARIABLE = "RABBITMQ_PASSWORD"
DEFAULT_RECONNECT_S = 60.0
PARAMETERS = ("stream", "pattern", "start", "end", "management", "reconnect")


@dataclass(frozen=True)
class StreamEndpoint:
    """Where the streams are and who reads them (the password is kept out of ``repr``)."""

    host: str
    port: int
    user: str
    vhost: str
    password: str = field(default="", repr=False)
    streams: tuple[str, ...] = ()
    start: str | None = None
    end: str | None = None
    pattern: str | None = None
    management: str | None = None
    reconnect: str | None = None

    @property
    def reconnect_s(self) -> float:
        """How long a reader waits for the node to come back (``reconnect=``; default 60 s)."""
        return DEFAULT_RECONNECT_S if self.reconnect is None else float(self.reconnect)

    @property
    def uri(self) -> str:
        """The URI without the password (safe to print)."""
        from urllib.parse import quote

        query = "&".join(f"stream={quote(s, safe='')}" for s in self.streams)
        if self.pattern is not None:
            query += ("&" if query else "") + f"pattern={quote(self.pattern, safe='')}"
        return (
            f"{SCHEME}://{quote(self.user, safe='')}@{self.host}:{self.port}/"
            f"{quote(self.vhost, safe='')}" + (f"?{query}" if query else "")
        )


def is_stream_uri(text: str) -> bool:
    """Whether ``text`` is a ``rabbitmq-stream://`` URI."""
    return text.lower().startswith(SCHEME + "://")


def parse_stream_uri(uri: str, password: str | None = None) -> StreamEndpoint:
    """The endpoint a ``rabbitmq-stream://`` URI names; `StreamURIError` saying what is wrong.

    ``password`` wins; else ``RABBITMQ_PASSWORD``; a URI that holds a password is refused."""
    parsed = urlparse(uri)
    if parsed.scheme.lower() != SCHEME:
        raise StreamURIError(f"not a {SCHEME}:// URI: {uri!r}")
    if parsed.password is not None:
        raise StreamURIError(
            f"the URI holds a password: leave it out ({SCHEME}://user@host:port/vhost) and set "
            f"{PASSWORD_VARIABLE} (or the source's password option)"
        )
    if not parsed.hostname:
        raise StreamURIError(f"no host in {uri!r} (expected {SCHEME}://user@host:5552/vhost)")
    try:
        port = parsed.port or DEFAULT_PORT
    except ValueError as error:
        raise StreamURIError(f"bad port in {uri!r}: {error}") from None
    path = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
    if "/" in path:
        raise StreamURIError(
            f"the path of {uri!r} must be one virtual host (write / as %2F), not {path!r}; "
            "name streams with ?stream=NAME"
        )
    vhost = unquote(path) if path else "/"
    # A "+" is a plus (regular expressions, stream names), not a space as in HTML forms.
    query = parse_qs(parsed.query.replace("+", "%2B"), keep_blank_values=True)
    unknown = sorted(set(query) - set(PARAMETERS))
    if unknown:
        raise StreamURIError(
            f"unknown URI parameter(s) {unknown} in {uri!r}: use {', '.join(PARAMETERS)}"
        )
    streams = split_streams(query.get("stream", []))
    pattern = _one(query, "pattern", uri)
    if pattern is not None and streams:
        raise StreamURIError(f"{uri!r} names streams and a pattern: give one or the other")
    reconnect = _one(query, "reconnect", uri)
    if reconnect is not None:
        try:
            ok = float(reconnect) >= 0
        except ValueError:
            ok = False
        if not ok:
            raise StreamURIError(f"reconnect={reconnect} in {uri!r}: give seconds (>= 0)")
    user = unquote(parsed.username or "guest")
    if password is None:
        password = os.environ.get(PASSWORD_VARIABLE)
    if password is None:
        raise StreamURIError(
            f"no password for user {user!r} at {parsed.hostname}:{port}: set {PASSWORD_VARIABLE}"
        )
    return StreamEndpoint(
        parsed.hostname, port, user, vhost, password, streams,
        _one(query, "start", uri), _one(query, "end", uri), pattern,
        _one(query, "management", uri), reconnect,
    )


def split_streams(values: list[str] | str | None) -> tuple[str, ...]:
    """Stream names given once each, or comma-separated, in their order, without repeats."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    names: list[str] = []
    for value in values:
        for name in value.split(","):
            name = name.strip()
            if name and name not in names:
                names.append(name)
    return tuple(names)


def _one(query: dict[str, list[str]], key: str, uri: str) -> str | None:
    values = query.get(key)
    if not values:
        return None
    if len(values) > 1:
        raise StreamURIError(f"{key} given {len(values)} times in {uri!r}")
    return values[0]
