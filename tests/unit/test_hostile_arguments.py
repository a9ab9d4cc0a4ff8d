"""Bad arguments and secrets: the library's own errors, naming the argument, never a secret.

Each case was found on main 1b9e873 (issue 16), and each test failed there.
"""

from __future__ import annotations

import json
import math
import pickle
from typing import Any

import pytest

from client_balance import (
    ClientBalanceConsumer,
    ClientBalanceSettings,
    ConfigError,
    InvalidConfirmContextError,
)
from client_balance._kafka import fetch_client
from client_balance._secrets import MASK, MaskedConfig
from client_balance.admin import reap_dead_members
from client_balance.consumer._parse import parse_topics, resolve_mode

CANARY = "canary-Pa55word-7f3e"
BASE: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:9", "group_id": "g"}
SECRET_KAFKA = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "worker",
    "sasl.password": CANARY,
    "ssl.key.password": CANARY,
}


def _settings(**values: Any) -> ClientBalanceSettings:
    return ClientBalanceSettings(**{**BASE, **values})


def test_secrets_are_masked_in_every_text_form_of_the_settings() -> None:
    """repr, str, model_dump, model_dump_json and the status secret show '**********' only."""
    settings = _settings(kafka=SECRET_KAFKA, status_secret=CANARY)
    texts = [repr(settings), str(settings), str(settings.model_dump()), settings.model_dump_json()]
    for text in texts:
        assert CANARY not in text
    assert json.loads(settings.model_dump_json())["kafka"]["sasl.password"] == MASK
    assert settings.consumer_config()["sasl.password"] == CANARY  # librdkafka gets the value
    assert settings.admin_config()["ssl.key.password"] == CANARY


@pytest.mark.parametrize(
    "bad",
    [
        {"kafka": {**SECRET_KAFKA, "no.such.prop": 1}},
        {"kafka": {**SECRET_KAFKA, "fetch.wait.max.ms": "abc"}},
        {"kafka": {**SECRET_KAFKA, "bootstrap.servers": "x:1"}},
        {"kafka": {**SECRET_KAFKA, "sasl.password": object()}},
        {"kafka": SECRET_KAFKA, "lease_timeout_s": 5, "report_interval_s": 10},
        {"kafka": SECRET_KAFKA, "status_secret": 12345},
    ],
)
def test_no_settings_error_shows_a_secret_even_pickled(bad: dict[str, Any]) -> None:
    """A ConfigError about settings that hold a secret names keys, never the secret's value."""
    with pytest.raises(ConfigError) as failed:
        _settings(**bad)
    assert CANARY not in str(failed.value)
    assert "12345" not in str(failed.value)
    assert CANARY not in str(pickle.loads(pickle.dumps(failed.value)))


@pytest.mark.parametrize(
    ("kafka", "named"),
    [
        ({"no.such.prop": 1}, "no.such.prop"),
        ({"fetch.wait.max.ms": "abc"}, "fetch.wait.max.ms"),
        ({"oauth_cb": "module.function"}, "oauth_cb"),
        ({"stats_cb": 5}, "stats_cb"),
    ],
)
def test_librdkafka_keys_and_callbacks_fail_in_the_settings(
    kafka: dict[str, Any], named: str
) -> None:
    """An unknown key, a mistyped value or a non-callable callback fails at settings time."""
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        _settings(kafka=kafka)


def test_callbacks_are_accepted_from_code_and_reach_the_client_config() -> None:
    """oauth_cb, stats_cb, throttle_cb and error_cb take callables; the config carries them."""

    def token(_config: str) -> tuple[str, float]:
        return "token", 0.0

    def seen(_event: object) -> None:
        return None

    callbacks = {"oauth_cb": token, "stats_cb": seen, "throttle_cb": seen, "error_cb": seen}
    settings = _settings(kafka=callbacks)
    config = settings.consumer_config()
    # The listeners come wrapped in a guard (client_balance._callbacks), oauth_cb as it is.
    assert {k: getattr(config[k], "__wrapped__", config[k]) for k in callbacks} == callbacks
    assert config["oauth_cb"] is token
    assert "token" in repr(settings.kafka)  # shown by name, not called
    assert json.loads(settings.model_dump_json())["kafka"]["oauth_cb"].startswith("<callable")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("request_timeout_s", math.inf),
        ("request_timeout_s", 3e6),
        ("reconcile_interval_s", math.inf),
        ("reconcile_interval_s", math.nan),
        ("lease_timeout_s", 1e300),
        ("commit_interval_s", -1.0),
        ("reap_after_s", math.inf),
    ],
)
def test_durations_must_be_finite_and_within_range(field: str, value: float) -> None:
    """inf, nan and values past what librdkafka or a thread can wait are refused by name."""
    with pytest.raises(ConfigError, match=field):
        _settings(**{field: value})


