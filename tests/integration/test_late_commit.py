"""A commit held by the client while its member was cut off, landing once it is back.

librdkafka holds a commit while the group's coordinator is out of reach and sends it when the
network returns, by which time another member may own the partition and have committed past
it. The late commit is not counted as made, and the new owner commits over it.
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid

import pytest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, ConfirmResult, admin
from client_balance.broker import LocalKafka
from tests.integration.proxy import TcpProxy
from tests.integration.workers import committed, highs, produce, wait_until

_LEASE_S = 6.0
_MESSAGES = 200


def _settings(bootstrap: str, group: str) -> ClientBalanceSettings:
    return ClientBalanceSettings(
        bootstrap_servers=bootstrap, group_id=group, start_position="earliest",
        commit="sync", batch_max_messages=10, lease_timeout_s=_LEASE_S,
        report_interval_s=1.0, reconcile_interval_s=1.0, request_timeout_s=2.0,
    )  # fmt: skip


def _consume_to_end(consumer: ClientBalanceConsumer, high: int) -> None:
    """Take and confirm batches until one ends at ``high``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        batch = consumer.get_message(timeout_s=5)
        if consumer.confirm(batch.confirm_context).current >= high:
            return
    pytest.fail(f"the new owner did not reach the end ({high}) within 60 s")


@pytest.mark.timeout(240)
def test_a_commit_held_while_cut_off_does_not_count_and_the_new_owner_commits_over_it() -> None:
    """A confirm made just as the network goes is held by librdkafka, and lands after the cut.

    The confirm gives its commit up after ``request_timeout_s`` and says its position was not
    committed (it waited for the whole cut before), and once the cut member reports itself
    back, the new owner has committed its own position over the late one within a few seconds
    (before that fix the group stayed at the cut member's position).
    """
    with LocalKafka(proxied=True) as kafka:
        ((listener, advertised),) = kafka.proxied_listeners.values()
        proxy = TcpProxy(advertised, listener)
        try:
            _run(kafka.bootstrap_servers, f"127.0.0.1:{advertised}", proxy)
        finally:
            proxy.close()


def _run(direct: str, proxied: str, proxy: TcpProxy) -> None:
    topic, group = f"late-{uuid.uuid4().hex[:8]}", f"late-{uuid.uuid4().hex[:8]}"
    admin.create_topics(direct, {topic: 1})
    produce(direct, topic, _MESSAGES, partitions=1)
    high = highs(direct, topic, 1)[0]
    cut = ClientBalanceConsumer(_settings(proxied, group))
    other = ClientBalanceConsumer(_settings(direct, group))
    with cut, other, concurrent.futures.ThreadPoolExecutor(1) as pool:
        cut.start([topic], mode="elastic")
        batch = cut.get_message(timeout_s=30)
        proxy.cut()
        late = pool.submit(cut.confirm, batch.confirm_context)  # held: no coordinator
        answer: ConfirmResult = late.result(timeout=30)  # request_timeout_s, not the whole cut
        assert not answer.committed, "a commit without an answer counted as made"
        assert answer.current < high  # so a late commit of it would go back
        commits = cut._run.fetcher.commits  # type: ignore[union-attr]  # the test looks inside
        assert not commits.settled(), "the confirm's commit was not held: the test shows nothing"
        other.start([topic], mode="elastic")
        wait_until(
            lambda: other.reconcile_now(10.0) and bool(other.registered_partitions()),
            _LEASE_S * 4, "the other member taking the partition over", 0.5,
        )  # fmt: skip
        _consume_to_end(other, high)
        assert committed(direct, group, topic, 1)[0] == high
        proxy.restore()
        # The held commit goes out now, and its answer comes: only then does the check below
        # show the new owner's commit over it (before this wait it passed at once, untested).
        wait_until(commits.settled, 30, "the held commit's answer", 0.1)
        wait_until(
            lambda: committed(direct, group, topic, 1)[0] == high, 30,
            f"the group's committed offset back at the new owner's {high}", 0.5,
        )  # fmt: skip
