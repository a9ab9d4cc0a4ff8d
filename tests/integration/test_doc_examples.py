"""The examples of docs/consumer.md and docs/async.md run, as written, against the session's broker.

Each example is run in a fresh Python process after substitutions that keep it what a reader
would type: the session broker for ``127.0.0.1:9092``, fresh topics for ``orders`` and
``stock`` (with data), a fresh group for each ``group_id``, and ``start_position="earliest"``
so that the data written before the example starts is read (the default is TubeMQ's latest).
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from client_balance import admin as cluster
from tests.integration.workers import REPO, produce

pytestmark = pytest.mark.integration

SECTIONS = [
    ("consumer.md", "## Pinned partitions"),
    ("consumer.md", "## Assignment callbacks"),
    ("consumer.md", "## Lifecycle hooks"),
    ("consumer.md", "## Exclusive ownership and group checks"),
    ("async.md", "## Consume a topic"),
    ("async.md", "## Cancellation"),
    ("async.md", "## Several nodes in one process"),
]


def _example_of(doc: str, section: str) -> str:
    text = (REPO / "docs" / doc).read_text()
    body = text[text.index(section) :]
    body = body[: body.find("\n## ", 1)]
    # The section's first example at the margin: one indented in a list item is a fragment.
    match = re.search(r"^```python\n(.*?)^```", body, re.DOTALL | re.MULTILINE)
    assert match is not None, f"{section} has no python example"
    return match.group(1)


@pytest.mark.parametrize(("doc", "section"), SECTIONS)
def test_the_example_runs(kafka_bootstrap: str, tmp_path: Path, doc: str, section: str) -> None:
    """The section's example exits 0 and prints what its comments say."""
    suffix = uuid.uuid4().hex[:8]
    orders, stock = f"orders-{suffix}", f"stock-{suffix}"
    cluster.create_topics(kafka_bootstrap, {orders: 4, stock: 2})
    produce(kafka_bootstrap, orders, 1400 * 4, partitions=4)
    produce(kafka_bootstrap, stock, 20, partitions=2)
    code = _example_of(doc, section)
    code = code.replace("127.0.0.1:9092", kafka_bootstrap)
    code = re.sub(r'"orders', f'"{orders}', code)
    code = re.sub(r'"stock', f'"{stock}', code)
    code = re.sub(r'group_id="([^"]+)"', rf'group_id="\1-{suffix}"', code)
    if "start_position=" not in code:  # examples that say so read what is there already
        code = code.replace(
            "ClientBalanceSettings(", 'ClientBalanceSettings(start_position="earliest", '
        )
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout
    if section == "## Pinned partitions":
        key, start = printed.split()
        assert key.split(":", 1)[1].startswith(orders)
        assert not key.endswith(f"{orders}:0") or start == "1200"
    elif section == "## Assignment callbacks":
        assert printed.split()[0].split(":")[1] == orders
    elif section == "## Lifecycle hooks":
        assert (tmp_path / "state").is_dir()
        assert list((tmp_path / "state").iterdir())
    elif section == "## Exclusive ownership and group checks":
        assert printed.split()[0] == "425"
    elif section == "## Cancellation":
        key, current = printed.split()
        assert key.split(":", 1)[1].startswith(orders)
        assert int(current) > 0
    else:  # the async consumers stop after 1000 messages, at a batch's end
        assert int(printed) >= 1000