@pytest.mark.parametrize(("variable", "field"), [("KAFKA", "kafka"), ("PINNED", "pinned")])
def test_malformed_json_in_the_environment_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, field: str
) -> None:
    """CLIENT_BALANCE_KAFKA / _PINNED that is not JSON: ConfigError, not SettingsError."""
    monkeypatch.setenv(f"CLIENT_BALANCE_{variable}", '{"sasl.password": "' + CANARY)
    with pytest.raises(ConfigError, match=f"CLIENT_BALANCE_{variable}") as failed:
        _settings()
    assert CANARY not in str(failed.value)


def test_a_callback_from_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment cannot carry code: oauth_cb there is refused with what to do instead."""
    monkeypatch.setenv("CLIENT_BALANCE_KAFKA", json.dumps({"oauth_cb": "pkg.module:token"}))
    with pytest.raises(ConfigError, match="set in code"):
        _settings()


@pytest.mark.parametrize(
    "topics",
    [{"t": 5}, {"t": b"ab"}, {"t": "ab"}, {"t": [1, 2]}, {"t": {b"x"}}],
)
def test_filters_must_be_sets_of_strings(topics: dict[str, Any]) -> None:
    """start({"t": 5}) was a TypeError and {"t": b"ab"} became filters "97", "98"."""
    with pytest.raises(ConfigError, match="filters of topic 't'"):
        parse_topics(topics)


@pytest.mark.parametrize(("source_count", "node_id"), [(-5, -1), (-1, -7)])
def test_negative_counts_other_than_minus_one_are_refused(source_count: int, node_id: int) -> None:
    """source_count=-5 was taken silently; outside node mode it is -1 (or 0)."""
    with pytest.raises(ConfigError, match="source_count"):
        resolve_mode(source_count, node_id, None, None)


@pytest.mark.parametrize("timeout", [math.nan, math.inf, -1.0, "1", True, 1e12])
def test_waits_must_be_finite_non_negative_numbers(timeout: Any) -> None:
    """get_message(nan) never returned and get_message("1") was a TypeError."""
    consumer = ClientBalanceConsumer(_settings())
    for call in (consumer.get_message, consumer.is_partitions_ready, consumer.reconcile_now):
        with pytest.raises(ConfigError, match=r"timeout_s|max_wait_s"):
            call(timeout)


@pytest.mark.parametrize("flag", ["False", 0, None, "yes"])
def test_confirm_takes_a_real_bool(flag: Any) -> None:
    """confirm(ctx, "False") confirmed the batch; now it is refused."""
    consumer = ClientBalanceConsumer(_settings())
    with pytest.raises(ConfigError, match="consumed"):
        consumer.confirm("1:t:0:1", flag)


def test_a_malformed_confirm_context_is_refused_before_the_state_is_checked() -> None:
    """A bad context says what is wrong with it, whatever the consumer's state."""
    with pytest.raises(InvalidConfirmContextError):
        ClientBalanceConsumer(_settings()).confirm(12, True)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["assigner", "on_assigned", "on_revoked", "on_lost"])
def test_callbacks_must_be_callable_at_construction(name: str) -> None:
    """A non-callable assigner failed only in a later round; now the constructor refuses it."""
    not_callable: dict[str, Any] = {name: "not a function"}
    with pytest.raises(ConfigError, match=name):
        ClientBalanceConsumer(_settings(), **not_callable)


def test_a_masked_config_pickles_with_its_values_and_shows_none() -> None:
    """MaskedConfig (the Spark options' kafka) travels with the secret and prints without it."""
    config = MaskedConfig({"sasl.password": CANARY, "sasl.username": "worker"})
    assert CANARY not in repr(config)
    assert CANARY not in str(config)
    assert pickle.loads(pickle.dumps(config))["sasl.password"] == CANARY


@pytest.mark.parametrize("older_than_s", [math.nan, math.inf, -1.0, "60"])
def test_reap_refuses_a_bad_age_before_reading_the_cluster(older_than_s: Any) -> None:
    """reap_dead_members(nan) passed its check and failed later in int(); now refused first."""
    with pytest.raises(ConfigError, match="older_than_s"):
        reap_dead_members(_settings(), older_than_s=older_than_s)


def test_a_users_error_cb_runs_after_the_sdks_own() -> None:
    """An error_cb in kafka is composed with the SDK's, never replacing it (no broker here)."""
    seen: list[str] = []
    settings = _settings(kafka={"error_cb": lambda error: seen.append("user")})
    client = fetch_client(settings, lambda error: seen.append("sdk"))
    try:
        for _ in range(50):  # nobody listens on port 9: librdkafka reports the broker down
            client.poll(0.1)
            if seen:
                break
    finally:
        client.close()
    assert seen[:2] == ["sdk", "user"]
