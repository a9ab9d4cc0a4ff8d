"""Fetching ahead of the claim (consumer/_starts.py) never delivers or commits what it may not."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from client_balance import ClientBalanceConsumer, NoMessageError
from client_balance.membership import StatusReader, parse_key, status_partition
from client_balance.strategies import get_strategy
from client_balance.strategies._nodes import node_share
from tests.integration.workers import produce, wait_until

pytestmark = pytest.mark.integration


def test_a_partition_another_member_pinned_is_fetched_ahead_but_never_delivered(
    caplog: pytest.LogCaptureFixture,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """Node 0 expects its one partition and fetches it while joining; node 1's pin keeps it out.

    Node 0 delivers nothing of it, commits nothing for it, and node 1 then reads all of it
    from offset 0: the messages node 0 fetched ahead went nowhere.
    """
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 40, partitions=2)
    # Which partition is node 0's depends on the topic's name (the default strategy hashes it).
    (share0,) = node_share(get_strategy("modulo"), {topic: 2}, 2, 0)
    node1 = make_member(commit="sync")
    node1.start([topic], 2, 1, pinned={f"{topic}:{share0.partition}": 0})
    assigned: list[str] = []
    node0 = ClientBalanceConsumer(node1.settings, on_assigned=assigned.extend)
    try:
        with caplog.at_level(logging.DEBUG, logger="client_balance.fetch"):
            node0.start([topic], 2, 0)
        ahead = [r.getMessage() for r in caplog.records if "ahead" in r.getMessage()]
        assert ahead == ["fetching ahead of the claim"]
        with pytest.raises(NoMessageError) as nothing:
            node0.get_message(timeout_s=3.0)
        assert nothing.value.code == NoMessageError.NO_PARTITION
        assert node0.registered_partitions() == set()
    finally:
        node0.shutdown()
    assert assigned == []
    offsets: dict[int, list[int]] = {0: [], 1: []}
    wait_until(lambda: len(node1.registered_partitions()) == 2, 30, "node 1 holds both")
    while len(offsets[0]) + len(offsets[1]) < 40:
        batch = node1.get_message(timeout_s=30)
        offsets[batch.partition] += [m.offset() or 0 for m in batch.messages]
        node1.confirm(batch.confirm_context)
    assert offsets[0] == list(range(20))
    assert offsets[1] == list(range(20))


def test_a_node_claims_its_share_in_the_write_of_its_join(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """Its claims follow its join report at once, and its first round writes none of its own."""
    topic = new_topic(partitions=4)
    node = make_member()
    node.start([topic], 1, 0)
    settings = node.settings
    try:
        wait_until(lambda: len(node.registered_partitions()) == 4, 30, "all four registered")
        partition = status_partition(settings.group_id, settings.status_topic_partitions)
        reader = StatusReader(
            kafka_bootstrap, settings.status_topic, partition, settings.group_id,
            kafka={}, timeout_s=10.0, follow=False, keep_records=True,
        )  # fmt: skip
        try:
            reader.read_to_end(10.0)
            assert reader.records is not None
            mine = [
                (parsed[0], parsed[3], value, (offset, stamp_ms))
                for key, value, offset, stamp_ms in reader.records
                if (parsed := parse_key(key)) is not None and parsed[1] == settings.group_id
            ]
        finally:
            reader.close()
    finally:
        node.shutdown()
    join, first_claims = mine[0], mine[1:5]
    assert join[0] == "member"
    assert [kind for kind, *_ in first_claims] == ["claim"] * 4
    assert {tp.partition for _, tp, *_ in first_claims if tp is not None} == {0, 1, 2, 3}
    # One write: consecutive offsets, one broker time (the broker stamps a whole batch).
    offset, stamp_ms = join[3]
    assert [at for *_, at in first_claims] == [(offset + n, stamp_ms) for n in range(1, 5)]
    claims = [record for record in mine if record[0] == "claim" and record[2] is not None]
    assert len(claims) == 4  # none written again by the round that registered them


def test_the_rest_of_a_share_assigned_paused_at_the_claim_is_read_whole(
    caplog: pytest.LogCaptureFixture,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """A node of one: one partition fetched ahead, the other seven paused until its first batch.

    On a real broker the pause made before the assign holds, and the resume lets every
    partition be read from offset 0 to its end, each message once (consumer/_starts.py).
    """
    topic = new_topic(partitions=8)
    produce(kafka_bootstrap, topic, 8 * 300, partitions=8)
    node = make_member(batch_max_messages=100)
    with caplog.at_level(logging.DEBUG, logger="client_balance.fetch"):
        node.start([topic], 1, 0)
        wait_until(lambda: len(node.registered_partitions()) == 8, 30, "all eight registered")
    paused = [r for r in caplog.records if r.getMessage() == "held paused until the first batch"]
    assert len(paused) == 1
    offsets: dict[int, list[int]] = {partition: [] for partition in range(8)}
    try:
        while sum(map(len, offsets.values())) < 8 * 300:
            batch = node.get_message(timeout_s=30)
            offsets[batch.partition] += [m.offset() or 0 for m in batch.messages]
            node.confirm(batch.confirm_context)
    finally:
        node.shutdown()
    assert offsets == {partition: list(range(300)) for partition in range(8)}
