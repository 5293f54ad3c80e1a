"""How a run's outputs reach OUT on any storage, object stores included (no atomic rename).

1. **Stage.** Tasks write their parts under ``OUT/_temporary/<job>/<output>/``, a job-unique
   prefix that readers skip (Spark, pyarrow and pandas ignore paths starting with ``_``).
   Each part's name carries the task, its attempt and a random suffix: two attempts of one task
   never write the same object.
2. **Count.** The driver keeps only the parts named by the manifests of successful task
   attempts (Spark returns no others), deletes the rest, and counts the rows of every kept part
   from its Parquet footer; the job checks its invariant on those counts.
3. **Publish**, only once the counts are proven: ``OUT/_SUCCESS`` of an earlier run is deleted
   first (with ``--overwrite``), then everything else of that run; the staged parts are moved to
   ``OUT/<output>/`` (a rename on local disks and HDFS, a server-side copy on object stores);
   then ``summary.json`` and ``summary.png``; then ``_SUCCESS``, last, naming the job, its
   counts and every file. The staging prefix is deleted.

A run that fails, or is stopped, before publishing deletes its staging prefix (and OUT, if it
made it): nothing else was touched, and an earlier output stays whole. A run killed outright
leaves only ``_temporary/``, which readers skip and the next run into OUT removes. Output is
complete if and only if ``_SUCCESS`` is there: a run killed while publishing (a few renames or
copies) leaves files without it, which the next run with ``--overwrite`` replaces.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow.fs import FileSelector

from xroute.errors import OutputExists, PipelineFailed
from xroute.storage import Location, locate

STAGING = "_temporary"
SUCCESS = "_SUCCESS"


class Staging:
    """Steps 1 and 2 of the module docstring, for any writer into OUT: tasks stage parts under
    ``OUT/_temporary/<job>/<output>/``; the parts named by manifests are kept and counted, and
    moved (step 3) to where the writer publishes them. The batch job (`Commit`) and each
    micro-batch of a stream (`xroute.pipeline.stream_commit`) are the two writers."""

    def __init__(
        self, out: str | Location, outputs: Iterable[str], job: str | None = None
    ) -> None:
        self.out = out if isinstance(out, Location) else locate(out)
        self.outputs = tuple(outputs)
        self.job = job or uuid.uuid4().hex[:12]
        self.staging = self.out.child(STAGING, self.job)

    def begin(self) -> None:
        """Make the staging folder (object stores need none: a prefix exists by its objects)."""
        if self.staging.local:
            self.staging.filesystem.create_dir(self.staging.path, recursive=True)

    def folder(self, output: str) -> Location:
        """Where tasks stage the parts of ``output``."""
        return self.staging.child(output)

    def keep_listed(self, files: Mapping[str, Iterable[str]]) -> dict[str, int]:
        """Delete staged parts that no manifest names (failed or retried attempts); the rows
        of the rest, from their footers, by output. A named part that is missing fails."""
        rows = {}
        for output in self.outputs:
            folder = self.folder(output)
            listed = set(files.get(output, ()))
            staged = {posixpath.basename(path): path for path in folder.files(recursive=False)}
            missing = listed - set(staged)
            if missing:
                raise PipelineFailed(
                    f"{output}: parts named by the manifests are missing: {sorted(missing)[:3]}"
                )
            total = 0
            for name, path in staged.items():
                if name in listed:
                    with folder.filesystem.open_input_file(path) as source:
                        total += pq.ParquetFile(source).metadata.num_rows
                else:
                    folder.filesystem.delete_file(path)
            rows[output] = total
        return rows

    def stage_empty(self, output: str, schema: pa.Schema) -> None:
        """Stage one empty part of ``output``, for an output no task wrote to: it still reads
        back, with its schema."""
        sink = pa.BufferOutputStream()
        pq.write_table(schema.empty_table(), sink, store_schema=False)
        self.folder(output).child("part-empty.parquet").write_bytes(sink.getvalue().to_pybytes())

    def staged(self, output: str) -> list[Location]:
        """The parts of ``output`` staged so far, as locations."""
        folder = self.folder(output)
        return [folder.child(posixpath.basename(p)) for p in folder.files(recursive=False)]

    def move_staged(self, target: Callable[[str], Location]) -> dict[str, list[str]]:
        """Move every staged part of each output into ``target(output)`` (a rename on local
        disks, a server-side copy on object stores); the moved files, by output, as paths
        relative to OUT. The staging prefix is deleted."""
        filesystem = self.out.filesystem
        moved: dict[str, list[str]] = {}
        prefix = self.out.path.rstrip("/") + "/"
        for output in self.outputs:
            folder = target(output)
            filesystem.create_dir(folder.path, recursive=True)
            moved[output] = []
            for part in self.staged(output):
                destination = folder.child(posixpath.basename(part.path))
                filesystem.move(part.path, destination.path)
                moved[output].append(destination.path[len(prefix) :])
        self.staging.delete()
        self._remove_empty_staging_root()
        return moved

    def _remove_empty_staging_root(self) -> None:
        root = self.out.child(STAGING)
        if root.is_dir() and not _children(root):
            root.delete()


class Commit(Staging):
    """One batch run's way into OUT: see the module docstring."""

    def __init__(self, out: str, outputs: Iterable[str], overwrite: bool = False) -> None:
        super().__init__(out, outputs)
        self.overwrite = overwrite
        info = self.out.info()
        if info.type.name == "File":
            raise OutputExists(self.out.uri)  # a file is never replaced by a folder
        self._made_out = info.type.name == "NotFound"
        if not overwrite and self._has_output():
            raise OutputExists(self.out.uri)

    def publish(self, extra: Mapping[str, bytes], success: Mapping[str, Any]) -> None:
        """Replace OUT's earlier output (if any) by the staged one, ``extra`` files beside it,
        and ``_SUCCESS`` (``success`` as JSON, with the file list) last."""
        old_success = self.out.child(SUCCESS)
        if self._has_output():
            if not self.overwrite:
                raise OutputExists(self.out.uri)
            old_success.delete()  # from here on, readers know OUT is not a complete output
            for entry in self._entries():
                if entry.path != self.out.child(STAGING).path:
                    entry.delete()
        self._remove_stale_staging()
        published = self.move_staged(self.out.child)
        for name, data in extra.items():
            self.out.child(name).write_bytes(data)
        marker = {"job": self.job, **success, "files": published}
        old_success.write_bytes((json.dumps(marker, indent=1) + "\n").encode())

    def abort(self) -> None:
        """Delete what this run staged; OUT too, if this run made it and nothing else is in
        it. Never raises: it runs while another error is on its way."""
        try:
            self.staging.delete()
            self._remove_empty_staging_root()
            if self._made_out and not self._entries():
                self.out.delete()
        except Exception:  # noqa: BLE001 - the original error matters more
            pass

    # ------------------------------------------------------------------ helpers

    def _entries(self) -> list[Location]:
        return _children(self.out)

    def _has_output(self) -> bool:
        """Whether OUT holds anything besides staging (an earlier output, complete or not)."""
        return any(posixpath.basename(e.path) != STAGING for e in self._entries())

    def _remove_stale_staging(self) -> None:
        """Staging left by runs that were killed: one writer per OUT, so none is running."""
        root = self.out.child(STAGING)
        for entry in _children(root):
            if posixpath.basename(entry.path) != self.job:
                entry.delete()


def _children(folder: Location) -> list[Location]:
    infos = folder.filesystem.get_file_info(
        FileSelector(folder.path, recursive=False, allow_not_found=True)
    )
    return [folder.child(posixpath.basename(i.path)) for i in infos]
