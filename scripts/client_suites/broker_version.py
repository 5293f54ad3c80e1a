"""Print ``HOST PORT PROFILE`` for the RabbitMQ at an AMQP URL: where it listens, and the xroute
profile of its version (from its connection.start: 3.10.8 -> 3.10), for ``xroute serve``.

    python -m broker_version amqp://guest:guest@127.0.0.1:5672/
"""

from __future__ import annotations

import socket
import sys
from urllib.parse import urlparse

from pamqp import exceptions, frame

from xroute.core.profiles import profile_for_version


def server_version(host: str, port: int) -> str:
    """The ``version`` a broker announces in its connection.start."""
    with socket.create_connection((host, port), timeout=10) as conn:
        conn.sendall(b"AMQP\x00\x00\x09\x01")
        data = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                raise ConnectionError(f"{host}:{port} closed before connection.start")
            data += chunk
            try:
                _, _, start = frame.unmarshal(data)
            except exceptions.UnmarshalingException:
                continue  # the frame is not all here yet
            break
    version = start.server_properties.get("version")
    return version.decode() if isinstance(version, bytes) else str(version)


def main(url: str) -> None:
    parsed = urlparse(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 5672
    print(host, port, profile_for_version(server_version(host, port)))


if __name__ == "__main__":
    main(sys.argv[1])
