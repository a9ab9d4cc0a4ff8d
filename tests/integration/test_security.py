"""The SDK against a real authenticated broker: SASL/SCRAM logins and ACLs (StandardAuthorizer).

One broker serves the whole module (``sasl_broker.py``). Every test makes its own SCRAM user
and grants it its own ACLs, so what one user may do never depends on another test.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    AclOperation,
    ResourceType,
)

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, NoMessageError
from client_balance._kafka._errors import (
    AUTHENTICATION_CODES,
    from_kafka_exception,
    is_access_denied,
    is_transient,
)
from client_balance.errors import KafkaClientError
from tests.integration.sasl_broker import (
    MECHANISM,
    STATUS_TOPIC,
    SecuredCluster,
    start_secured_cluster,
    worker_acls,
)

pytestmark = pytest.mark.integration

_FAST_S = 5.0
"""What "fails fast" means here: well under the request timeout the tests set."""
_REQUEST_TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[SecuredCluster]:
    """The module's SASL/SCRAM broker with the StandardAuthorizer; admin is a super user."""
    secured = start_secured_cluster()
    try:
        yield secured
    finally:
        secured.kafka.stop()


def _consumer(cluster: SecuredCluster, login: dict[str, str], group: str) -> ClientBalanceConsumer:
    settings = ClientBalanceSettings(
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        kafka=login,
        start_position="earliest",
        commit="sync",
        reconcile_interval_s=1.0,
        request_timeout_s=_REQUEST_TIMEOUT_S,
        lease_timeout_s=4 * _REQUEST_TIMEOUT_S,
    )
    return ClientBalanceConsumer(settings)


def _start_refused(consumer: ClientBalanceConsumer, topic: str) -> KafkaClientError:
    """Start ``consumer`` on ``topic``; the KafkaClientError it raised, within :data:`_FAST_S`."""
    began = time.monotonic()
    try:
        with pytest.raises(KafkaClientError) as raised:
            consumer.start([topic], source_count=1, node_id=0)
    finally:
        consumer.shutdown()
    took = time.monotonic() - began
    assert took < _FAST_S, f"start() took {took:.1f} s to fail: {raised.value}"
    copy = pickle.loads(pickle.dumps(raised.value))
    assert str(copy) == str(raised.value)
    return raised.value


def test_a_worker_with_its_acls_consumes_everything(cluster: SecuredCluster) -> None:
    """A SCRAM user with exactly the worker ACLs of docs/security.md consumes and commits."""
    topic = cluster.new_topic(partitions=2, messages=40)
    user, password = cluster.add_user("worker")
    group = f"group-{user}"
    cluster.grant(user, worker_acls(topic, group))
    consumer = _consumer(cluster, cluster.login(user, password), group)
    consumer.start([topic], source_count=1, node_id=0)
    seen: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(seen) < 40 and time.monotonic() < deadline:
            try:
                batch = consumer.get_message(timeout_s=1.0)
            except NoMessageError:
                continue
            seen += [message.value() or b"" for message in batch.messages]
            consumer.confirm(batch.confirm_context)
    finally:
        consumer.shutdown()
    assert sorted(int(value) for value in seen) == list(range(40))


def test_a_wrong_password_fails_start_fast_naming_mechanism_and_user(
    cluster: SecuredCluster,
) -> None:
    """A wrong password fails start() at once with an authentication error that hides it."""
    topic = cluster.new_topic(partitions=1, messages=1)
    user, password = cluster.add_user("mistyped")
    wrong = password + "-wrong"
    group = f"group-{user}"
    cluster.grant(user, worker_acls(topic, group))
    error = _start_refused(_consumer(cluster, cluster.login(user, wrong), group), topic)
    assert error.kafka_code in AUTHENTICATION_CODES, error
    assert MECHANISM in str(error)
    assert repr(user) in str(error)
    assert not error.retriable
    for secret in (wrong, password):
        assert secret not in str(error)
        assert secret.encode() not in pickle.dumps(error)


