"""`xroute.cli.processes`: what a command started is found and stopped, orphans included."""

from __future__ import annotations

import subprocess
import sys

_ORPHAN_THEN_STOP = """
import os, subprocess, sys, time
from xroute.cli.processes import adopt_orphans, descendants, stop_descendants

if sys.argv[1] == "adopt":
    adopt_orphans()
# A child that starts a long sleep and exits at once: the sleep is left an orphan, as a Python
# worker is when its JVM is stopped before it.
subprocess.run(["sh", "-c", "sleep 60 & echo $!"], stdout=open("orphan.pid", "w"), check=True)
orphan = int(open("orphan.pid").read())
time.sleep(0.2)
found = orphan in descendants()
stopped = stop_descendants(grace=1.0)
time.sleep(0.2)
try:
    state = open(f"/proc/{orphan}/stat").read().rsplit(")", 1)[1].split()[0]
except OSError:
    state = "gone"
if state != "gone" and state != "Z":
    os.kill(orphan, 9)
print(found, orphan in stopped, state in ("gone", "Z"))
"""


def _run(mode: str, tmp_path) -> str:
    done = subprocess.run([sys.executable, "-c", _ORPHAN_THEN_STOP, mode], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


def test_an_orphan_of_a_started_process_is_adopted_found_and_stopped(tmp_path):
    assert _run("adopt", tmp_path) == ["True", "True", "True"]


def test_without_adoption_the_orphan_is_out_of_sight(tmp_path):
    # What adopt_orphans is for: init takes the orphan, and the command would leave it running.
    assert _run("plain", tmp_path) == ["False", "False", "False"]
