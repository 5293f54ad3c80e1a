"""REPORT.md for `xroute bench seeds`, rendered from results.json alone.

The report describes itself: the machine (CPU, clock, cores, load, Python, packages), the
command and scale, and for every experiment the seed's own setup and figures beside ours, what
was checked, what was scaled, our tables and the plot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TITLE = "xroute against the seeds' experiments"


def cell(value: Any) -> str:
    """One table cell: numbers rounded for reading, None as a dash, pipes escaped."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.0f}"
        return f"{value:.3g}"  # three significant digits: 11.7, 1.32, 0.015
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(columns: list[str], rows: list[list[Any]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = [
        "| " + " | ".join(cell(c) for c in columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _table(spec: dict[str, Any]) -> str:
    text = f"**{spec['title']}**\n\n" + markdown_table(spec["columns"], spec["rows"])
    if spec.get("note"):
        text += f"\n\n_{spec['note']}_"
    return text


def _machine(results: dict[str, Any]) -> str:
    m = results["machine"]
    clock = (
        f"{m['cpu_ghz']} GHz ({m['cpu_ghz_source']})"
        if m.get("cpu_ghz")
        else m.get("cpu_ghz_source", "unknown")
    )
    rows = [
        ["CPU", m.get("cpu_model")],
        ["clock", clock],
        ["cores", f"{m.get('cores')} ({m.get('cores_usable')} usable by this process)"],
        ["hypervisor", m.get("hypervisor") or "none reported"],
        ["memory", f"{m.get('memory_gb')} GB" if m.get("memory_gb") else None],
        ["OS", m.get("os")],
        ["Python", m.get("python")],
        [
            "load average at start (1/5/15 min)",
            " / ".join(map(str, m.get("load_average_start") or [])) or None,
        ],
        ["load average at end", " / ".join(map(str, m.get("load_average_end") or [])) or None],
    ]
    packages = ", ".join(f"{name} {version}" for name, version in m.get("packages", {}).items())
    load = (m.get("load_average_start") or [0])[0]
    warning = ""
    if m.get("cores") and load > 0.5 * m["cores"]:
        warning = (
            f"\n\n> The machine was busy when the run started (load {load} on {m['cores']} "
            "cores): other work competed for the CPU, so absolute times are pessimistic. Ratios "
            "within one experiment are the figures to trust."
        )
    return (
        "## The machine\n\n"
        + markdown_table(["", "value"], rows)
        + f"\n\nPackages: {packages}."
        + warning
    )


def _summary(results: dict[str, Any]) -> str:
    rows = []
    for entry in results["experiments"]:
        comparison = entry.get("comparison")
        if entry.get("error"):
            rows.append([f"{entry['number']}. {entry['title']}", "not run", entry["error"]])
            continue
        if comparison and comparison["rows"]:
            first = comparison["rows"][0]
            rows.append(
                [
                    f"{entry['number']}. {entry['title']}",
                    f"{first[0]}: {cell(first[1])}",
                    cell(first[2]),
                ]
            )
    return "## Summary\n\n" + markdown_table(["experiment", "the seed", "this run"], rows)


def _experiment(entry: dict[str, Any]) -> str:
    seed = entry["seed"]
    parts = [f"## {entry['number']}. {entry['title']}"]
    parts.append(
        f"### The seed\n\nSource: {seed['source']}.\n\n{seed['setup']}\n\n"
        + markdown_table(["the seed's figure", "value"], seed["figures"])
    )
    if entry.get("error"):
        parts.append(f"### This run\n\nNot run: `{entry['error']}`.")
        return "\n\n".join(parts)
    setup = "\n".join(
        f"- **{name}**: {cell(value)}" for name, value in entry.get("setup", {}).items()
    )
    checks = ", ".join(f"{name}: {cell(value)}" for name, value in entry.get("checks", {}).items())
    this_run = (
        f"### This run\n\n{setup}\n\nChecked before timing: {checks}. "
        f"Took {entry.get('seconds')} s."
    )
    for note in entry.get("scaling", []):
        this_run += f"\n\n> Scaled: {note}"
    parts.append(this_run)
    if entry.get("comparison"):
        parts.append(_table(entry["comparison"]))
    if entry.get("plot"):
        parts.append(f"![{entry['title']}]({entry['plot']})")
    parts.extend(_table(spec) for spec in entry.get("tables", []))
    return "\n\n".join(parts)


def _peers(results: dict[str, Any]) -> str:
    """Every peer row of every experiment in one table: speed and wrong routes."""
    rows = []
    for entry in results["experiments"]:
        for spec in entry.get("tables", []):
            columns = spec["columns"]
            if "wrong routes" not in columns:
                continue
            wrong = columns.index("wrong routes")
            for row in spec["rows"]:
                if str(row[wrong]).split(" ")[0] not in ("0", "None"):  # 0, "0 of 60", None
                    rows.append([f"{entry['number']}. {spec['title']}", row[0], row[wrong]])
    text = (
        "## Peers: what a user would otherwise pick\n\n"
        "kombu's in-memory topic exchange, a compiled regex per binding and paho-mqtt's "
        "`MQTTMatcher` (on the patterns MQTT can express) run inside experiments 1 to 5 on "
        "the same bindings and keys, timed like the engines. Their answers are compared with "
        "xroute's reference engine, route by route; these are the routes they got wrong:"
    )
    if rows:
        text += "\n\n" + markdown_table(["where", "peer", "wrong routes"], rows)
    else:
        text += "\n\nNone: every peer that ran agreed with the reference on every key it routed."
    return text


def render(results: dict[str, Any]) -> str:
    """The whole REPORT.md as text."""
    scale = results["scale"]
    scale_note = {
        "full": "the seeds' sizes, scaled only where an experiment says so",
        "quick": "a reduced version of every experiment (--quick): shapes, not figures to quote",
        "tiny": "the harness test's size: figures mean nothing",
    }.get(scale, scale)
    head = (
        f"# {TITLE}\n\n"
        f"Made by `{results.get('command') or 'xroute bench seeds'}` on {results['created']} "
        f"(scale **{scale}**: {scale_note}); the run took {results.get('seconds')} s. "
        "Every timed answer was first checked against xroute's reference engine; the raw "
        "figures are in results.json beside this file.\n\n"
        "Times are wall-clock in one Python process (CPython, garbage collector paused while "
        "timing); the seeds ran in Erlang (RabbitMQ) and C (OpenAMQ) on other machines, so "
        "compare ratios and shapes first, absolute times second."
    )
    sections = [head, _machine(results), _summary(results)]
    sections += [_experiment(entry) for entry in results["experiments"]]
    sections.append(_peers(results))
    sections.append(
        "## Reproduce\n\n```\nxroute bench seeds --out bench-results            # full run\n"
        "xroute bench seeds --quick --out bench-quick      # every experiment, reduced\n"
        "xroute bench seeds --with-rabbitmq --only 6       # the real RabbitMQ only\n```"
    )
    return "\n\n".join(sections) + "\n"


def write_report(results: dict[str, Any], path: Path) -> Path:
    """Write REPORT.md for ``results`` at ``path``; return the path."""
    path.write_text(render(results))
    return path


def report_from_json(results_json: Path, path: Path | None = None) -> Path:
    """Render REPORT.md again from a results.json (beside it unless ``path`` is given)."""
    results = json.loads(results_json.read_text())
    return write_report(results, path or results_json.with_name("REPORT.md"))
