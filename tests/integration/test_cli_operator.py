"""The operator commands against a real broker: reap, reset-offsets and status of live groups."""

from __future__ import annotations

import contextlib
import json
import sys
import time
import types
import uuid
import zlib
from collections.abc import Callable, Iterator
from unittest import mock

import pytest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, _kafka
from client_balance.admin import GroupView, reap_dead_members
from client_balance.cli import main as cli_main
from client_balance.errors import KafkaClientError
from client_balance.membership import MemberReport, StatusWriter, member_key

STATUS_TOPIC = "__client_balance_status"
_SECRET = "s3cret-s3cret-s3cret"  # noqa: S105 - a test's signing key


@contextlib.contextmanager
def _host_clock_ahead(seconds: float) -> Iterator[None]:
    """The operator tools' view of this host's clock runs ``seconds`` ahead of the broker's."""
    real = time.time
    names = {name: getattr(time, name) for name in dir(time) if not name.startswith("_")}
    fast = types.SimpleNamespace(**{**names, "time": lambda: real() + seconds})
    with contextlib.ExitStack() as stack:
        for name, module in list(sys.modules.items()):
            if name.startswith(("client_balance.admin", "client_balance.cli")) and isinstance(
                getattr(module, "time", None), types.ModuleType
            ):
                stack.enter_context(mock.patch.object(module, "time", fast))
        yield


def _holding_member(
    make: Callable[..., ClientBalanceConsumer], topic: str
) -> ClientBalanceConsumer:
    member = make()
    member.start([topic], source_count=1, node_id=0)
    assert member.is_partitions_ready(20)
    return member


