"""The names of a message dataset's columns and of the outputs' columns, and file URIs as
paths: shared by the pure batch layer and the Spark readers (`xroute.spark.io`)."""

from __future__ import annotations

from urllib.parse import unquote, urlparse

KEY, EXCHANGE, HEADERS, MESSAGE_ID = "routing_key", "exchange", "headers", "message_id"
QUEUE, REASON = "queue", "reason"
# Columns the job adds to each record to name it when it has no message_id: its file, and
# its row in that file (Parquet gives it; for text formats each file is read whole, in order).
FILE_COLUMN, ROW_COLUMN = "_xroute_file", "_xroute_row"
CORRUPT = "_corrupt_record"  # Spark's column for a JSON line that does not parse


def local_path(uri: str) -> str:
    """The path of a file URI, in any of the forms Spark writes (``file:/a%20b``,
    ``file:///a%20b``)."""
    return unquote(urlparse(uri).path)
