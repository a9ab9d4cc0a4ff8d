"""The ``kafka`` setting: what librdkafka's check at construction does and does not do."""

import select
import socket
from collections.abc import Iterator

import pytest

from client_balance import ClientBalanceSettings, ConfigError

BASE = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "billing"}


@pytest.fixture
def token_endpoint() -> Iterator[socket.socket]:
    """A listening socket on 127.0.0.1 that stands for an OAuth token endpoint."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        yield listener


def _oidc(endpoint: socket.socket, protocol: str) -> dict[str, object]:
    return {
        "security.protocol": protocol,
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "app",
        "sasl.oauthbearer.client.secret": "Hunter2-canary",
        "sasl.oauthbearer.token.endpoint.url": (
            f"http://127.0.0.1:{endpoint.getsockname()[1]}/token"
        ),
    }


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "sasl_ssl"])
def test_oidc_settings_are_checked_without_contacting_the_token_endpoint(
    token_endpoint: socket.socket, protocol: str
) -> None:
    """Making settings with sasl.oauthbearer.method=oidc sends the client secret nowhere."""
    ClientBalanceSettings(**BASE, kafka=_oidc(token_endpoint, protocol))
    connecting, _, _ = select.select([token_endpoint], [], [], 0.5)
    assert connecting == [], "constructing the settings connected to the token endpoint"


@pytest.mark.parametrize(
    ("left_out", "named"),
    [
        ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.id` is mandatory"),
        ("sasl.oauthbearer.token.endpoint.url", "token.endpoint.url` is mandatory"),
    ],
)
def test_oidc_settings_librdkafka_refuses_are_still_refused(
    token_endpoint: socket.socket, left_out: str, named: str
) -> None:
    """An OIDC configuration missing what librdkafka requires is a ConfigError saying what."""
    kafka = {k: v for k, v in _oidc(token_endpoint, "SASL_SSL").items() if k != left_out}
    with pytest.raises(ConfigError, match=named):
        ClientBalanceSettings(**BASE, kafka=kafka)


def test_equal_settings_hash_alike_whatever_order_their_dicts_were_given_in() -> None:
    """Settings equal but for the order of kafka, pinned or a schema's keys hash the same."""
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    first = ClientBalanceSettings(
        **BASE,
        kafka={"client.id": "a", "fetch.wait.max.ms": 50},
        pinned={"orders:0": 5, "orders:1": -1},
        value_deserializer="avro",
        value_avro_schema=schema,
    )
    second = ClientBalanceSettings(
        **BASE,
        kafka={"fetch.wait.max.ms": 50, "client.id": "a"},
        pinned={"orders:1": -1, "orders:0": 5},
        value_deserializer="avro",
        value_avro_schema=dict(reversed(schema.items())),
    )
    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1


@pytest.mark.parametrize("value", [100.7, 9.9, float("inf"), float("nan"), -0.5])
def test_a_kafka_float_librdkafka_would_truncate_is_refused_naming_the_key(value: float) -> None:
    """A fractional or non-finite float for an integer librdkafka property is a ConfigError."""
    with pytest.raises(ConfigError, match=r"fetch\.wait\.max\.ms holds a") as refused:
        ClientBalanceSettings(**BASE, kafka={"fetch.wait.max.ms": value})
    assert "whole number" in str(refused.value)


def test_a_whole_kafka_float_becomes_an_int_and_linger_keeps_its_fraction() -> None:
    """100.0 is passed as 100; linger.ms, a float property, keeps 0.5."""
    settings = ClientBalanceSettings(
        **BASE, kafka={"fetch.wait.max.ms": 100.0, "socket.timeout.ms": 1e4, "linger.ms": 0.5}
    )
    assert settings.kafka == {
        "fetch.wait.max.ms": 100,
        "socket.timeout.ms": 10000,
        "linger.ms": 0.5,
    }
    assert type(settings.consumer_config()["fetch.wait.max.ms"]) is int
