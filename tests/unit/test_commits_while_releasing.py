"""A partition being released is committed by its release alone, after ``on_revoked`` (fakes).

The integration test on the real broker is
``tests/integration/test_hooks.py::test_a_commit_made_while_on_revoked_writes_leaves_that_partition_to_its_release``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance.consumer._buffers import HeldPartition
from client_balance.consumer._commits import Committer
from client_balance.errors import ClientBalanceError
from client_balance.keys import TopicPartition


class _Recorder:
    """A commit client that answers at once and keeps what each commit sent."""

    def __init__(self) -> None:
        self.commits: list[dict[int, int]] = []

    def commit(
        self, *, offsets: list[KafkaTopicPartition], asynchronous: bool
    ) -> list[KafkaTopicPartition]:
        self.commits.append({tp.partition: tp.offset for tp in offsets})
        return []

    def poll(self, timeout: float) -> None:
        """Nothing to serve."""

    def close(self) -> None:
        """Nothing held."""


def _no_failure(error: ClientBalanceError) -> None:
    pytest.fail(f"a commit failed: {error}")


_Setup = tuple[HeldPartition, HeldPartition, _Recorder, Committer]


@pytest.fixture
def revoking_and_kept() -> Iterator[_Setup]:
    """orders:0 in its release (on_revoked writing), orders:1 held on; both confirmed past."""
    revoking = HeldPartition(TopicPartition("orders", 0), None, confirmed=9, committed=3)
    revoking.releasing = True
    kept = HeldPartition(TopicPartition("orders", 1), None, confirmed=8, committed=2)
    client = _Recorder()
    commits = Committer(
        lambda: client, "g", 0.0, threading.Condition(), held=lambda: [revoking, kept]
    )
    yield revoking, kept, client, commits
    commits.close()


def test_the_interval_commit_leaves_a_partition_in_its_release_alone(
    revoking_and_kept: _Setup,
) -> None:
    """The interval commits orders:1 only; orders:0 keeps its last commit."""
    revoking, kept, client, commits = revoking_and_kept
    commits.on_interval(_no_failure)
    assert client.commits == [{1: 8}]
    assert (revoking.committed, kept.committed) == (3, 8)


def test_a_commit_of_everything_due_leaves_a_partition_in_its_release_alone(
    revoking_and_kept: _Setup,
) -> None:
    """commit() (``commit_due``) commits orders:1 only."""
    revoking, kept, client, commits = revoking_and_kept
    commits.commit_due([revoking, kept])
    assert client.commits == [{1: 8}]


def test_a_sync_confirm_during_the_release_is_not_committed_by_the_confirm(
    revoking_and_kept: _Setup,
) -> None:
    """The confirm says committed=False: the release's final commit, after the hook, makes it."""
    revoking, _, client, commits = revoking_and_kept
    assert commits.commit_confirmed(revoking) is False
    assert client.commits == []  # nothing was sent
    assert revoking.committed == 3


def test_the_release_itself_commits_its_partition(revoking_and_kept: _Setup) -> None:
    """commit_held, the release's final commit once on_revoked returned, commits orders:0."""
    revoking, _, client, commits = revoking_and_kept
    assert commits.commit_held([revoking]) is True
    assert client.commits == [{0: 9}]
    assert revoking.committed == 9
