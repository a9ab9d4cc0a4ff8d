"""The one place where errors of the Kafka client become :class:`KafkaClientError`.

Duck-typed on ``KafkaException.args[0]`` (a ``KafkaError``), so the mapping stays testable with
a stand-in. :func:`timed_out` is the one way to say "no answer in time", and
:func:`is_transient` the one judgement of whether an error only means "not reachable for now".

An offset a reader asked for that the log no longer has becomes :class:`DataLossError`
(:func:`is_out_of_range`, :func:`data_lost`).

A refused login names the SASL mechanism and user of the client's settings (never the
password), and a refused request the operation and resource its caller names, since the
broker's own words ("Topic authorization failed") name neither; neither kind is transient.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from client_balance._secrets import scrub
from client_balance.errors import ClientBalanceError, DataLossError, KafkaClientError
from client_balance.keys import TopicPartition

__all__ = [
    "AUTHENTICATION_CODES",
    "AUTHORIZATION_CODES",
    "GROUP_IN_USE_CODES",
    "OUT_OF_RANGE_CODES",
    "TIMED_OUT",
    "TRANSIENT_KAFKA_CODES",
    "data_lost",
    "from_kafka_exception",
    "is_access_denied",
    "is_out_of_range",
    "is_transient",
    "registry_unavailable",
    "timed_out",
]

TIMED_OUT = -185
"""librdkafka's ``RD_KAFKA_RESP_ERR__TIMED_OUT``."""

# librdkafka codes that mean "not reachable right now": transport, timeouts, no brokers,
# resolution, waiting for a coordinator, and the broker's own retriable coordinator/leader codes.
TRANSIENT_KAFKA_CODES = frozenset({-195, -187, TIMED_OUT, -193, -180, 5, 6, 7, 14, 15, 16})

# Commits that fail with these mean someone subscribe()s with our group id.
GROUP_IN_USE_CODES = frozenset({22, 25, 27})  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE

OUT_OF_RANGE_CODES = frozenset({-140, 1})
"""librdkafka's ``_AUTO_OFFSET_RESET`` (with ``auto.offset.reset=error``: a fetch asked for an
offset the log does not have) and the broker's ``OFFSET_OUT_OF_RANGE``."""

AUTHENTICATION_CODES = frozenset({-169, 58})
"""librdkafka's ``_AUTHENTICATION`` and the broker's ``SASL_AUTHENTICATION_FAILED``."""

AUTHORIZATION_CODES: Mapping[int, str] = {
    29: "topic",  # TOPIC_AUTHORIZATION_FAILED
    30: "group",  # GROUP_AUTHORIZATION_FAILED
    31: "cluster",  # CLUSTER_AUTHORIZATION_FAILED
    53: "transactional id",  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
}
"""The broker's ``*_AUTHORIZATION_FAILED`` codes, and the kind of resource each is about."""

TOO_LARGE_CODES = frozenset({10, 18})
"""The broker's ``MESSAGE_TOO_LARGE`` (librdkafka: ``MSG_SIZE_TOO_LARGE``) and
``RECORD_LIST_TOO_LARGE``: a record, or a request's records, over a size limit."""

KafkaSettings = Mapping[str, Any]

_LOCAL_OAUTH_CONFIG = "sasl.oauthbearer.config"


def from_kafka_exception(
    error: BaseException,
    doing: str,
    *,
    kafka: KafkaSettings | None = None,
    operation: str | None = None,
    resource: str | None = None,
) -> KafkaClientError:
    """Map a ``KafkaException`` (or a plain ``KafkaError``) raised while ``doing`` something.

    A refused login names the mechanism and user of the client's settings ``kafka``; a refused
    request names the ACL ``operation`` (``"Write"``) on ``resource`` (a topic or group name)
    that the caller was exercising. The message never holds a secret of ``kafka``, nor the part
    of a ``sasl.oauthbearer.config`` that librdkafka quotes (``_secrets.scrub``).
    """
    kafka_error: Any = error.args[0] if error.args else None
    code_of = getattr(kafka_error, "code", None)
    if not callable(code_of):
        return KafkaClientError(
            f"{doing} failed: {scrub(str(error), kafka)}",
            kafka_code=-1,
            kafka_name=type(error).__name__,
        )
    name = str(kafka_error.name())
    said = str(kafka_error.str())
    text = scrub(said, kafka)
    code = int(code_of())
    if code in AUTHENTICATION_CODES:
        text = f"{text.rstrip('.')}. {_refused_login(kafka, said)}"
    elif code in AUTHORIZATION_CODES:
        text = f"{text.rstrip('.')}. {_missing_acl(AUTHORIZATION_CODES[code], operation, resource)}"
    elif code in TOO_LARGE_CODES:
        text = (
            f"{text.rstrip('.')}. The records are larger than the topic's max.message.bytes "
            "(the broker's message.max.bytes unless the topic sets it) or the client's "
            "message.max.bytes allows; raise the limit that refused them"
        )
    return KafkaClientError(
        f"{doing} failed: {name}: {text}",
        kafka_code=code,
        kafka_name=name,
        # Trying again cannot help until someone changes credentials or ACLs.
        retriable=bool(kafka_error.retriable()) and not _denies_access(code),
    )


