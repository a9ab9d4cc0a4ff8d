"""Charts of the benchmarks' JSON lines: ours against the peer per case, and the scale curves.

Reads the lines of every FILE (or stdin) that ``bench/*.py`` print, and writes PNGs to
``--out`` (default ``docs/img``):

- ``bench-<bench>.png`` (``bench-<bench>-<unit>.png`` when a bench has lines in several units):
  one row per case, our bar and a bar per peer, the peer named in the legend with its mode
  (``peer_mode``) and the ratio written beside its bar; a log axis where the values span more
  than :data:`LOG_SPAN`. Lines with an ``error``, without a peer figure, or that are no case
  (headers, single runs) are left out.
- ``bench-scale-members.png`` (start-up and round time against the group's size),
  ``bench-scale-history.png`` (start-up against the report rounds in the status partition) and
  ``bench-scale-partitions.png`` (round time against the partitions), log-log, from the
  ``*-growth`` lines' ``points`` (or, without them, from the per-point lines).

``make bench`` runs it on ``bench/results/*.jsonl``. matplotlib is installed by that target
only: it is no dependency of the package.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a window: also on a machine without a display

from matplotlib.figure import Figure
from matplotlib.patches import Patch

LOG_SPAN = 50.0
"""Largest / smallest value above which the value axis is logarithmic."""

SCALE_CURVES = {
    "members": ("startup", "round"),
    "history": ("startup",),
    "partitions": ("round",),
}
"""The scale charts: series -> the metrics drawn against it."""
SCALE_AXES = {"history": "report rounds in the status partition"}
"""What a series counts, where its name does not say it."""

Points = list[tuple[float, float]]
"""A curve: (size, value) pairs."""

OURS_COLOUR = "#1f77b4"
PEER_COLOURS = ("#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
_PNG_METADATA = {"Software": None}  # no matplotlib version in the file: charts diff only on data


@dataclass
class Row:
    """One case: our figure and each peer's (label -> value, ratio)."""

    ours: float
    peers: dict[str, tuple[float, float | None]] = field(default_factory=dict)


def read_lines(sources: Iterable[Iterable[str]]) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of ``sources``' lines, and how many lines were not one."""
    found, skipped = [], 0
    for source in sources:
        for text in source:
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except ValueError:
                skipped += 1
                continue
            if isinstance(line, dict):
                found.append(line)
            else:
                skipped += 1
    return found, skipped


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None  # None, text, NaN: nothing to draw
    return float(value)


def peer_label(line: dict[str, Any]) -> str:
    """The peer as the legend names it: its name, and its mode unless the name says it."""
    name, mode = str(line.get("peer_name") or "peer"), str(line.get("peer_mode") or "")
    if mode and _letters(mode) not in _letters(name):  # "kip848" is named by "KIP-848"
        return f"{name} ({mode})"
    return name


def _letters(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _row_name(case: str) -> str:
    # "range-10k-fresh-vs-java" and "...-vs-kafka-python" are one row with two peers.
    return re.sub(r"-vs-[A-Za-z0-9_.-]+$", "", case)


def comparisons(lines: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Row]]:
    """(bench, unit) -> case -> its row, in the order the cases came."""
    charts: dict[tuple[str, str], dict[str, Row]] = {}
    for line in lines:
        ours, peer = _number(line.get("ours")), _number(line.get("peer"))
        if "case" not in line or line.get("error") or ours is None or peer is None:
            continue
        rows = charts.setdefault((str(line.get("bench")), str(line.get("unit"))), {})
        row = rows.setdefault(_row_name(str(line["case"])), Row(ours))
        row.peers[peer_label(line)] = (peer, _number(line.get("ratio")))
    return charts


def scale_points(lines: Iterable[dict[str, Any]]) -> dict[tuple[str, str], Points]:
    """(series, metric) -> [(size, value)] of the scale bench, growth lines first."""
    growth: dict[tuple[str, str], Points] = {}
    single: dict[tuple[str, str], Points] = {}
    for line in lines:
        if line.get("bench") != "scale" or "case" not in line:
            continue
        series, _, rest = str(line["case"]).partition("-")
        metric = rest.removesuffix("-growth")
        if rest.endswith("-growth") and isinstance(line.get("points"), list):
            growth[(series, metric)] = [
                (float(n), float(v))
                for n, v in line["points"]
                if v is not None  # unmeasured
            ]
        elif _number(line.get(series)) is not None and _number(line.get("ours")) is not None:
            single.setdefault((series, metric), []).append((line[series], line["ours"]))
    return {**single, **growth}


