"""The diagram of docs/concepts.md: workers, the status topic, Kafka's offsets, Spark, operators.

Regenerate the PNG beside this file after editing it (matplotlib, no display needed):

    .venv/bin/python docs/img/concepts.py

It writes docs/img/concepts.png; commit both.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

OUT = Path(__file__).with_suffix(".png")
OWNERS = ("#4c72b0", "#dd8452", "#55a868")
"""One colour per worker: a partition has its holder's colour."""
GREY, INK, PALE = "#8c8c8c", "#222222", "#f4f4f4"


def box(axes: Axes, where: tuple[float, float, float, float], colour: str, **kw: object) -> None:
    """A rounded box: ``where`` is its lower left corner, width and height."""
    x, y, w, h = where
    axes.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.12",
            facecolor=kw.get("fill", "white"),
            edgecolor=colour,
            linewidth=1.6,
        )
    )


def text(
    axes: Axes, x: float, y: float, words: str, *, size: float = 9, colour: str = INK, **kw: object
) -> None:
    """Centred text."""
    axes.text(x, y, words, ha="center", va="center", fontsize=size, color=colour, **kw)  # type: ignore[arg-type]


def arrow(
    axes: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    *,
    colour: str = GREY,
    bend: float = 0.0,
    both: bool = False,
) -> None:
    """An arrow from ``start`` to ``end`` (curved by ``bend``)."""
    axes.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="<|-|>" if both else "-|>",
            mutation_scale=12,
            connectionstyle=f"arc3,rad={bend}",
            color=colour,
            linewidth=1.3,
        )
    )


def draw() -> Figure:
    """The whole picture."""
    figure = Figure(figsize=(13, 7.4))
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, 13)
    axes.set_ylim(0, 7.4)
    axes.axis("off")

    # The workers: processes of one group, each with its reconcile thread.
    box(axes, (0.2, 1.45, 2.9, 5.75), GREY, fill=PALE)
    text(axes, 1.65, 6.95, "workers of group G", size=10, weight="bold")
    for index in range(3):
        y = 5.15 - index * 1.55
        box(axes, (0.4, y, 2.5, 1.3), OWNERS[index])
        text(axes, 1.65, y + 1.0, f"worker {index}", size=10, weight="bold", colour=OWNERS[index])
        text(axes, 1.65, y + 0.6, f"node {index} of 3 (or elastic)", size=8)
        text(axes, 1.65, y + 0.25, f"holds p{index}, p{index + 3}", size=8)
    text(
        axes,
        1.65,
        1.8,
        "reconcile round every 10 s:\ntarget, release, claim, register",
        size=8,
        style="italic",
    )

    # Kafka: the data topic, the status topic, the group's committed offsets.
    box(axes, (4.6, 1.45, 4.6, 5.75), GREY, fill=PALE)
    text(axes, 6.9, 6.95, "Kafka (no group join, no rebalance)", size=10, weight="bold")
    box(axes, (4.8, 5.25, 4.2, 1.4), GREY)
    text(axes, 6.9, 6.35, "data topic orders")
    for number in range(6):
        x = 4.98 + number * 0.68
        box(axes, (x, 5.4, 0.5, 0.6), OWNERS[number % 3], fill=OWNERS[number % 3])
        text(axes, x + 0.25, 5.7, f"p{number}", size=9, weight="bold", colour="white")
    box(axes, (4.8, 3.05, 4.2, 1.85), GREY)
    text(axes, 6.9, 4.6, "status topic (compacted)", weight="bold")
    text(axes, 6.9, 4.05, "report: who, mode, lease,\npositions held (every 10 s)", size=8)
    text(axes, 6.9, 3.4, "claim: before registering a\npartition; withdrawn after release", size=8)
    box(axes, (4.8, 1.65, 4.2, 1.05), GREY)
    text(axes, 6.9, 2.4, "__consumer_offsets", weight="bold")
    text(axes, 6.9, 1.95, "G's committed offsets (next to read)", size=8)

    # What the workers do with each.
    for y, words, both in (
        (5.85, "fetch their partitions\n(assign-only)", False),
        (3.95, "write reports + claims;\nread every record back:\nsame verdicts everywhere", True),
        (2.15, "commit confirmed\noffsets; resume there", True),
    ):
        arrow(axes, (3.15, y), (4.75, y), colour=INK, both=both)
        text(axes, 3.9, y + 0.42 + 0.12 * words.count("\n"), words, size=7.5)

    # Spark and the operator.
    box(axes, (10.0, 4.35, 2.8, 2.85), "#8172b2")
    text(axes, 11.4, 6.95, "Spark", size=10, weight="bold", colour="#8172b2")
    batch = "batch read: its tasks are\nthe nodes; refused where\nlive workers hold data"
    text(axes, 11.4, 6.1, batch, size=8)
    query = "streaming query: a member\nof mode spark (claims, pins,\ncommits each batch)"
    text(axes, 11.4, 4.95, query, size=8)
    arrow(axes, (9.95, 5.95), (9.05, 5.95), colour="#8172b2")
    arrow(axes, (9.95, 4.8), (9.05, 4.3), colour="#8172b2", both=True)
    arrow(axes, (9.95, 4.5), (9.05, 2.3), colour="#8172b2", bend=-0.2)
    box(axes, (10.0, 1.45, 2.8, 2.45), "#937860")
    text(axes, 11.4, 3.65, "operator", size=10, weight="bold", colour="#937860")
    text(
        axes,
        11.4,
        2.7,
        "client-balance status\nclient-balance lag\nclient-balance tail",
        size=8,
        family="monospace",
    )
    arrow(axes, (9.95, 3.3), (9.05, 3.6), colour="#937860")
    arrow(axes, (9.95, 2.2), (9.05, 2.2), colour="#937860")

    # The rules, a line each.
    rules = (
        "lease: a member is alive while its last record is at most lease_timeout_s (30 s) "
        "older than the record judged, by the broker's clock",
        "a claim wins unless a live member holds the partition, so no partition is fetched by "
        "two live members; a killed member's claims lapse with its lease",
        "modes: node = source_count nodes, each the strategy's share   elastic = the live "
        "elastic members share by sticky   spark = a streaming query",
    )
    for index, rule in enumerate(rules):
        axes.text(0.25, 1.05 - index * 0.35, rule, fontsize=8.5, color=INK)
    return figure


def main() -> None:
    """Write the PNG."""
    draw().savefig(OUT, dpi=100, metadata={"Software": None})
    print(OUT)


if __name__ == "__main__":
    main()
