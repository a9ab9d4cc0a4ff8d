"""The seed scenarios of ``tests/data/seed_scenarios.json`` as typed test inputs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from client_balance.keys import TopicPartition
from client_balance.strategies import Member

SCENARIOS_PATH = Path(__file__).resolve().parent / "data" / "seed_scenarios.json"


def parse_partition(text: str) -> TopicPartition:
    """``"t0-1"`` (the scenarios' notation) -> TopicPartition("t0", 1)."""
    topic, _, number = text.rpartition("-")
    return TopicPartition(topic, int(number))


@dataclass(frozen=True)
class SeedScenario:
    """One scenario: input, Java's answer and how to check it."""

    id: str
    strategy: str
    topics: dict[str, int]
    members: list[Member]
    expected: dict[str, set[TopicPartition]]
    check: str
    note: str


def load_seed_scenarios() -> list[SeedScenario]:
    """Every scenario of the seed documents."""
    data: dict[str, Any] = json.loads(SCENARIOS_PATH.read_text())
    scenarios = []
    for raw in data["scenarios"]:
        members = [
            Member(
                member_id,
                spec["topics"],
                owned=[parse_partition(p) for p in spec.get("owned", [])],
                generation=spec.get("generation", -1),
            )
            for member_id, spec in raw["members"].items()
        ]
        expected = {m: {parse_partition(p) for p in ps} for m, ps in raw["expected"].items()}
        scenarios.append(
            SeedScenario(
                id=raw["id"],
                strategy=raw["strategy"],
                topics=raw["topics"],
                members=members,
                expected=expected,
                check=raw["check"],
                note=raw.get("note", ""),
            )
        )
    return scenarios
