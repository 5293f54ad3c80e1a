"""A pytest run killed with SIGKILL while its Spark Connect server runs leaves no JVM behind
(`xroute.bench.owned`; the SeaweedFS cases, cheaper, are in tests/test_owned.py)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.services.hold_service import kill_held

pytestmark = pytest.mark.spark
XDIST_GROUP = "jvm-drivers"  # a server of its own: beside the shared session (tests/conftest.py)
READY_S = 400  # a Connect server takes 10-25 s to listen, several times that under load


def test_a_sigkilled_run_leaves_no_connect_server(tmp_path: Path) -> None:
    held = kill_held("test_hold_connect", signal.SIGKILL, tmp_path, READY_S)
    assert len(held["pids"]) >= 2, held  # the launcher scripts and the JVM at least
    assert held["survivors"] == [], f"the Connect server outlived its killed run: {held}"
    assert held["registry"] == []
