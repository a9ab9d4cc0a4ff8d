"""Releases on the real broker: the partitions a release lets go are committed in one request."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, PartitionKey
from client_balance._kafka import commit_runs
from client_balance.consumer import _commit_sender
from tests.integration.workers import committed, produce

pytestmark = pytest.mark.integration

Commits = list[dict[int, int]]


@pytest.fixture
def commits_sent(monkeypatch: pytest.MonkeyPatch) -> Commits:
    """Every commit the consumer's commit client sends, as partition -> offset, in order.

    Only the commit client's own thread sends, one commit at a time: no lock is needed.
    """
    sent: Commits = []

    def recorded(client: Any, group_id: str, offsets: Sequence[Any]) -> Iterator[int]:
        sent.append({offset.partition: offset.offset for offset in offsets})
        return commit_runs(client, group_id, offsets)

    monkeypatch.setattr(_commit_sender, "commit_runs", recorded)
    return sent


def test_a_shutdown_commits_every_partition_it_releases_in_one_commit(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
    commits_sent: Commits,
) -> None:
    """Four partitions confirmed, then shutdown(): one commit of all four, not one each.

    Each commit waits for its answer before the next is sent, so a member that let go of its
    partitions one commit at a time kept the next holder waiting a round trip per partition.
    """
    topic = new_topic(partitions=4)
    produce(kafka_bootstrap, topic, 40, partitions=4)
    settings = kafka_settings(commit="interval", commit_interval_s=3600.0)
    confirmed: dict[int, int] = {}
    with ClientBalanceConsumer(settings) as consumer:
        consumer.start([topic], 1, 0)
        while len(confirmed) < 4:
            batch = consumer.get_message(timeout_s=30)
            consumer.confirm(batch.confirm_context)
            confirmed[PartitionKey.parse(batch.key).partition] = batch.end_offset
        commits_sent.clear()  # the start's commit of where each partition begins
        consumer.shutdown()
    assert commits_sent == [confirmed]
    assert committed(kafka_bootstrap, settings.group_id, topic, 4) == confirmed