def test_no_write_on_the_status_topic_fails_start_naming_topic_and_operation(
    cluster: SecuredCluster,
) -> None:
    """A user who may not write the status topic is refused at start(), told what to grant."""
    topic = cluster.new_topic(partitions=1, messages=1)
    user, password = cluster.add_user("no-write")
    group = f"group-{user}"
    acls = worker_acls(topic, group)
    acls.remove((ResourceType.TOPIC, STATUS_TOPIC, AclOperation.WRITE))
    cluster.grant(user, acls)
    error = _start_refused(_consumer(cluster, cluster.login(user, password), group), topic)
    assert error.kafka_name == "TOPIC_AUTHORIZATION_FAILED", error
    assert f"Write on topic '{STATUS_TOPIC}'" in str(error)
    assert not error.retriable


def test_no_read_on_the_group_fails_start_naming_the_group(cluster: SecuredCluster) -> None:
    """A user with no ACL on its group is refused at start(), and the error names the group."""
    topic = cluster.new_topic(partitions=1, messages=1)
    user, password = cluster.add_user("no-group")
    group = f"group-{user}"
    acls = [acl for acl in worker_acls(topic, group) if acl[0] != ResourceType.GROUP]
    cluster.grant(user, acls)
    error = _start_refused(_consumer(cluster, cluster.login(user, password), group), topic)
    assert error.kafka_name == "GROUP_AUTHORIZATION_FAILED", error
    assert f"group '{group}'" in str(error)
    assert not error.retriable


class _KafkaErrorStandIn:
    """What ``from_kafka_exception`` reads of a confluent-kafka ``KafkaError``."""

    def __init__(self, code: int, name: str, text: str, *, retriable: bool = False) -> None:
        self._code, self._name, self._text, self._retriable = code, name, text, retriable

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        return self._name

    def str(self) -> str:
        return self._text

    def retriable(self) -> bool:
        return self._retriable


def test_a_refused_request_names_the_operation_and_resource_it_lacks() -> None:
    """An authorization error says which ACL is missing, and is never transient."""
    refused = Exception(_KafkaErrorStandIn(29, "TOPIC_AUTHORIZATION_FAILED", "Broker: Topic "
                                           "authorization failed", retriable=True))  # fmt: skip
    error = from_kafka_exception(refused, "writing", operation="Write", resource="orders")
    assert "lacks the ACL Write on topic 'orders'" in str(error)
    assert not error.retriable
    assert not is_transient(error)
    assert is_access_denied(error)
    vague = from_kafka_exception(refused, "writing")
    assert "an ACL on the topic" in str(vague)


def test_a_refused_login_names_mechanism_and_user_but_never_the_password() -> None:
    """An authentication error names the login from the settings, and hides its password."""
    refused = Exception(_KafkaErrorStandIn(-169, "_AUTHENTICATION", "SASL authentication error"))
    login = {"sasl.mechanism": MECHANISM, "sasl.username": "alice", "sasl.password": "s3cr3t"}
    error = from_kafka_exception(refused, "connecting", kafka=login)
    assert f"{MECHANISM} login of user 'alice'" in str(error)
    assert "s3cr3t" not in str(error)
    assert b"s3cr3t" not in pickle.dumps(error)
    assert is_access_denied(error)


