"""The seeds' experiments, one module each, and the suite that runs them and writes the outputs.

Each experiment module has the same small surface: ``NUMBER``, ``KEY``, ``TITLE``, ``SEED``
(the seed's own setup and figures), ``steps(scale)``, ``run(context) -> dict`` (JSON values
only: setup, comparison with the seed, tables, checks) and ``plot(result, path)``. The report
(`xroute.bench.report`) is rendered from results.json alone, so it can be rewritten without
measuring again.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from xroute.bench.experiments import anatomy, bitmaps, broker, multikey, topic_direct, trie_dfa
from xroute.bench.experiments.common import (
    SCALES,
    CheckFailed,
    Context,
    NoProgress,
    Progress,
    quiet_gc,
)
from xroute.bench.experiments.machine import load_average, machine_info

# In the order; 6 is the real RabbitMQ (the peers run inside every other experiment).
EXPERIMENTS: tuple[ModuleType, ...] = (anatomy, trie_dfa, bitmaps, topic_direct, multikey, broker)
BROKER = broker.NUMBER
RESULTS_FILE, REPORT_FILE = "results.json", "REPORT.md"


def plot_name(module: ModuleType) -> str:
    """The PNG file an experiment's plot is written to."""
    return f"{module.NUMBER:02d}-{module.KEY}.png"


def select(only: Iterable[int] | None, with_rabbitmq: bool) -> list[ModuleType]:
    """The experiments to run: ``only`` these numbers (all if None); the broker only on request.

    Raises ValueError naming a number that is not an experiment, or 6 without the broker.
    """
    numbers = {module.NUMBER for module in EXPERIMENTS}
    wanted = set(only) if only else numbers
    unknown = sorted(wanted - numbers)
    if unknown:
        raise ValueError(f"no experiment {unknown[0]}; the experiments are {sorted(numbers)}")
    if only and BROKER in wanted and not with_rabbitmq:
        raise ValueError(f"experiment {BROKER} measures a real RabbitMQ: add --with-rabbitmq")
    if not with_rabbitmq:
        wanted.discard(BROKER)
    return [module for module in EXPERIMENTS if module.NUMBER in wanted]


def total_steps(modules: Iterable[ModuleType], scale: str) -> int:
    """The number of progress steps the selected experiments will report."""
    return sum(module.steps(scale) for module in modules)


def run_suite(
    scale: str = "full",
    only: Iterable[int] | None = None,
    with_rabbitmq: bool = False,
    progress: Progress | None = None,
    out: Path | None = None,
    command: str = "",
) -> dict[str, Any]:
    """Run the selected experiments; return everything results.json holds.

    A broken answer (`CheckFailed`) stops the run: it is a bug, not a result. A broker that
    cannot be started is recorded as the experiment's ``error`` and the rest still runs. With
    ``out``, results.json is rewritten after each experiment so that a long run keeps what it
    measured.
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; the scales are {', '.join(SCALES)}")
    progress = progress or NoProgress()
    modules = select(only, with_rabbitmq)
    machine = machine_info()
    context = Context(scale=scale, progress=progress, ghz=machine["cpu_ghz"])
    results: dict[str, Any] = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "scale": scale,
        "machine": machine,
        "experiments": [],
    }
    started = time.perf_counter()
    for module in modules:
        progress.begin(f"{module.NUMBER}. {module.TITLE}", module.steps(scale))
        entry: dict[str, Any] = {
            "number": module.NUMBER,
            "key": module.KEY,
            "title": module.TITLE,
            "seed": module.SEED,
            "plot": plot_name(module),
        }
        clock = time.perf_counter()
        try:
            # The collector stays off for the whole experiment (collected once on the way in):
            # a full collection of a heap holding 100k bindings costs more than many of the
            # loops it would interrupt, and what is built here makes few cycles (a few
            # thousand objects over a whole run), collected after.
            with quiet_gc():
                entry.update(module.run(context))
        except CheckFailed:
            raise
        except Exception as error:  # a broker that would not start must not lose the others
            if module.NUMBER != BROKER:
                raise
            entry["error"] = f"{type(error).__name__}: {error}"
            entry["plot"] = None
            print(traceback.format_exc(), file=sys.stderr)
        entry["seconds"] = round(time.perf_counter() - clock, 1)
        results["experiments"].append(entry)
        if out is not None:
            _write_json(results, out)
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["machine"]["load_average_end"] = load_average()
    return results


def write_outputs(results: dict[str, Any], out: Path) -> dict[str, Path]:
    """Write results.json, one PNG per experiment that ran, and REPORT.md into ``out``."""
    from xroute.bench.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    written = {"results": _write_json(results, out)}
    by_number = {module.NUMBER: module for module in EXPERIMENTS}
    for entry in results["experiments"]:
        if entry.get("plot"):
            path = out / entry["plot"]
            by_number[entry["number"]].plot(entry, str(path))
            written[entry["key"]] = path
    written["report"] = write_report(results, out / REPORT_FILE)
    return written


def _write_json(results: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULTS_FILE
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(results, indent=1, default=str) + "\n")
    partial.replace(path)  # a reader never sees half a file
    return path


__all__ = [
    "EXPERIMENTS",
    "REPORT_FILE",
    "RESULTS_FILE",
    "SCALES",
    "CheckFailed",
    "plot_name",
    "run_suite",
    "select",
    "total_steps",
    "write_outputs",
]