def test_reap_with_a_fast_host_clock_leaves_a_live_member(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Reap judges leases by the broker's time: a host clock 60 s fast reaps no live member."""
    topic = new_topic(partitions=2)
    member = _holding_member(make_member, topic)
    group = member.settings.group_id
    with _host_clock_ahead(60):
        rc = cli_main(
            [
                "reap",
                "--group",
                group,
                "--older-than-s",
                "0",
                "--bootstrap-servers",
                kafka_bootstrap,
            ]
        )
    assert (rc, capsys.readouterr().out) == (0, "")
    settings = ClientBalanceSettings(bootstrap_servers=kafka_bootstrap, group_id=group)
    view = GroupView.load(settings, group, broker_clock=True)
    assert [m.consumer_id for m in view.live_members] == [member.consumer_id]
    assert all(p.holder == member.consumer_id for p in view.partitions)


def test_reset_offsets_with_a_fast_host_clock_refuses_a_live_group(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Reset-offsets judges leases by the broker's time: a host clock 60 s fast still refuses."""
    topic = new_topic(partitions=1)
    member = _holding_member(make_member, topic)
    group = member.settings.group_id
    argv = ["reset-offsets", "--group", group, "--to", "earliest"]
    with _host_clock_ahead(60):
        rc = cli_main([*argv, "--bootstrap-servers", kafka_bootstrap])
    captured = capsys.readouterr()
    assert (rc, captured.out) == (1, "")
    assert "has live members" in captured.err


def test_the_clock_probe_is_no_record_of_a_signed_group(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """With status_secret, reap's time probe leaves live members and counts as no skipped record."""
    topic = new_topic(partitions=1)
    member = _holding_member(lambda: make_member(status_secret=_SECRET), topic)
    group = member.settings.group_id
    settings = ClientBalanceSettings(
        bootstrap_servers=kafka_bootstrap, group_id=group, status_secret=_SECRET
    )
    with _host_clock_ahead(60):
        assert reap_dead_members(settings, group, older_than_s=0) == []
    view = GroupView.load(settings, group, broker_clock=True)
    assert [m.consumer_id for m in view.live_members] == [member.consumer_id]
    assert (view.skipped_records, view.clock) == (0, "broker")


def test_reap_without_the_brokers_time_fails_naming_why(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """A probe the broker refuses (no Write ACL) fails reap: never this host's clock instead."""
    topic = new_topic(partitions=1)
    member = _holding_member(make_member, topic)
    refused = KafkaClientError(
        "Write refused: TOPIC_AUTHORIZATION_FAILED", kafka_code=29,
        kafka_name="TOPIC_AUTHORIZATION_FAILED",
    )  # fmt: skip
    settings = member.settings
    with (
        mock.patch("client_balance.membership.StatusWriter.write", side_effect=refused),
        pytest.raises(KafkaClientError, match=r"broker's time.*TOPIC_AUTHORIZATION_FAILED"),
    ):
        reap_dead_members(settings, settings.group_id, older_than_s=0)


def _group_off_partition_0(prefix: str) -> str:
    """A group that 4 status partitions put on another partition than 1 does."""
    return next(
        group
        for group in (f"{prefix}-{uuid.uuid4().hex[:8]}" for _ in range(100))
        if zlib.crc32(group.encode()) % 4 != 0
    )


def _member_on_4_status_partitions(
    make: Callable[..., ClientBalanceConsumer], new_topic: Callable[..., str], prefix: str
) -> ClientBalanceConsumer:
    member = make(
        group_id=_group_off_partition_0(prefix),
        status_topic=f"status-sp4-{uuid.uuid4().hex[:8]}",
        status_topic_partitions=4,
    )
    member.start([new_topic(partitions=1)], source_count=1, node_id=0)
    assert member.is_partitions_ready(20)
    return member


def test_reset_offsets_finds_a_group_on_another_status_partition(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Members on status_topic_partitions=4 are seen by status and refuse reset-offsets."""
    member = _member_on_4_status_partitions(make_member, new_topic, "sp")
    group, status_topic = member.settings.group_id, member.settings.status_topic
    common = ["--group", group, "--bootstrap-servers", kafka_bootstrap]
    common += ["--status-topic", status_topic]
    assert cli_main(["status", "--json", *common]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [m["consumer_id"] for m in shown["members"] if m["live"]] == [member.consumer_id]
    assert cli_main(["reset-offsets", "--to", "earliest", *common]) == 1
    captured = capsys.readouterr()
    assert (captured.out, "has live members" in captured.err) == ("", True)


def test_a_group_on_two_status_partitions_needs_the_setting_named(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Records on two candidate partitions: an error naming the flag, until it is given."""
    member = _member_on_4_status_partitions(make_member, new_topic, "sp2")
    group, status_topic = member.settings.group_id, member.settings.status_topic
    ghost = MemberReport(
        consumer_id="ghost", host="gone", pid=1, node_id=-1, source_count=-1, topics=("t",),
        strategy="modulo", version="test", lease_timeout_s=1.0, mode="manual",
    )  # fmt: skip
    writer = StatusWriter(kafka_bootstrap, status_topic, 0, kafka={}, timeout_s=10)
    writer.write([(member_key(group, "ghost"), ghost.encode())])  # left by a member on 1
    writer.close()
    common = ["--group", group, "--bootstrap-servers", kafka_bootstrap]
    common += ["--status-topic", status_topic, "--json"]
    assert cli_main(["status", *common]) == 1
    assert "--status-topic-partitions" in capsys.readouterr().err
    for count, expected in (("1", "ghost"), ("4", member.consumer_id)):
        assert cli_main(["status", *common, "--status-topic-partitions", count]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert [m["consumer_id"] for m in shown["members"]] == [expected]


def test_no_escape_from_a_forged_status_record_reaches_stdout(
    kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report whose host, version and id carry terminal sequences shows them escaped."""
    evil = "\x1b]2;owned\x1b\\\x1b[2J\x1b[H"
    group, forger = f"esc-{uuid.uuid4().hex[:8]}", "c" + evil
    common = ["--group", group, "--bootstrap-servers", kafka_bootstrap]
    assert cli_main(["status", *common]) == 0  # makes the status topic
    report = MemberReport(
        consumer_id=forger, host="h" + evil, pid=1, node_id=0, source_count=1, topics=("t",),
        strategy="modulo" + evil, version="1" + evil, lease_timeout_s=30.0,
    )  # fmt: skip
    writer = StatusWriter(kafka_bootstrap, STATUS_TOPIC, 0, kafka={}, timeout_s=10)
    writer.write([(member_key(group, forger), report.encode())])
    writer.close()
    capsys.readouterr()
    assert cli_main(["status", *common]) == 0
    assert cli_main(["groups", "--bootstrap-servers", kafka_bootstrap]) == 0
    out = capsys.readouterr().out
    assert ("\x1b" in out, "h\\x1b]2;owned" in out) == (False, True)


def test_operator_reads_never_make_a_missing_status_topic(
    kafka_bootstrap: str, new_topic: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The status and groups commands see nobody on a missing status topic, and never make it.

    reset-offsets refuses it, naming it: a mistyped --status-topic showed no live member and
    let a reset act on a running group. The view made the topic, with 1 partition, which
    refused members started later with more (the review of 2026-11-29, third round).
    """
    topic = new_topic(partitions=1)
    missing = f"status-never-made-{uuid.uuid4().hex[:8]}"
    common = ["--bootstrap-servers", kafka_bootstrap, "--status-topic", missing]
    assert cli_main(["status", "--json", "--group", "g", *common]) == 0
    assert json.loads(capsys.readouterr().out)["members"] == []
    assert cli_main(["groups", *common]) == 0
    reset = ["reset-offsets", "--group", "g", "--to", "earliest", "--topic", topic, *common]
    assert cli_main(reset) == 1
    assert f"status topic '{missing}' does not exist" in capsys.readouterr().err
    assert missing not in _kafka.admin_client(kafka_bootstrap).list_topics(timeout=10).topics
