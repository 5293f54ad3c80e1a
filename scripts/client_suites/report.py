"""Compare the client suites' JUnit results on RabbitMQ and on xroute.

Usage: report.py RESULTS_DIR ALLOW_LIST. Prints, per suite, tests passed on RabbitMQ, passed on
xroute, and allowed exceptions; exits 1 if a test that passed on RabbitMQ failed on xroute
without an entry in the allow-list (``suite::test id  # the RabbitMQ difference behind it``;
``*`` and ``[*]`` globs cover parameters).
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def outcomes(path: Path) -> dict[str, str]:
    """Test id -> passed, failed or skipped, from a JUnit XML file (empty if none)."""
    if not path.exists():
        return {}
    found = {}
    for case in ET.parse(path).iter("testcase"):
        if not case.get("name"):
            continue  # pytest's own internal error, not a test
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            found[name] = "failed"
        elif case.find("skipped") is not None:
            found[name] = "skipped"
        else:
            found[name] = "passed"
    return found


def allowed(path: Path) -> dict[str, str]:
    """The allow-list: ``suite::test`` -> the reason."""
    entries = {}
    for line in path.read_text().splitlines():
        entry, _, reason = line.partition("#")
        if entry.strip():
            entries[entry.strip()] = reason.strip()
    return entries


def _allowed(test: str, allow: dict[str, str]) -> bool:
    # An entry may end in a glob ("test_big_message[*]") to cover every parameter.
    return any(fnmatchcase(test, pattern.replace("[*]", "[[]*]")) for pattern in allow)


def main(results: Path, allow_list: Path) -> int:
    allow = allowed(allow_list)
    suites = sorted({p.name.rsplit("-", 1)[0] for p in results.glob("*-rabbitmq.xml")})
    summary, broken = {}, []
    for suite in suites:
        rabbit = outcomes(results / f"{suite}-rabbitmq.xml")
        ours = outcomes(results / f"{suite}-xroute.xml")
        passed_rabbit = {t for t, o in rabbit.items() if o == "passed"}
        passed_ours = {t for t, o in ours.items() if o == "passed"}
        missing = sorted(passed_rabbit - passed_ours)
        excused = [t for t in missing if _allowed(f"{suite}::{t}", allow)]
        broken += [f"{suite}::{t}" for t in missing if not _allowed(f"{suite}::{t}", allow)]
        summary[suite] = {
            "passed_on_rabbitmq": len(passed_rabbit),
            "passed_on_xroute": len(passed_ours),
            "allowed": len(excused),
            "collected": max(len(rabbit), len(ours)),
        }
    print(json.dumps(summary, indent=2))
    for test in broken:
        print(f"FAILED on xroute, passed on RabbitMQ: {test}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
