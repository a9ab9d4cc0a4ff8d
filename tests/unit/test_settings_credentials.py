"""Credentials pasted into settings that are no secrets (broker addresses) never show."""

import pytest

from client_balance import ClientBalanceSettings, ConfigError

PASSWORD = "Hunter2-canary"  # noqa: S105 - a test value the messages must not hold
BASE = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "billing"}
WITH_CREDENTIALS = [
    f"SASL_SSL://alice:{PASSWORD}@broker:9092",
    f"alice:{PASSWORD}@broker:9092",
    f"b1:9092,alice:{PASSWORD}@broker:9092",
    f"b1:9092,alice:{PASSWORD[:4]},{PASSWORD[4:]}@broker:9092",  # a comma in the password
]


@pytest.mark.parametrize("servers", WITH_CREDENTIALS)
def test_bootstrap_servers_with_credentials_is_refused_without_echoing_them(
    servers: str,
) -> None:
    """A broker list holding user:password@ is a ConfigError that masks the password."""
    with pytest.raises(ConfigError, match="bootstrap_servers") as refused:
        ClientBalanceSettings(**{**BASE, "bootstrap_servers": servers})
    assert PASSWORD[:4] not in str(refused.value)
    assert PASSWORD[4:] not in str(refused.value)
    assert "broker:9092" in str(refused.value)  # what is left says which entry it was


@pytest.mark.parametrize("servers", WITH_CREDENTIALS)
def test_bootstrap_servers_with_credentials_from_the_environment_is_not_echoed(
    servers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CLIENT_BALANCE_BOOTSTRAP_SERVERS with user:password@ is refused with the password masked."""
    monkeypatch.setenv("CLIENT_BALANCE_BOOTSTRAP_SERVERS", servers)
    with pytest.raises(ConfigError, match="bootstrap_servers") as refused:
        ClientBalanceSettings(group_id="billing")
    assert PASSWORD[:4] not in str(refused.value)
    assert PASSWORD[4:] not in str(refused.value)


@pytest.mark.parametrize("servers", [WITH_CREDENTIALS[1], WITH_CREDENTIALS[1].encode()])
def test_model_copy_refuses_bootstrap_servers_with_credentials(servers: str | bytes) -> None:
    """model_copy refuses user:password@ in bootstrap_servers, which repr and JSON would show."""
    settings = ClientBalanceSettings(**BASE)
    with pytest.raises(ConfigError, match="bootstrap_servers") as refused:
        settings.model_copy(update={"bootstrap_servers": servers})
    assert PASSWORD not in str(refused.value)


def test_a_broker_list_of_another_type_is_named_by_its_type_only() -> None:
    """A list of addresses is refused as a list, without echoing what it holds."""
    with pytest.raises(ConfigError, match="got list") as refused:
        ClientBalanceSettings(**{**BASE, "bootstrap_servers": [WITH_CREDENTIALS[1]]})
    assert PASSWORD not in str(refused.value)


@pytest.mark.parametrize("short", ["", "x", "fifteen-chars!!"])
def test_a_short_status_secret_is_refused_when_the_settings_are_made(short: str) -> None:
    """A status_secret under 16 characters (even "") is a ConfigError at once, never echoed."""
    with pytest.raises(ConfigError, match=r"has \d+ characters; use at least 16") as refused:
        ClientBalanceSettings(**BASE, status_secret=short)
    assert repr(short) not in str(refused.value)


def test_an_empty_status_secret_from_the_environment_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CLIENT_BALANCE_STATUS_SECRET set but empty is refused, not taken as a key."""
    monkeypatch.setenv("CLIENT_BALANCE_STATUS_SECRET", "")
    with pytest.raises(ConfigError, match="status_secret has 0 characters"):
        ClientBalanceSettings(**BASE)


def test_a_status_secret_of_16_characters_is_taken() -> None:
    """16 characters is the least a status_secret may have."""
    settings = ClientBalanceSettings(**BASE, status_secret="s" * 16)
    assert settings.status_secret is not None
