"""CLIENT_BALANCE_* variables: typos are caught, and a bad value names its variable."""

import logging
import os

import pytest

from client_balance import ClientBalanceSettings, ConfigError, _settings_environment

BASE = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "billing"}
VALUE = "value-canary-0123456789"
EVENT = "environment variable is not a setting; ignored"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """No CLIENT_BALANCE_* variable of the test run leaks in, and no warning was logged yet."""
    for name in [n for n in os.environ if n.upper().startswith("CLIENT_BALANCE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(_settings_environment, "_warned", set(), raising=False)
    caplog.set_level(logging.WARNING, logger="client_balance.settings")


def _ignored(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == EVENT]


@pytest.mark.parametrize(
    ("variable", "meant"),
    [
        ("CLIENT_BALANCE_STATUS_SECRETS", "CLIENT_BALANCE_STATUS_SECRET"),
        ("CLIENT_BALANCE_LEASE_TIMEOUT", "CLIENT_BALANCE_LEASE_TIMEOUT_S"),
        ("client_balance_reconcile_interval", "CLIENT_BALANCE_RECONCILE_INTERVAL_S"),
        ("CLIENT_BALANCE_STATUS_TOPIC_PARTITION", "CLIENT_BALANCE_STATUS_TOPIC_PARTITIONS"),
    ],
)
def test_a_variable_close_to_a_setting_is_refused_naming_the_likely_one(
    monkeypatch: pytest.MonkeyPatch, variable: str, meant: str
) -> None:
    """A mistyped CLIENT_BALANCE_* name is refused naming the one meant, never its value."""
    monkeypatch.setenv(variable, VALUE)
    with pytest.raises(ConfigError) as refused:
        ClientBalanceSettings(**BASE)
    assert f"{variable} is not a setting; did you mean {meant}?" in str(refused.value)
    assert VALUE not in str(refused.value)


def test_a_typo_of_a_setting_given_as_a_keyword_is_only_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """CLIENT_BALANCE_GROUPID with group_id= given changes nothing: a warning, not an error."""
    monkeypatch.setenv("CLIENT_BALANCE_GROUPID", VALUE)
    ClientBalanceSettings(**BASE)
    assert [r.variable for r in _ignored(caplog)] == ["CLIENT_BALANCE_GROUPID"]  # type: ignore[attr-defined]


def test_another_variable_is_logged_once_without_its_value(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A CLIENT_BALANCE_* name like no setting is a warning naming it (once), never its value."""
    monkeypatch.setenv("CLIENT_BALANCE_DEPLOYMENT_COLOUR", VALUE)
    ClientBalanceSettings(**BASE)
    ClientBalanceSettings(**BASE)
    events = _ignored(caplog)
    assert [r.variable for r in events] == ["CLIENT_BALANCE_DEPLOYMENT_COLOUR"]  # type: ignore[attr-defined]
    assert VALUE not in caplog.text
    assert all(VALUE not in str(vars(r)) for r in caplog.records)


@pytest.mark.parametrize(
    "variable",
    [
        "CLIENT_BALANCE_STATUS_SECRET_FILE",  # the *_FILE convention of mounted secrets
        "CLIENT_BALANCE_SCHEMA_REGISTRY_PORT",  # Kubernetes' variable of a service of that name
        "CLIENT_BALANCE_METRICS_PATH",
    ],
)
def test_a_deployments_own_variable_a_word_off_a_setting_is_only_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, variable: str
) -> None:
    """A name a word longer than a setting's, or another word, is a variable of its own.

    Refused as a typo, it stopped every settings construction in a pod that merely had it.
    """
    monkeypatch.setenv(variable, VALUE)
    ClientBalanceSettings(**BASE)
    assert [r.variable for r in _ignored(caplog)] == [variable]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "variable",
    ["CLIENT_BALANCE_TEST_BOOTSTRAP", "CLIENT_BALANCE_KAFKA_HOME", "CLIENT_BALANCE_SEED_SCENARIOS"],
)
def test_the_projects_own_variables_are_neither_refused_nor_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, variable: str
) -> None:
    """The variables the tests, the broker launcher and the CLI read are not settings typos."""
    monkeypatch.setenv(variable, "127.0.0.1:9092")
    monkeypatch.setenv("CLIENT_BALANCE_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    ClientBalanceSettings(group_id="billing")
    assert _ignored(caplog) == []


@pytest.mark.parametrize(
    ("variable", "value", "shown"),
    [
        ("CLIENT_BALANCE_LEASE_TIMEOUT_S", "abc", "lease_timeout_s='abc' (from "),
        ("CLIENT_BALANCE_MODE", "", "mode='' (from "),
        ("client_balance_metrics_port", "x", "metrics_port='x' (from "),
        ("CLIENT_BALANCE_STATUS_SECRET", "short", "status_secret (from "),
        (
            "CLIENT_BALANCE_KAFKA",
            '{"no.such.property": 1}',
            "kafka (keys ['no.such.property']) (from ",
        ),
    ],
)
def test_an_invalid_value_from_the_environment_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, shown: str
) -> None:
    """A bad value the environment gave says which variable gave it."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as refused:
        ClientBalanceSettings(**BASE)
    assert f"{shown}{variable}) is not allowed" in str(refused.value)


def test_an_invalid_keyword_names_no_variable() -> None:
    """A bad value given as a keyword is named as the keyword alone."""
    with pytest.raises(ConfigError, match=r"lease_timeout_s='abc' is not allowed"):
        ClientBalanceSettings(**BASE, lease_timeout_s="abc")
