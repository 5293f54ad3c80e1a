"""``xroute bench engines``: xroute's topic engines beside kombu, regexes and paho-mqtt; writes
results.json and PNG plots."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import click

from xroute.cli.bench import bench

EXIT_CHECK_FAILED = 1


def _sizes(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    if not value:
        return None
    try:
        sizes = [int(part.replace("_", "")) for part in value.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise click.BadParameter(f"{value!r} is not a list of binding counts like 1000,10000")
    return sizes


@bench.command("engines")
@click.option("--sizes", callback=_sizes, metavar="N,...",
              help="Binding counts [default: 1000,10000,100000; --full adds 1000000].")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("bench-results/engines"), show_default=True,
              help="Folder for results.json and the PNG plots.")
@click.option("--quick", is_flag=True, help="Few keys and small batches (a minute): to try it.")
@click.option("--full", is_flag=True, help="Also 1,000,000 bindings (long; several GB).")
@click.option("--engines", "engine_list", metavar="NAME,...",
              help="Engines to measure; NAME+cache adds the route cache [default: all].")
@click.option("--paths", is_flag=True,
              help="Every public path (match, match_many, match_many_ids list and Arrow, "
                   "Topology.route, BatchRouter.route) on keys that repeat and keys that "
                   "never do, binding churn, auto against the best engine (issue 12).")
@click.option("--shapes", "shape_list", is_flag=False, flag_value="all", default=None,
              metavar="[NAME,...]",
              help="The workloads other brokers benchmark (RabbitMQ 4.3, NATS, EMQX, fan-out, "
                   "literal, seed mix; issue 20): every path per shape, a few minutes.")
@click.option("--contact/--no-contact", default=True, show_default=True,
              help="With --shapes: first-time and repeated routes one by one with the "
                   "collector on (mean/p50/p99/max), batches on new keys, and RabbitMQ's "
                   "own route function in the node, in the same run (issue 36).")
@click.option("--contact-only", is_flag=True, help="With --shapes: the contact part alone.")
@click.option("--scale", type=click.FloatRange(0.001, 1.0), default=1.0, show_default=True,
              help="Shrink the 1M-subscription MQTT shape (and the repeated routes) for a "
                   "quick run.")
@click.option("--rabbitmq/--no-rabbitmq", "with_rabbitmq", default=True, show_default=True,
              help="Time RabbitMQ's route function (rabbitmqctl eval on this machine's node).")
def engines(sizes: list[int] | None, out: Path, quick: bool, full: bool,
            engine_list: str | None, paths: bool, shape_list: str | None, contact: bool,
            contact_only: bool, scale: float, with_rabbitmq: bool) -> None:
    """Time every topic engine and the Python peers on the seed workload.

    Every answer is checked against the reference engine before it is timed; peers' wrong
    routes are counted. Writes OUT/results.json and OUT/*.png.
    """
    if shape_list:
        if not contact_only:
            _shapes(shape_list, out, engine_list)
        if contact or contact_only:
            _contact(shape_list, out, scale, with_rabbitmq)
        return
    if paths:
        _paths(sizes, out, engine_list)
        return
    from xroute.bench.engines import DEFAULT_SIZES, FULL_SIZES, CheckFailed, Settings, run
    from xroute.bench.plots import write_plots

    chosen = sizes or (FULL_SIZES if full else (DEFAULT_SIZES[:2] if quick else DEFAULT_SIZES))
    settings = Settings.quick(chosen) if quick else Settings(sizes=chosen)
    if engine_list:
        settings.engines = [name.strip() for name in engine_list.split(",") if name.strip()]
    command = " ".join(
        ["xroute bench engines", f"--out {shlex.quote(str(out))}"]
        + ([f"--sizes {','.join(map(str, sizes))}"] if sizes else [])
        + (["--quick"] if quick else []) + (["--full"] if full else [])
        + ([f"--engines {shlex.quote(engine_list)}"] if engine_list else [])
    )
    began = time.perf_counter()

    def report(line: str) -> None:
        click.echo(f"[{time.perf_counter() - began:7.1f} s] {line}", err=True)

    try:
        results = run(settings, report, command=command)
    except CheckFailed as error:
        click.echo(f"xroute: a check failed before timing (a bug, not a result): {error}", err=True)
        sys.exit(EXIT_CHECK_FAILED)
    results["meta"]["seconds"] = round(time.perf_counter() - began, 1)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    plots = write_plots(results, out)
    for target in results["targets"]:
        mark = {True: "met", False: "NOT met", None: "not judged in this run"}[target["met"]]
        value = target["measured"]
        shown = f"{value:,.3f}" if isinstance(value, float) else f"{value:,}"
        click.echo(f"{target['target']:<58} {target['goal']:<22} {shown:>14}  {mark}")
    click.echo(f"wrote {out / 'results.json'} and {len(plots)} plots")


def _paths(sizes: list[int] | None, out: Path, engine_list: str | None) -> None:
    from xroute.bench.experiments.common import CheckFailed
    from xroute.bench.paths import ENGINE_SPECS, GOAL, markdown, run
    from xroute.bench.paths_plots import write_path_plots

    chosen = sizes or [1_000, 10_000, 100_000]
    specs = [n.strip() for n in engine_list.split(",") if n.strip()] if engine_list else list(
        ENGINE_SPECS)
    began = time.perf_counter()

    def report(line: str) -> None:
        click.echo(f"[{time.perf_counter() - began:7.1f} s] {line}", err=True)

    try:
        results = run(chosen, report, engines=specs)
    except CheckFailed as error:
        click.echo(f"xroute: a check failed before timing (a bug, not a result): {error}", err=True)
        sys.exit(EXIT_CHECK_FAILED)
    results["meta"]["seconds"] = round(time.perf_counter() - began, 1)
    results["meta"]["command"] = "xroute bench engines --paths " + " ".join(
        [f"--sizes {','.join(map(str, chosen))}", f"--out {shlex.quote(str(out))}"]
        + ([f"--engines {shlex.quote(engine_list)}"] if engine_list else []))
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    plots = write_path_plots(results, out)
    (out / "REPORT.md").write_text(markdown(results))
    for gap in results["gaps"]:
        mark = "met" if gap["met"] else f"NOT met (goal {GOAL}x)"
        click.echo(f"{gap['bindings']:>8,} {gap['workload']:<7} {gap['path']:<21} "
                   f"auto {gap['auto']:>12,.0f}/s  best {gap['best']:<10} "
                   f"{gap['best_rate']:>12,.0f}/s  {gap['ratio']:.2f}x  {mark}")
    for item in results["churn"]:
        click.echo(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                            for k, v in item.items()))
    click.echo(f"wrote {out / 'results.json'} and {len(plots)} plots")


def _shapes(shape_list: str, out: Path, engine_list: str | None) -> None:
    from xroute.bench.experiments.common import CheckFailed
    from xroute.bench.shapes import SCALED_SHAPES, SHAPES
    from xroute.bench.shapes_bench import ENGINES, markdown, run, targets
    from xroute.bench.shapes_plots import write_shape_plots

    names = list(SHAPES) if shape_list == "all" else [n.strip() for n in shape_list.split(",")]
    names = [name for name in names if name not in SCALED_SHAPES]  # the contact part's alone
    if not names:
        return
    unknown = [name for name in names if name not in SHAPES]
    if unknown:
        raise click.BadParameter(f"unknown shape(s) {unknown}; known: {', '.join(SHAPES)}",
                                 param_hint="--shapes")
    specs = [n.strip() for n in engine_list.split(",") if n.strip()] if engine_list else list(
        ENGINES)
    began = time.perf_counter()

    def report(line: str) -> None:
        click.echo(f"[{time.perf_counter() - began:7.1f} s] {line}", err=True)

    try:
        results = run(names, specs, report)
    except CheckFailed as error:
        click.echo(f"xroute: a check failed before timing (a bug, not a result): {error}", err=True)
        sys.exit(EXIT_CHECK_FAILED)
    results["meta"]["seconds"] = round(time.perf_counter() - began, 1)
    results["meta"]["command"] = "xroute bench engines --shapes " + " ".join(
        ([shlex.quote(shape_list)] if shape_list != "all" else [])
        + [f"--out {shlex.quote(str(out))}"]
        + ([f"--engines {shlex.quote(engine_list)}"] if engine_list else []))
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    plots = write_shape_plots(results, out)
    (out / "REPORT.md").write_text(markdown(results))
    for entry in results["shapes"]:
        for target in targets(entry):
            mark = "met" if target["met"] else "NOT met"
            click.echo(f"{entry['shape']:<10} {target['measure']:<20} goal {target['goal']:>12,} "
                       f"measured {target['value']:>14,.3f}  {mark}")
    click.echo(f"wrote {out / 'results.json'}, REPORT.md and {len(plots)} plot(s)")


def _contact(shape_list: str, out: Path, scale: float, with_rabbitmq: bool) -> None:
    from xroute.bench.contact import CONTACT_SHAPES, run
    from xroute.bench.contact_plots import markdown, write_contact_plot
    from xroute.bench.shapes import SCALED_SHAPES, SHAPES

    names = list(CONTACT_SHAPES) if shape_list == "all" else [
        n.strip() for n in shape_list.split(",") if n.strip()]
    unknown = [name for name in names if name not in SHAPES and name not in SCALED_SHAPES]
    if unknown:
        raise click.BadParameter(f"unknown shape(s) {unknown}", param_hint="--shapes")
    began = time.perf_counter()

    def report(line: str) -> None:
        click.echo(f"[{time.perf_counter() - began:7.1f} s] {line}", err=True)

    out.mkdir(parents=True, exist_ok=True)

    def keep(results: dict) -> None:
        results["meta"]["seconds"] = round(time.perf_counter() - began, 1)
        (out / "contact.json").write_text(json.dumps(results, indent=2, default=str) + "\n")

    results = run(tuple(names), scale=scale, rabbitmq=with_rabbitmq, report=report, done=keep)
    write_contact_plot(results, out)
    table = markdown(results)
    (out / "CONTACT.md").write_text(table)
    click.echo(table)
    click.echo(f"wrote {out / 'contact.json'}, CONTACT.md and contact.png")