def test_a_real_password_appears_in_no_output(
    cluster: SecuredCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker's real SCRAM password is in no repr, log record, error or CLI output."""
    caplog.set_level(logging.DEBUG, logger="client_balance")
    topic = cluster.new_topic(partitions=2, messages=20)
    user, password = cluster.add_user("canary")
    group = f"group-{user}"
    cluster.grant(user, worker_acls(topic, group))
    login = cluster.login(user, password)
    consumer = _consumer(cluster, login, group)
    texts = [repr(consumer.settings), consumer.settings.model_dump_json()]
    consumer.start([topic], source_count=1, node_id=0)
    try:
        got = 0
        while got < 20:
            batch = consumer.get_message(timeout_s=30)
            got += len(batch.messages)
            texts.append(repr(consumer.confirm(batch.confirm_context)))
        texts += [repr(consumer.get_partition_meta()), repr(consumer.offset_infos())]
    finally:
        consumer.shutdown()
    wrong = _start_refused(
        _consumer(cluster, {**login, "sasl.password": password + "x"}, group), topic
    )
    texts += [str(wrong), repr(wrong)]
    texts += [record.getMessage() + repr(record.__dict__) for record in caplog.records]
    env = {**os.environ, "CLIENT_BALANCE_KAFKA": json.dumps(login)}
    for argv in (["status", "--group", group], ["groups"]):
        done = subprocess.run(
            [sys.executable, "-m", "client_balance", *argv,
             "--bootstrap-servers", cluster.bootstrap],
            check=False, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        texts += [done.stdout, done.stderr]
        assert done.returncode == 0, done.stderr[-2000:]
    leaks = [text for text in texts if password in text]
    assert leaks == []


@pytest.mark.parametrize("commit", ["sync", "interval"])
def test_commits_refused_for_want_of_read_on_the_group_are_raised_not_only_logged(
    cluster: SecuredCluster, commit: str
) -> None:
    """Describe but not Read on the group: start() passes, and the refused commits are raised.

    A sync confirm raises the refusal (its batch is confirmed all the same); with interval
    commits the next get_message() does. Logged only, the worker ran on committing nothing.
    """
    topic = cluster.new_topic(partitions=1, messages=10)
    user, password = cluster.add_user("no-group-read")
    group = f"group-{user}"
    acls = [acl for acl in worker_acls(topic, group) if acl[0] != ResourceType.GROUP]
    cluster.grant(user, [*acls, (ResourceType.GROUP, group, AclOperation.DESCRIBE)])
    settings = _consumer(cluster, cluster.login(user, password), group).settings
    consumer = ClientBalanceConsumer(settings.model_copy(update={"commit": commit}))
    consumer.start([topic], source_count=1, node_id=0)
    try:
        refused = _first_refusal(consumer, commit)
    finally:
        with contextlib.suppress(KafkaClientError):  # its final commit is refused as well
            consumer.shutdown()
    assert refused.kafka_name == "GROUP_AUTHORIZATION_FAILED", refused
    assert f"Read on group '{group}'" in str(refused)
    assert not refused.retriable


def _first_refusal(consumer: ClientBalanceConsumer, commit: str) -> KafkaClientError:
    """Confirm batches until a call raises the commit's refusal (60 s at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            batch = consumer.get_message(timeout_s=1.0)
            result = consumer.confirm(batch.confirm_context)
        except NoMessageError:
            continue
        except KafkaClientError as refused:
            return refused
        assert commit == "interval" or result.committed, "a sync commit neither made nor raised"
    pytest.fail("no call raised the refusal of the group's commits within 60 s")


def test_fetches_refused_for_want_of_read_on_the_topic_are_raised_naming_it(
    cluster: SecuredCluster,
) -> None:
    """Describe but not Read on the topic: start() passes; get_message() raises the refusal.

    Logged only, the worker waited for data forever with the partition registered.
    """
    topic = cluster.new_topic(partitions=1, messages=10)
    user, password = cluster.add_user("no-topic-read")
    group = f"group-{user}"
    acls = [acl for acl in worker_acls(topic, group) if acl[1] != topic]
    cluster.grant(user, [*acls, (ResourceType.TOPIC, topic, AclOperation.DESCRIBE)])
    consumer = _consumer(cluster, cluster.login(user, password), group)
    consumer.start([topic], source_count=1, node_id=0)
    try:
        refused = _first_refusal(consumer, "sync")
    finally:
        with contextlib.suppress(KafkaClientError):
            consumer.shutdown()
    assert refused.kafka_name == "TOPIC_AUTHORIZATION_FAILED", refused
    assert f"Read on topic '{topic}'" in str(refused)
    assert not refused.retriable
