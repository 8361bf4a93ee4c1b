"""Draw the Performance page's charts from the benchmarks' JSON results.

    python benchmarks/charts.py [RESULTS_DIR] [--out docs/assets/perf]

Reads every ``*.json`` the benchmark scripts wrote (``benchmarks/results/`` by
default; see ``_harness.py`` for the format) and writes, per benchmark and
metric, one SVG chart: the workloads down the side, every implementation's
bar side by side, each bar labelled with its value and its ratio to the
reference implementation, and the machine, versions, date and command
stamped underneath.  The JSON files are copied next to the charts, so the
page can link the figures behind each one.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent

#: Bar colours: kafkawire's implementations in blues, peers in other hues (stable per name).
KAFKAWIRE_COLOURS = ["#1f4e9c", "#4a7fd0", "#8fb3ea", "#c5d8f5"]
PEER_COLOURS = ["#d9822b", "#6a9f3c", "#a34aa3", "#8c8c8c", "#c44e52", "#3d9ca8", "#b8a233"]
LOWER_IS_BETTER = ("us", "ms", "seconds", "CPU seconds (JVM + Python)", "ns per record (CPU)")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _fmt(value: float, unit: str) -> str:
    if unit.startswith("ratio"):
        return f"{value:.2f}"
    if abs(value) >= 1e6:
        return f"{value / 1e6:,.2f}M"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def stamp(result: Dict[str, Any]) -> str:
    """The provenance line(s) printed under every chart."""
    m = result["machine"]
    v = result["versions"]
    versions = ", ".join(f"{k} {val}" for k, val in v.items() if k != "kafkawire backend")
    text = (f"{m['cpu']}, {m['cores']} cores, {m.get('memory_gb') or '?'} GB; {m['platform']}\n"
            f"{versions}\n"
            f"{result['date']}: {result['command']}")
    return "\n".join(textwrap.fill(line, 150) for line in text.splitlines())


def _colours(implementations: List[str]) -> Dict[str, str]:
    out, kw, peer = {}, 0, 0
    for name in implementations:
        if name.startswith("kafkawire"):
            out[name] = KAFKAWIRE_COLOURS[kw % len(KAFKAWIRE_COLOURS)]
            kw += 1
        else:
            out[name] = PEER_COLOURS[peer % len(PEER_COLOURS)]
            peer += 1
    return out


def chart(result: Dict[str, Any], metric: str, rows: List[Dict[str, Any]], path: Path,
          fmt: str = "svg") -> None:
    """Small multiples: one panel per workload (each on its own scale), the implementations'
    bars side by side in it, labelled with value and ratio to the reference."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"       # text stays text: small, searchable files
    plt.rcParams["svg.hashsalt"] = "kafkawire"  # stable ids: regenerating changes only the data
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    impls = list(dict.fromkeys(r["implementation"] for r in rows))
    colours = _colours(impls)
    unit = rows[0]["unit"]
    by_key = {(r["workload"], r["implementation"]): r for r in rows}
    panel_h = [0.3 + 0.27 * sum((wl, i) in by_key for i in impls) for wl in workloads]
    stamp_h = 0.62
    fig_h = 0.55 + sum(panel_h) + 0.35 + stamp_h
    fig, axes = plt.subplots(len(workloads), 1, figsize=(10, fig_h), squeeze=False,
                             gridspec_kw={"height_ratios": panel_h})
    better = "lower is better" if unit in LOWER_IS_BETTER else "higher is better"
    for ax, wl in zip(axes[:, 0], workloads):
        present = [i for i in impls if (wl, i) in by_key]
        values = [by_key[wl, i]["value"] for i in present]
        ax.barh(range(len(present)), values, color=[colours[i] for i in present], height=0.75)
        top = max(values) or 1.0
        for y, impl in enumerate(present):
            r = by_key[wl, impl]
            label = f"{_fmt(r['value'], unit)}"
            if r.get("ratio") is not None and impl != r.get("reference"):
                label += f"   {r['ratio']:.2f}× vs {r['reference']}"
            if r.get("note"):
                label += f"   [{r['note']}]"
            ax.text(r["value"] + top * 0.01, y, label, va="center", fontsize=7.5)
        ax.set_yticks(range(len(present)))
        ax.set_yticklabels(present, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, top * 1.6)
        ax.set_xticks([])
        ax.set_title(wl, fontsize=9, loc="left", pad=2)
        for side in ("top", "right", "bottom"):
            ax.spines[side].set_visible(False)
    fig.suptitle(f"{result['benchmark']}: {metric}, {unit} ({better})", fontsize=11, x=0.01,
                 ha="left")
    fig.text(0.01, 0.005, stamp(result), fontsize=6.2, color="#555555", va="bottom",
             family="monospace")
    fig.tight_layout(rect=(0, stamp_h / fig_h, 1, 1 - 0.25 / fig_h))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format=fmt, dpi=110,
                metadata={"Date": None} if fmt == "svg" else {"Software": None})
    plt.close(fig)


def charts_for(result: Dict[str, Any], out: Path, fmt: str = "svg") -> List[Tuple[str, Path]]:
    """Every chart of one result file: ``[(metric, path)]``."""
    made = []
    rows = [r for r in result["rows"] if r["value"] is not None]
    for metric in dict.fromkeys(r["metric"] for r in rows):
        group = [r for r in rows if r["metric"] == metric]
        units = dict.fromkeys(r["unit"] for r in group)
        for unit in units:
            sub = [r for r in group if r["unit"] == unit]
            name = f"{result['benchmark']}-{_slug(metric)}" + (f"-{_slug(unit)}" if len(units) > 1 else "")
            path = out / f"{name}.{fmt}"
            chart(result, metric, sub, path, fmt)
            made.append((metric, path))
    return made


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", default=str(ROOT / "benchmarks" / "results"),
                    help="folder of the benchmarks' JSON results")
    ap.add_argument("--out", default=str(ROOT / "docs" / "assets" / "perf"),
                    help="where the charts (and a copy of the JSON) go")
    ap.add_argument("--format", default="svg", choices=("svg", "png"))
    args = ap.parse_args()
    src, out = Path(args.results), Path(args.out)
    files = sorted(src.glob("*.json"))
    if not files:
        print(f"no results in {src}: run the benchmarks first (see docs/performance.md)",
              file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    for f in files:
        result = json.loads(f.read_text(encoding="utf-8"))
        if f.resolve().parent != out.resolve():
            shutil.copyfile(f, out / f.name)
        for metric, path in charts_for(result, out, args.format):
            print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}  "
                  f"({result['benchmark']}: {metric})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
