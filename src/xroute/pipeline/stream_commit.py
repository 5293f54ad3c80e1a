"""How one micro-batch of a stream reaches OUT exactly once, on any storage.

Batch ``N`` is staged as the batch job stages its run (`xroute.pipeline.commit.Staging`, under
``OUT/_temporary/batch-N/``), proven (input = delivered + unroutable + rejected, every part
counted from its footer), moved to ``OUT/<output>/batch_id=N/``, and then, LAST, its marker
``OUT/_batches/N.json`` (its counts and files) is written. A batch's folders count if and only
if its marker exists (`committed_batches`).

Spark replays batch ``N`` after a restart when its own commit log lacks ``N`` (the driver died
after the marker, or before it). A marker for ``N`` means the batch is already in OUT: skip
it. No marker means whatever of ``N`` is there (staging, or folders half moved) came from an
attempt that died: delete it and redo the batch. Spark replays the same files for ``N`` (its
offset log was written before the batch ran), so the redo writes the same records.
"""

from __future__ import annotations

import json
import posixpath
import time
from typing import Any

from xroute.pipeline.commit import Staging
from xroute.sources.storage import Location, locate

MARKERS = "_batches"
BATCH_FOLDER = "batch_id={}"  # Hive-style: readers of OUT/<output>/ get a batch_id column


class BatchCommit(Staging):
    """Batch ``batch_id``'s way into OUT (see the module docstring)."""

    def __init__(self, out: str | Location, outputs: tuple[str, ...], batch_id: int) -> None:
        super().__init__(out, outputs, job=f"batch-{batch_id}")
        self.batch_id = batch_id
        self.marker = marker_location(self.out, batch_id)

    def done(self) -> bool:
        """Whether this batch is already committed (its marker is there)."""
        return self.marker.exists()

    def clear(self) -> None:
        """Delete whatever an earlier, unfinished attempt of this batch left."""
        self.staging.delete()
        for output in self.outputs:
            self.target(output).delete()

    def target(self, output: str) -> Location:
        """Where the batch's parts of ``output`` are published."""
        return self.out.child(output, BATCH_FOLDER.format(self.batch_id))

    def publish(self, record: dict[str, Any]) -> dict[str, Any]:
        """Move the staged parts to their batch folders, then write the marker (``record``,
        which has ``started_at``, with the file list and the time) last; the marker."""
        files = self.move_staged(self.target)
        committed = time.time()
        marker = {
            "batch_id": self.batch_id,
            **record,
            "files": files,
            "committed_at": committed,
            "seconds": round(committed - record["started_at"], 3),
        }
        self.marker.write_bytes((json.dumps(marker, indent=1) + "\n").encode())
        return marker


def marker_location(out: Location, batch_id: int) -> Location:
    """Where the marker of batch ``batch_id`` is."""
    return out.child(MARKERS, f"{batch_id}.json")


def committed_batches(out: str | Location) -> dict[int, dict[str, Any]]:
    """Every committed batch's marker, by batch id: the batches whose output counts."""
    out = out if isinstance(out, Location) else locate(out)
    markers = {}
    for path in out.child(MARKERS).files(recursive=False):
        name = posixpath.basename(path)
        if name.endswith(".json") and name[: -len(".json")].isdigit():
            markers[int(name[: -len(".json")])] = json.loads(
                out.child(MARKERS, name).read_bytes()
            )
    return dict(sorted(markers.items()))


def committed_files(out: str | Location, output: str) -> list[Location]:
    """The parts of ``output`` (deliveries, unroutable or rejected) of every committed batch:
    what a reader of a stream's OUT should read (a folder without a marker is a batch that
    was being written, or died, and will be redone)."""
    out = out if isinstance(out, Location) else locate(out)
    return [
        out.child(*name.split("/"))
        for marker in committed_batches(out).values()
        for name in marker["files"][output]
    ]

