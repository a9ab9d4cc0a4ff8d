"""The properties of a LocalKafka's nodes: what they all share, and SASL for a secured cluster.

Every node is a combined broker and controller; the replication settings follow the node count.

A secured cluster adds a SASL_PLAINTEXT listener for clients, SCRAM users and Kafka's
StandardAuthorizer. Each node keeps its PLAINTEXT listener (between brokers, and the
launcher's own readiness probes) and its CONTROLLER listener (the quorum), both on 127.0.0.1,
and their principal, ``User:ANONYMOUS``, is a super user: once an authorizer runs, KRaft
brokers and controllers that talk over PLAINTEXT need that. Clients use the SASL listener,
where every principal but the admin needs ACLs. The admin's SCRAM credential is written into
the metadata log when the log dir is formatted (``StorageTool format --add-scram``), so it
exists before the first request; further users come through the Admin API.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from client_balance.errors import ConfigError

__all__ = ["MIN_HEAP_MB", "SASL_LISTENER", "SECURITY_PROTOCOLS", "Sasl", "cluster_config"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_LISTENER = "SASL_PLAINTEXT"
_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
# StorageTool's --add-scram splits on , = [ ] and quotes: plain names and passwords only.
_PLAIN_TEXT = re.compile(r"[A-Za-z0-9._-]{1,128}")
_PASSWORD_FILE = ".sasl-admin-password"  # noqa: S105 - a file name, not a password


# Tiny internal topics, few threads for 2 cores; the replication settings follow the node
# count (_replication). group.initial.rebalance.delay.ms keeps Kafka's default on purpose:
# benchmarks compare against a real subscribe() group join.
_BASE_CONFIG = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "inter.broker.listener.name": "PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "num.partitions": "1",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "1",
    "auto.create.topics.enable": "false",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "log.retention.check.interval.ms": "300000",
}


def _replication(brokers: int) -> dict[str, str]:
    # One node: every factor 1. Three or more: factor 3 with 2 in sync, so one node may fail.
    factor = str(min(brokers, 3))
    in_sync = str(1 if brokers == 1 else 2)
    return {
        "default.replication.factor": factor,
        "min.insync.replicas": in_sync,
        "offsets.topic.replication.factor": factor,
        "transaction.state.log.replication.factor": factor,
        "transaction.state.log.min.isr": in_sync,
        "share.coordinator.state.topic.replication.factor": factor,
        "share.coordinator.state.topic.min.isr": in_sync,
    }


def cluster_config(controllers: Mapping[int, int]) -> dict[str, str]:
    """What every node shares: roles, replication, quorum (``controllers``: id -> port)."""
    if len(controllers) == 1:
        # A dynamic quorum of one, formatted with --standalone.
        quorum = {"controller.quorum.bootstrap.servers": f"127.0.0.1:{controllers[1]}"}
    else:
        voters = ",".join(f"{nid}@127.0.0.1:{port}" for nid, port in sorted(controllers.items()))
        quorum = {"controller.quorum.voters": voters}
    return {**_BASE_CONFIG, **_replication(len(controllers)), **quorum}


_MAX_PORT = 65_535
MIN_HEAP_MB = 128
"""Below this a Kafka node runs out of heap while it starts."""


def check_launch(
    *, brokers: object, port: object, heap_mb: object, startup_timeout_s: object,
    stop_timeout_s: object,
) -> None:  # fmt: skip
    """Raise :class:`ConfigError` for a node count, port, heap or timeout a LocalKafka cannot use.

    Checked before anything starts: a bad port or heap reached the JVM, which failed seconds
    later in its own words.
    """
    if type(brokers) is not int or brokers < 1:
        raise ConfigError(f"brokers={brokers!r} is not allowed; use an int >= 1")
    if port is not None and (type(port) is not int or not 1 <= port <= _MAX_PORT):
        raise ConfigError(
            f"port={port!r} is not allowed; use an int from 1 to {_MAX_PORT}, or None (a free one)"
        )
    if type(heap_mb) is not int or heap_mb < MIN_HEAP_MB:
        raise ConfigError(f"heap_mb={heap_mb!r} is not allowed; use an int >= {MIN_HEAP_MB}")
    for name, value in (
        ("startup_timeout_s", startup_timeout_s),
        ("stop_timeout_s", stop_timeout_s),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ConfigError(f"{name}={value!r} is not allowed; use a number of seconds > 0")


@dataclass(frozen=True, slots=True)
class Sasl:
    """The SASL setup of a LocalKafka: the mechanism and its super user (``admin``)."""

    mechanism: str
    user: str
    password: str = field(repr=False)

    @staticmethod
    def check(security: str, mechanism: str, user: str, password: str | None) -> None:
        """Raise :class:`ConfigError` for settings a LocalKafka cannot run with (no secrets)."""
        if security not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"security={security!r} is not supported by LocalKafka; use one of "
                f"{', '.join(SECURITY_PROTOCOLS)} (TLS needs certificates: bring your own cluster)"
            )
        if security == "PLAINTEXT":
            return
        if mechanism not in SCRAM_MECHANISMS:
            raise ConfigError(
                f"mechanism={mechanism!r} is not supported by LocalKafka; use one of "
                f"{', '.join(SCRAM_MECHANISMS)}"
            )
        if not _PLAIN_TEXT.fullmatch(user):
            raise ConfigError(
                f"admin_user={user!r} is not allowed; use letters, digits, '.', '_' or '-'"
            )
        if password is not None and not _PLAIN_TEXT.fullmatch(password):
            raise ConfigError(
                f"the admin_password of user {user!r} is not allowed; use 1 to 128 letters, "
                "digits, '.', '_' or '-'"
            )

    @classmethod
    def for_data_dir(cls, mechanism: str, user: str, password: str | None, data_dir: Path) -> Sasl:
        """The setup for ``data_dir``: a password given, kept there earlier, or a new one.

        A kept data dir keeps its credentials in the metadata log, so a restart on it must
        use the password it was formatted with; a random one is kept (mode 0600) for that.
        """
        kept = data_dir / _PASSWORD_FILE
        if password is None and kept.is_file():
            password = kept.read_text().strip()
        if password is None:
            password = secrets.token_urlsafe(18)
            descriptor = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as file:
                file.write(password)
        return cls(mechanism, user, password)

    def broker_config(self) -> dict[str, str]:
        """Properties of every node: the mechanism, the StandardAuthorizer, the super users."""
        listener = SASL_LISTENER.lower()
        return {
            "sasl.enabled.mechanisms": self.mechanism,
            f"listener.name.{listener}.{self.mechanism.lower()}.sasl.jaas.config": _SCRAM_LOGIN,
            "authorizer.class.name": _AUTHORIZER,
            "super.users": f"User:{self.user};User:ANONYMOUS",
        }

    def format_args(self) -> list[str]:
        """``StorageTool format`` arguments that create the admin's SCRAM credential."""
        return ["--add-scram", f"{self.mechanism}=[name={self.user},password={self.password}]"]

    def client_config(self) -> dict[str, str]:
        """The librdkafka settings of a client that logs in as the admin."""
        return {
            "security.protocol": SASL_LISTENER,
            "sasl.mechanism": self.mechanism,
            "sasl.username": self.user,
            "sasl.password": self.password,
        }

    def mask(self, text: str) -> str:
        """``text`` with the password replaced (a tool's output may echo its arguments)."""
        return text.replace(self.password, "**********")
