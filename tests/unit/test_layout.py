"""The package keeps the layout docs/architecture.md draws: one home per concern, small parts."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.source_scan import PACKAGE, calls, imports

MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 300


def _part(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0]


def _importers(prefix: str) -> set[str]:
    return {
        str(path.relative_to(PACKAGE))
        for path in MODULES
        if any(name == prefix or name.startswith(prefix + ".") for name in imports(path))
    }


def test_only_the_kafka_layer_imports_confluent_kafka() -> None:
    """Every confluent-kafka import is under _kafka/, so clients are built in one place."""
    assert {m for m in _importers("confluent_kafka") if not m.startswith("_kafka/")} == set()


def test_only_spark_imports_pyspark() -> None:
    """Pyspark (an optional extra) is imported by spark/ alone."""
    assert {m for m in _importers("pyspark") if not m.startswith("spark/")} == set()


def test_strategies_know_nothing_of_kafka() -> None:
    """strategies/ imports neither the Kafka client nor the package's Kafka-facing parts."""
    kafka_facing = ("confluent_kafka", "client_balance._kafka", "client_balance.consumer",
                    "client_balance.membership", "client_balance.admin")  # fmt: skip
    for path in MODULES:
        if _part(path) == "strategies":
            bad = {n for n in imports(path) if n.startswith(kafka_facing)}
            assert bad == set(), f"{path.name} imports {bad}"


def test_every_retry_is_a_tenacity_policy() -> None:
    """Tenacity is used, and only by the Kafka layer's declared policies."""
    assert _importers("tenacity") == {"_kafka/_retry.py"}


def test_nothing_prints_outside_the_cli() -> None:
    """The library writes to no stream itself: print() and rich appear only in cli/."""
    for path in MODULES:
        if _part(path) == "cli":
            continue
        prints = calls(path, "print")
        assert prints == [], f"{path} calls print() at lines {prints}"
        assert not any(name.startswith("rich") for name in imports(path)), path


def test_importing_the_package_leaves_the_check_helpers_modules_out() -> None:
    """``import client_balance`` loads neither tempfile nor secrets: only a helper needs them.

    Every module an import loads stays in the application's process, and the collector walks
    its objects at each full collection of a consumer's loop (docs/benchmarks.md).
    """
    code = (
        "import sys, client_balance, client_balance.strategies; "
        "print(sorted(m for m in ('tempfile', 'secrets', 'shutil') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_and_classes_stay_small(path: Path) -> None:
    """No module over 400 lines, no class over 300."""
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            assert length <= MAX_CLASS_LINES, f"class {node.name} has {length} lines"
