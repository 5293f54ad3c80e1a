"""The management API of a private node, for the trace tests (the tracing plugin's traces)."""

from __future__ import annotations

import base64
import json
import urllib.request


def api(management_url: str, method: str, path: str, body: object = None) -> bytes:
    """``method`` on ``/api/path`` of the node at ``management_url`` (guest/guest)."""
    base = management_url.replace("guest@", "")
    request = urllib.request.Request(
        f"{base}/api/{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json",
                 "authorization": "Basic " + base64.b64encode(b"guest:guest").decode()},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.read()
