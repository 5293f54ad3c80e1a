"""PNG plot and Markdown table of `xroute.bench.contact` results (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xroute.pipeline.figures import pyplot

plt = pyplot()  # Agg, and xroute's series style


def write_contact_plot(results: dict[str, Any], out: Path) -> Path:
    """``contact.png``: per shape, first-time and repeated route tails (µs, log), and each
    goal's measured ratio over its wanted one (1: met exactly)."""
    out.mkdir(parents=True, exist_ok=True)
    entries = results["contact"]
    shapes = [entry["shape"] for entry in entries]
    figure, (tails, goals) = plt.subplots(1, 2, figsize=(18, 6))
    series = [("route_first", "mean_us"), ("route_first", "p50_us"), ("route_first", "p99_us"),
              ("route_first", "max_us"), ("route_repeat", "p50_us"), ("route_repeat", "max_us")]
    width = 0.8 / (len(series) + 1)
    for i, (what, figure_name) in enumerate(series):
        tails.bar([x + i * width for x in range(len(shapes))],
                  [entry[what][figure_name] for entry in entries], width,
                  label=f"{what} {figure_name[:-3]}")
    tails.bar([x + len(series) * width for x in range(len(shapes))],
              [entry.get("rabbitmq", {}).get("route_us", 0) for entry in entries], width,
              label="RabbitMQ 3.10.8 route/2", color="black")
    tails.set_yscale("log")
    tails.set_title("µs a route (collector on, no freeze, an earlier topology alive)")
    tails.set_xticks([x + 0.4 for x in range(len(shapes))])
    tails.set_xticklabels(shapes, rotation=30, ha="right")
    names = sorted({goal["goal"] for entry in entries for goal in entry["goals"]})
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        values = []
        for entry in entries:
            goal = next((g for g in entry["goals"] if g["goal"] == name), None)
            if goal is None:
                values.append(0)
            elif "/p50" in name:  # lower is better: wanted over measured
                values.append(goal["wanted"] / max(goal["measured"], 1e-9))
            else:
                values.append(goal["measured"] / goal["wanted"])
        goals.bar([x + i * width for x in range(len(shapes))], values, width, label=name)
    goals.axhline(1.0, color="red", linestyle="--", linewidth=1, label="goal met at >= 1")
    goals.set_yscale("log")
    goals.set_title("each goal: how far past it (>= 1 met)")
    goals.set_xticks([x + 0.4 for x in range(len(shapes))])
    goals.set_xticklabels(shapes, rotation=30, ha="right")
    tails.legend(fontsize=7)
    goals.legend(fontsize=7)
    meta = results["meta"]
    figure.suptitle(f"First contact and tails vs RabbitMQ's route function, one run "
                    f"(scale {meta['scale']}, load after {meta['load_after'][0]:.1f})")
    figure.tight_layout()
    path = out / "contact.png"
    figure.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(figure)
    return path


def markdown(results: dict[str, Any]) -> str:
    """The results as a Markdown table (one row per shape) and each shape's goals."""
    lines = ["| shape | bindings | RabbitMQ µs | xroute first mean / p50 / p99 / max µs | "
             "ratio | repeat p50 / p99 / max µs | ids first / warm ×first | "
             "router first (new keys) / warm ×first | bytes/binding traced, keys routed (RSS) | "
             "binds/s (build) / RabbitMQ's |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for e in results["contact"]:
        first, repeat, ratios = e["route_first"], e["route_repeat"], e["ratios"]
        rabbit = e.get("rabbitmq", {})
        lines.append(
            f"| {e['shape']} | {e['bindings']:,} | "
            f"{rabbit.get('route_us', float('nan')):,.1f} | "
            f"{first['mean_us']:.2f} / {first['p50_us']:.2f} / {first['p99_us']:.1f} / "
            f"{first['max_us']:,.0f} | {ratios.get('rabbitmq_over_route_first_mean', 0):,.0f}x | "
            f"{repeat['p50_us']:.2f} / {repeat['p99_us']:.2f} / {repeat['max_us']:,.0f} | "
            f"{ratios['ids_first_over_route_first']:.2f} / "
            f"{ratios['ids_warm_over_route_first']:.1f} | "
            f"{ratios.get('router_new_first_over_route_first', float('nan')):.2f} / "
            f"{ratios['router_warm_over_route_first']:.1f} | {e['bytes_per_binding']:,.0f}, "
            f"{e.get('bytes_per_binding_routed', float('nan')):,.0f} "
            f"({e.get('rss_bytes_per_binding', float('nan')):,.0f}) | "
            f"{e['bind_per_s'] / 1e3:,.0f}k ({e.get('build_per_s', float('nan')) / 1e3:,.0f}k)"
            f" / {rabbit.get('bind_per_s', float('nan')) / 1e3:,.1f}k |")
    lines.append("")
    for e in results["contact"]:
        missed = [g for g in e["goals"] if not g["met"]]
        lines.append(f"- {e['shape']}: {len(e['goals']) - len(missed)} of {len(e['goals'])} "
                     "goals met" + ("; not met: " + ", ".join(
                         f"{g['goal']} ({g['measured']:.2f}, wanted {g['wanted']:g})"
                         for g in missed) if missed else ""))
    for goal in results.get("scale", []):  # over the run (`xroute.bench.contact.scale_goals`)
        line = (f"- scale: {goal['goal']}: {goal['measured']:.2f}, wanted "
                f"{'>=' if 'bind' in goal['goal'] else '<='} {goal['wanted']:g}, "
                f"{'met' if goal['met'] else 'NOT met'}")
        if "full_collections" in goal:
            (small, small_s), (large, large_s) = goal["full_collections"]
            line += (f" (full collections within the binds: {small:.0f} taking "
                     f"{small_s * 1e3:,.0f} ms, against {large:.0f} taking "
                     f"{large_s * 1e3:,.0f} ms)")
        lines.append(line)
    return "\n".join(lines) + "\n"
