"""One signed S3 PutObject (AWS Signature V4) with headers of the caller's choosing, in plain
Python: to ask a store directly whether it honours a conditional put (``If-None-Match: *``),
which pyarrow's S3 filesystem never sends."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import urllib.error
import urllib.request
from collections.abc import Mapping
from urllib.parse import urlparse


def put_object(
    env: Mapping[str, str],
    bucket: str,
    key: str,
    body: bytes,
    headers: Mapping[str, str] | None = None,
) -> int:
    """PUT ``body`` at ``bucket/key`` on the store of ``env`` (``AWS_ENDPOINT_URL``, keys,
    region); the HTTP status (200, or 412 when a precondition failed)."""
    endpoint = urlparse(env["AWS_ENDPOINT_URL"])
    region = env.get("AWS_REGION", "us-east-1")
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(body).hexdigest()
    path = f"/{bucket}/{key}"
    signed = {"host": endpoint.netloc, "x-amz-content-sha256": payload, "x-amz-date": stamp}
    names = ";".join(sorted(signed))
    canonical = "\n".join(
        ["PUT", path, "", *(f"{k}:{signed[k]}" for k in sorted(signed)), "", names, payload]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, digest])
    signing = ("AWS4" + env["AWS_SECRET_ACCESS_KEY"]).encode()
    for part in (day, region, "s3", "aws4_request"):
        signing = hmac.new(signing, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={env['AWS_ACCESS_KEY_ID']}/{scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    request = urllib.request.Request(
        f"{endpoint.scheme}://{endpoint.netloc}{path}",
        data=body,
        method="PUT",
        headers={**signed, "Authorization": authorization, **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