def _log_wanted(values: Sequence[float]) -> bool:
    positive = [value for value in values if value > 0]
    return bool(positive) and max(positive) / min(positive) > LOG_SPAN


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def comparison_chart(bench: str, unit: str, rows: dict[str, Row], path: Path) -> None:
    """Horizontal bars: per case ours and each peer; the ratio beside each peer's bar."""
    labels = list(dict.fromkeys(label for row in rows.values() for label in row.peers))
    colours = dict(zip(labels, PEER_COLOURS * (len(labels) // len(PEER_COLOURS) + 1), strict=False))
    bars = 1 + len(labels)
    height = 0.8 / bars
    figure = Figure(figsize=(10, 1.6 + 0.3 * bars * len(rows)), layout="constrained")
    axes = figure.add_subplot()
    values = []
    for index, row in enumerate(reversed(rows.values())):  # the first case on top
        top = index + 0.4 - height / 2
        axes.barh(top, row.ours, height, color=OURS_COLOUR)
        values.append(row.ours)
        for slot, label in enumerate(labels, start=1):
            if label not in row.peers:
                continue
            peer, ratio = row.peers[label]
            axes.barh(top - slot * height, peer, height, color=colours[label])
            values.append(peer)
            if ratio is not None:
                axes.annotate(f" {ratio:g}x", (peer, top - slot * height), va="center", fontsize=7)
    legend = [Patch(color=OURS_COLOUR, label="ours")]
    legend += [Patch(color=colours[label], label=f"peer: {label}") for label in labels]
    axes.set_yticks(range(len(rows)), list(reversed(rows)), fontsize=8)
    if _log_wanted(values):
        axes.set_xscale("log")
    better = "lower" if unit == "s" else "higher"
    axes.set_xlabel(f"{unit} ({better} is better; beside each peer: ratio, above 1 we are better)")
    axes.set_title(f"{bench}: ours against the peer")
    figure.legend(handles=legend, loc="outside lower center", fontsize=8)
    figure.savefig(path, dpi=100, metadata=_PNG_METADATA)


def scale_chart(series: str, curves: dict[str, Points], units: dict[str, str], path: Path) -> None:
    """Log-log curves of each metric against the series' size."""
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.add_subplot()
    for metric, points in curves.items():
        sizes, values = zip(*sorted(points), strict=True)
        axes.plot(sizes, values, marker="o", label=f"{metric} ({units.get(metric, 's')})")
    axes.set_xscale("log")
    if _log_wanted([v for points in curves.values() for _, v in points]):
        axes.set_yscale("log")
    axes.set_xlabel(SCALE_AXES.get(series, series))
    axes.set_ylabel("seconds (median)")
    axes.set_title(f"scale: cost as the {SCALE_AXES.get(series, series)} grow (no peer)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.savefig(path, dpi=100, metadata=_PNG_METADATA)


def plot(lines: list[dict[str, Any]], out: Path) -> list[Path]:
    """Write every chart the lines allow into ``out``; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    charts = comparisons(lines)
    units_of: dict[str, set[str]] = {}
    for bench, unit in charts:
        units_of.setdefault(bench, set()).add(unit)
    for (bench, unit), rows in charts.items():
        name = f"bench-{_slug(bench)}" + (f"-{_slug(unit)}" if len(units_of[bench]) > 1 else "")
        comparison_chart(bench, unit, rows, out / f"{name}.png")
        written.append(out / f"{name}.png")
    points = scale_points(lines)
    units = {}  # metric -> its unit, from the per-point lines
    for line in lines:
        case = str(line.get("case", ""))
        if line.get("bench") == "scale" and "-" in case and not case.endswith("-growth"):
            units[case.split("-")[1]] = str(line.get("unit"))
    for series, metrics in SCALE_CURVES.items():
        curves = {m: points[(series, m)] for m in metrics if points.get((series, m))}
        if curves:
            scale_chart(series, curves, units, out / f"bench-scale-{series}.png")
            written.append(out / f"bench-scale-{series}.png")
    return written


def main(argv: list[str] | None = None) -> int:
    """Read the files (or stdin), write the charts, print their paths."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="JSON-lines files (default: stdin)")
    parser.add_argument("--out", type=Path, default=Path("docs/img"), help="folder of the PNGs")
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.files if not path.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    sources = [path.read_text().splitlines() for path in args.files] or [sys.stdin]
    lines, skipped = read_lines(sources)
    written = plot(lines, args.out)
    if skipped:
        print(f"skipped {skipped} line(s) that are no JSON object", file=sys.stderr)
    if not written:
        print("no case with both figures and no scale points: no chart written", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