def _refused_login(kafka: KafkaSettings | None, said: str) -> str:
    if _LOCAL_OAUTH_CONFIG in said:  # no login was tried: librdkafka could not build a token
        return (
            f"librdkafka refused this client's own {_LOCAL_OAUTH_CONFIG} before any login: "
            "fix it in the kafka settings (space-separated name=value pairs: principal=, "
            "scope=, lifeSeconds=, extension_NAME=)"
        )
    settings = kafka or {}
    mechanism = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "SASL"
    user = settings.get("sasl.username")
    who = f"user {str(user)!r}" if user else "this client"
    # Only the mechanism and the user name: the password never appears in an error.
    return (
        f"The cluster refused the {mechanism} login of {who}: check sasl.username, "
        "sasl.password and sasl.mechanism in the kafka settings"
    )


def _missing_acl(kind: str, operation: str | None, resource: str | None) -> str:
    target = f"{kind} {resource!r}" if resource and kind != "cluster" else f"the {kind}"
    need = f"the ACL {operation} on {target}" if operation else f"an ACL on {target}"
    if operation == "Describe":  # granting Read (what a role usually needs) gives Describe too
        need += " (Read and Write include it)"
    return (
        f"Not authorized: this client's principal lacks {need}; grant it "
        "(docs/security.md lists the ACLs of each role)"
    )


def _denies_access(code: int) -> bool:
    return code in AUTHENTICATION_CODES or code in AUTHORIZATION_CODES


def timed_out(doing: str, timeout_s: float, why: str = "") -> KafkaClientError:
    """The error of ``doing`` something that got no (good) answer within ``timeout_s``."""
    detail = f": {why}" if why else ""
    return KafkaClientError(
        f"{doing} failed: no answer within {timeout_s:g} s{detail}",
        kafka_code=TIMED_OUT,
        kafka_name="_TIMED_OUT",
        retriable=True,
    )


def stopped(message: str) -> KafkaClientError:
    """The error of a call on a client this process closed already (STOPPED, not retriable)."""
    return KafkaClientError(message, kafka_code=-1, kafka_name="STOPPED")


def is_transient(error: ClientBalanceError) -> bool:
    """Whether ``error`` only says the cluster cannot be reached for now."""
    return (
        isinstance(error, KafkaClientError)
        and not _denies_access(error.kafka_code)
        and (error.retriable or error.kafka_code in TRANSIENT_KAFKA_CODES)
    )


def is_access_denied(error: ClientBalanceError) -> bool:
    """Whether ``error`` is a refused login or a refused request (credentials, ACLs)."""
    return isinstance(error, KafkaClientError) and _denies_access(error.kafka_code)


def is_out_of_range(kafka_error: Any) -> bool:
    """Whether a ``KafkaError`` says the offset asked for is outside the partition's log."""
    code_of = getattr(kafka_error, "code", None)
    return callable(code_of) and int(code_of()) in OUT_OF_RANGE_CODES


def data_lost(partition: TopicPartition, lost_from: int, lost_to: int, doing: str) -> DataLossError:
    """The error of ``doing`` something that needed offsets ``[lost_from, lost_to)`` now gone."""
    return DataLossError(
        f"{doing}: offsets [{lost_from}, {lost_to}) of {partition} are gone from Kafka "
        f"({lost_to - lost_from} messages deleted by retention or delete_records before they "
        "were read)",
        partition=str(partition),
        lost_from=lost_from,
        lost_to=lost_to,
    )


_HTTP_MODULES = frozenset({"httpx", "httpx2", "httpcore", "httpcore2", "ssl", "socket"})


def registry_unavailable(error: BaseException) -> bool:
    """Whether a Schema Registry deserializer failed for want of the registry, not the data.

    An unknown schema id is the record's fault: a 404 that the registry says is its own (a
    4040x error code in its JSON answer). Any other answer (a refused login, a 5xx, a 404 of a
    proxy or of a wrong base path, which has no such code) or no answer at all means the same
    bytes may decode later, so the batch must not be skipped or dead-lettered for it: a wrong
    URL skipped every record. Duck-typed: the registry's client is an optional extra. Asked
    only of deserializers that may call a registry: any other's OSError (``gzip.BadGzipFile``)
    is the data's fault.
    """
    if type(error).__name__ == "SchemaRegistryError":
        status, code = (getattr(error, name, None) for name in ("http_status_code", "error_code"))
        return not (status == 404 and isinstance(code, int) and code // 10 == 4040)  # noqa: PLR2004 - HTTP not found
    return isinstance(error, OSError) or type(error).__module__.split(".")[0] in _HTTP_MODULES
