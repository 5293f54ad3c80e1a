"""`xroute.sources.storage`: local paths and URIs as one kind of thing (the S3 store itself is tested in
tests/pipeline/test_object_store.py)."""

from __future__ import annotations

import pytest

from xroute import StorageError
from xroute.sources.storage import is_uri, locate


def test_a_local_path_and_its_file_uri_are_one_place(tmp_path):
    folder = tmp_path / "a b"
    place = locate(str(folder))
    assert place.local and place.uri == folder.as_uri()
    same = locate(folder.as_uri())
    assert same.path == place.path
    place.child("x y.txt").write_bytes(b"hello")  # folders are made as needed
    assert (folder / "x y.txt").read_bytes() == b"hello"
    child = place.child("x y.txt")
    assert child.uri == (folder / "x y.txt").as_uri()  # names quoted as in a URI
    assert locate(child.uri).read_bytes() == b"hello"
    assert place.files() == [str(folder / "x y.txt")]
    place.delete()
    assert not folder.exists() and not place.exists()


def test_schemes_pyarrow_lacks_go_through_fsspec():
    place = locate("memory://xroute-test/folder")
    assert not place.local and is_uri(place.uri)
    place.child("k.json").write_bytes(b"{}")
    assert place.child("k.json").read_bytes() == b"{}"
    assert place.is_dir()


def test_bad_places_are_typed_errors(tmp_path):
    with pytest.raises(StorageError, match="neither pyarrow nor fsspec serves 'nosuch'"):
        locate("nosuch://bucket/key")
    with pytest.raises(StorageError, match="does not exist"):
        locate(str(tmp_path / "missing.json")).read_bytes()
    assert not is_uri("/a/b") and not is_uri("file:///a/b") and is_uri("s3://b/k")


def test_a_local_file_is_seen_complete_or_not_at_all(tmp_path):
    """A reader polling a stream's commit markers must never read one half-written: the
    bytes go to a hidden file beside the target, renamed onto it once complete, so the
    target is replaced (a new inode), never truncated and rewritten in place."""
    path = tmp_path / "_batches" / "7.json"
    marker = locate(str(path))
    marker.write_bytes(b'{"batch_id": 7}')
    before = path.stat().st_ino
    marker.write_bytes(b'{"batch_id": 7, "again": true}')
    assert path.stat().st_ino != before
    assert marker.read_bytes() == b'{"batch_id": 7, "again": true}'
    assert [p.name for p in path.parent.iterdir()] == ["7.json"]  # nothing left beside it


def test_a_failed_local_write_leaves_nothing_beside_its_target(tmp_path):
    # The rename fails: the target is a folder that is not empty. The hidden file the bytes
    # went to is xroute's own, and goes too.
    path = tmp_path / "out" / "7.json"
    (path / "inside").mkdir(parents=True)
    with pytest.raises(StorageError):
        locate(str(path)).write_bytes(b"new")
    assert [p.name for p in path.parent.iterdir()] == ["7.json"]
    assert [p.name for p in path.iterdir()] == ["inside"]


class ChangingFolder:
    """A local filesystem on which the first ``races`` listings fail as a folder read while
    a file under it is renamed away does (the listing raises "not found")."""

    def __init__(self, races: int) -> None:
        import pyarrow.fs as pafs

        self.local, self.races, self.listings = pafs.LocalFileSystem(), races, 0

    def get_file_info(self, selector):
        self.listings += 1
        if self.listings <= self.races:
            raise FileNotFoundError(f"{selector.base_dir}/.0.json.tmp: no such file")
        return self.local.get_file_info(selector)


def test_a_folder_that_changed_while_it_was_listed_is_read_again(tmp_path):
    """A stream's markers polled while the stream writes one (make test saw it once): the
    listing is read again rather than reported as a missing folder."""
    from xroute.sources.storage import LISTING_TRIES, Location

    (tmp_path / "0.json").write_text("{}")
    folder = ChangingFolder(races=LISTING_TRIES - 1)
    where = Location(folder, str(tmp_path), tmp_path.as_uri())
    assert where.files(recursive=False) == [str(tmp_path / "0.json")]
    assert folder.listings == LISTING_TRIES

    always = Location(ChangingFolder(races=LISTING_TRIES), str(tmp_path), tmp_path.as_uri())
    with pytest.raises(StorageError, match="it does not exist"):
        always.files(recursive=False)
