"""Compare the client suites' results on RabbitMQ and on xroute, with reruns for flakiness.

    report.py pending RESULTS_DIR ALLOW_LIST SUITE   the tests still failing on xroute, one a line
    report.py RESULTS_DIR ALLOW_LIST                 the counts as JSON; exit 1 on a failure

RESULTS_DIR holds, per suite, the outcomes ``broker_plugin`` records (JSON lines):
``SUITE-rabbitmq.jsonl`` and ``SUITE-xroute.jsonl`` for the full runs, and
``SUITE-xroute-rerunN.jsonl`` / ``SUITE-rabbitmq-rerunN.jsonl`` for the reruns, which run one
test at a time (in isolation).

The rule: a test that passed on RabbitMQ must pass on xroute. One that did not is a suspect,
rerun in rounds of one run on xroute then one on RabbitMQ (``pending`` lists the suspects no
xroute rerun has passed and no RabbitMQ rerun has failed):
1. passing any rerun on xroute, it is reported as "passed on rerun", not as a failure;
2. failing any rerun on RabbitMQ, it is flaky on RabbitMQ itself and is reported as "flaky on
   RabbitMQ", not as an xroute failure;
3. otherwise it fails the run, unless the allow-list names it (``suite::test id  # why``: a
   RabbitMQ version difference, or a client race that the broker's reply latency decides, traced
   in the client's code; ``*`` and ``[*]`` globs).
Every rerun, its outcomes and the verdict are in the JSON.
"""

from __future__ import annotations

import json
import re
import sys
from fnmatch import fnmatchcase
from pathlib import Path

MAX_SUSPECTS = 40  # more than this many suspects is a broken run, not flakiness: no reruns


def outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """Absolute node id -> (test id as the suite names it, passed/failed/skipped)."""
    if not path.exists():
        return {}
    phases: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a killed run
        phases.setdefault(record["node"], []).append(record["outcome"])
        names[record["node"]] = record["test"]
    found = {}
    for node, seen in phases.items():
        if "failed" in seen:
            outcome = "failed"
        elif "skipped" in seen:
            outcome = "skipped"
        else:
            outcome = "passed" if len(seen) >= 2 else "failed"  # a run killed mid-test
        found[node] = (names[node], outcome)
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


def _reruns(results: Path, suite: str, target: str) -> list[dict[str, tuple[str, str]]]:
    runs = {}
    for path in results.glob(f"{suite}-{target}-rerun*.jsonl"):
        found = re.fullmatch(rf"{re.escape(suite)}-{target}-rerun(\d+)\.jsonl", path.name)
        if found:  # not a "-part" file of a rerun under way
            runs[int(found.group(1))] = outcomes(path)
    return [runs[number] for number in sorted(runs)]


def judge(results: Path, allow: dict[str, str], suite: str) -> dict:
    """One suite's counts, suspects and verdicts."""
    rabbit = outcomes(results / f"{suite}-rabbitmq.jsonl")
    ours = outcomes(results / f"{suite}-xroute.jsonl")
    passed_rabbit = {node for node, (_, o) in rabbit.items() if o == "passed"}
    passed_ours = {node for node, (_, o) in ours.items() if o == "passed"}
    missing = sorted(passed_rabbit - passed_ours)
    name = {node: rabbit[node][0] for node in rabbit}
    excused = [n for n in missing if _allowed(f"{suite}::{name[n]}", allow)]
    suspects = [n for n in missing if n not in excused]
    ours_again = _reruns(results, suite, "xroute")
    rabbit_again = _reruns(results, suite, "rabbitmq")
    reruns, pending_xroute, failures = {}, [], []
    counts = {"passed_on_rerun": 0, "flaky_on_rabbitmq": 0}
    for node in suspects:
        on_ours = [run[node][1] for run in ours_again if node in run]
        on_rabbit = [run[node][1] for run in rabbit_again if node in run]
        if "passed" in on_ours:
            verdict = "passed on rerun"
            counts["passed_on_rerun"] += 1
        elif "failed" in on_rabbit:
            verdict = "flaky on RabbitMQ"
            counts["flaky_on_rabbitmq"] += 1
        else:
            verdict = "failed"
            failures.append(node)
            if len(suspects) <= MAX_SUSPECTS:
                pending_xroute.append(node)
            else:
                verdict = "failed (too many suspects to rerun)"
        reruns[f"{suite}::{name[node]}"] = {
            "xroute": ["failed", *on_ours],
            "rabbitmq": ["passed", *on_rabbit],
            "verdict": verdict,
        }
    return {
        "counts": {
            "passed_on_rabbitmq": len(passed_rabbit),
            "passed_on_xroute": len(passed_ours),
            "allowed": len(excused),
            **counts,
            "failed": len(failures),
            "collected": max(len(rabbit), len(ours)),
        },
        "reruns": reruns,
        "pending_xroute": pending_xroute,
        "failures": [f"{suite}::{name[n]}" for n in failures],
    }


def suites_in(results: Path) -> list[str]:
    return sorted({p.name[: -len("-rabbitmq.jsonl")] for p in results.glob("*-rabbitmq.jsonl")})


def main(results: Path, allow_list: Path) -> int:
    allow = allowed(allow_list)
    summary, reruns, broken = {}, {}, []
    for suite in suites_in(results):
        judged = judge(results, allow, suite)
        summary[suite] = judged["counts"]
        reruns.update(judged["reruns"])
        broken += judged["failures"]
    print(json.dumps({"suites": summary, "reruns": reruns}, indent=2))
    for test, rerun in reruns.items():
        print(f"rerun: {test}: xroute {rerun['xroute']}, RabbitMQ {rerun['rabbitmq']}: "
              f"{rerun['verdict']}")
    for test in broken:
        print(f"FAILED on xroute, passed on RabbitMQ: {test}")
    return 1 if broken else 0


def pending(results: Path, allow_list: Path, suite: str) -> int:
    """Print the node ids of the suspects not yet excused by a rerun (none: nothing to rerun)."""
    judged = judge(results, allowed(allow_list), suite)
    if judged["pending_xroute"]:
        print("\n".join(judged["pending_xroute"]))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "pending":
        sys.exit(pending(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]))
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
