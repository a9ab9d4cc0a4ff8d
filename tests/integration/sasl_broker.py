"""A real authenticated broker for the security tests: SASL/SCRAM with the StandardAuthorizer.

:func:`start_secured_cluster` starts a :class:`~client_balance.broker.LocalKafka` whose clients
log in with SCRAM-SHA-512; its ``admin`` is a super user. :class:`SecuredCluster` does, as that
admin and through the Admin API, what an operator does: topics, SCRAM users and ACLs. Each
change is waited for until the broker itself reports it, since the controller commits it to
the metadata log before the broker applies it.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from client_balance import admin
from client_balance._kafka import wait_until
from client_balance.broker import LocalKafka
from client_balance.errors import ClientBalanceError

MECHANISM = "SCRAM-SHA-512"
STATUS_TOPIC = "__client_balance_status"
STATUS_TOPIC_CONFIG = {"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime"}
_WAIT_S = 30.0
_names = itertools.count(1)

Acl = tuple[ResourceType, str, AclOperation]
"""(resource type, literal resource name, operation) granted to a user."""


def worker_acls(topic: str, group: str) -> list[Acl]:
    """A worker's ACLs (docs/security.md): read its topic and group, use the status topic."""
    return [
        (ResourceType.TOPIC, topic, AclOperation.READ),
        (ResourceType.GROUP, group, AclOperation.READ),
        (ResourceType.TOPIC, STATUS_TOPIC, AclOperation.READ),
        (ResourceType.TOPIC, STATUS_TOPIC, AclOperation.WRITE),
        (ResourceType.TOPIC, STATUS_TOPIC, AclOperation.DESCRIBE_CONFIGS),
    ]


@dataclass
class SecuredCluster:
    """The SASL broker and what its admin does on it."""

    kafka: LocalKafka

    @property
    def bootstrap(self) -> str:
        """The SASL_PLAINTEXT listener: the only one clients use."""
        return self.kafka.bootstrap_servers

    def admin_client(self) -> AdminClient:
        """An AdminClient logged in as the super user."""
        return AdminClient({"bootstrap.servers": self.bootstrap, **self.kafka.admin_config})

    def login(self, user: str, password: str) -> dict[str, str]:
        """The ``kafka`` settings of a client that logs in as ``user``."""
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": password,
        }

    def new_topic(self, partitions: int, messages: int) -> str:
        """A fresh topic holding ``messages`` values ``b"0"``, ``b"1"``, ... round robin."""
        topic = f"secured-{next(_names)}"
        admin.create_topics(self.bootstrap, {topic: partitions}, kafka=self.kafka.admin_config)
        producer = Producer({"bootstrap.servers": self.bootstrap, **self.kafka.admin_config})
        for value in range(messages):
            producer.produce(topic, str(value).encode(), partition=value % partitions)
        assert producer.flush(_WAIT_S) == 0
        return topic

    def add_user(self, stem: str) -> tuple[str, str]:
        """A new SCRAM user (name, password), once the broker knows it."""
        user, password = f"{stem}-{next(_names)}", secrets.token_urlsafe(12)
        upsert = UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
        )
        client = self.admin_client()
        client.alter_user_scram_credentials([upsert])[user].result(timeout=_WAIT_S)

        def known() -> bool:
            described = client.describe_user_scram_credentials([user], request_timeout=5)
            assert isinstance(described, dict)  # one future per user named
            return bool(described[user].result(timeout=_WAIT_S).scram_credential_infos)

        assert wait_until(known, timeout_s=_WAIT_S, retry_on=(Exception,)), user
        return user, password

    def grant(self, user: str, acls: Iterable[Acl]) -> None:
        """Allow ``user`` each of ``acls`` (literal names, any host); wait until they apply."""
        bindings = [
            AclBinding(kind, name, ResourcePatternType.LITERAL, f"User:{user}", "*", operation,
                       AclPermissionType.ALLOW)
            for kind, name, operation in acls
        ]  # fmt: skip
        client = self.admin_client()
        for future in client.create_acls(bindings, request_timeout=_WAIT_S).values():
            future.result(timeout=_WAIT_S)
        # None matches any name and any host (the stubs do not say so).
        every = AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{user}", None,  # type: ignore[arg-type]
            AclOperation.ANY, AclPermissionType.ANY,
        )  # fmt: skip

        def applied() -> bool:
            found = client.describe_acls(every, request_timeout=5).result(timeout=_WAIT_S)
            return set(bindings) <= set(found)

        assert wait_until(applied, timeout_s=_WAIT_S, retry_on=(Exception,)), bindings


def start_secured_cluster() -> SecuredCluster:
    """Start the SASL broker and pre-create the status topic as the admin.

    A broker that cannot be had fails the test with the reason; it is never skipped.
    """
    kafka = LocalKafka(security="SASL_PLAINTEXT", mechanism=MECHANISM)
    try:
        kafka.start()
        admin.create_topics(
            kafka.bootstrap_servers, {STATUS_TOPIC: 1}, config=STATUS_TOPIC_CONFIG,
            kafka=kafka.admin_config,
        )  # fmt: skip
    except ClientBalanceError as error:
        kafka.stop()
        pytest.fail(f"the security tests need a SASL broker, and none started: {error}", False)
    return SecuredCluster(kafka)
