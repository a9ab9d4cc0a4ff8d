import functools
import logging
import pickle
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from client_balance import ClientBalanceSettings, ConfigError

BASE = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "billing"}


def test_defaults() -> None:
    """Defaults follow TubeMQ and Kafka where they have one."""
    settings = ClientBalanceSettings(**BASE)
    assert settings.start_position == "latest"
    assert settings.strategy == "modulo"
    assert settings.lease_timeout_s == 30.0
    assert settings.status_topic == "__client_balance_status"
    assert settings.filter_header == "type"
    assert settings.commit == "interval"
    assert settings.pinned == {}
    assert settings.max_buffered_bytes == 64 * 1024 * 1024


def test_environment_supplies_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """CLIENT_BALANCE_* variables fill fields, with the kafka dict as JSON."""
    monkeypatch.setenv("CLIENT_BALANCE_BOOTSTRAP_SERVERS", "k1:9092, k2:9093")
    monkeypatch.setenv("CLIENT_BALANCE_GROUP_ID", "g")
    monkeypatch.setenv(
        "CLIENT_BALANCE_KAFKA", '{"security.protocol": "SSL", "fetch.wait.max.ms": 50}'
    )
    monkeypatch.setenv("CLIENT_BALANCE_RECONCILE_INTERVAL_S", "2.5")
    settings = ClientBalanceSettings()
    assert settings.bootstrap_servers == "k1:9092,k2:9093"
    assert settings.kafka == {"security.protocol": "SSL", "fetch.wait.max.ms": 50}
    assert settings.reconcile_interval_s == 2.5


def test_missing_required_fields_name_the_env_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing bootstrap address says how to give it."""
    monkeypatch.delenv("CLIENT_BALANCE_BOOTSTRAP_SERVERS", raising=False)
    with pytest.raises(ConfigError, match="CLIENT_BALANCE_BOOTSTRAP_SERVERS"):
        ClientBalanceSettings(group_id="g")


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"bootstrap_servers": "localhost"}, "'localhost' is not host:port"),
        ({"bootstrap_servers": "a:9092,,b:1"}, "'' is not host:port"),
        ({"bootstrap_servers": "a:70000"}, "'a:70000' is not host:port"),
        ({"group_id": "  "}, "group_id must not be blank"),
        ({"group_id": "g" * 256}, "at most 255"),
        ({"start_position": "beginning"}, "start_position='beginning'"),
        (
            {"strategy": "fair"},
            "unknown strategy 'fair'; valid names: cooperative-sticky, hash, modulo, range, "
            "roundrobin, sticky",
        ),
        ({"reconcile_interval_s": 0}, "reconcile_interval_s=0"),
        ({"batch_max_messages": 0}, "batch_max_messages=0"),
        (
            {"max_buffered_bytes": 1000},
            "max_buffered_bytes=1000 is not allowed: give 65,536 (64 KiB) to 68,719,476,736",
        ),
        ({"max_buffered_bytes": 2**40}, f"max_buffered_bytes={2**40}"),
        ({"commit": "async"}, "commit='async'"),
        ({"status_topic": "bad topic"}, "topic name 'bad topic'"),
        ({"filter_header": ""}, "filter_header=''"),
        ({"lease_timeout_s": 5, "report_interval_s": 10}, "must be at least twice"),
        (
            {"lease_timeout_s": 30, "report_interval_s": 20},
            "lease_timeout_s=30.0 must be at least twice report_interval_s=20.0",
        ),
        ({"pinned": {"orders": 0}}, "partition key 'orders' does not parse"),
        ({"pinned": {"orders:1": -5}}, "bootstrap offset -5 is not allowed"),
        ({"pinned": {"1:orders:1": 0, "orders:1": 3}}, "pinned twice"),
        ({"grop_id": "x"}, "grop_id is not a setting"),
        ({"request_timeout_s": 20}, "must be at most half of lease_timeout_s=30.0"),
        ({"max_redeliveries": -1}, "max_redeliveries=-1"),
        ({"redelivery_policy": "retry"}, "redelivery_policy='retry'"),
        ({"redelivery_policy": "dead-letter"}, "needs dead_letter_topic"),
        ({"dead_letter_topic": "bad topic"}, "topic name 'bad topic'"),
    ],
)
def test_invalid_values_are_named(override: dict[str, object], fragment: str) -> None:
    """Each invalid value raises ConfigError that names it and what is allowed."""
    with pytest.raises(ConfigError) as caught:
        ClientBalanceSettings(**{**BASE, **override})
    assert fragment in str(caught.value)
    assert caught.value.code == 400


@pytest.mark.parametrize(
    ("kafka", "fragment"),
    [
        ({"enable.auto.commit": True}, "enable.auto.commit=True is not allowed"),
        ({"enable.auto.commit": "true"}, "enable.auto.commit='true' is not allowed"),
        ({"group.protocol": "consumer"}, "group.protocol='consumer' is not allowed"),
        ({"group.instance.id": "w1"}, "the SDK never joins"),
        ({"partition.assignment.strategy": "range"}, "set strategy instead"),
        ({"group.id": "other"}, "set group_id instead"),
        ({"bootstrap.servers": "x:1"}, "set bootstrap_servers instead"),
        ({"auto.offset.reset": "earliest"}, "set start_position"),
        ({"enable.auto.offset.store": True}, "managed by client-balance"),
        ({"": 1}, "non-empty strings"),
    ],
)
def test_librdkafka_settings_that_would_join_or_contradict(
    kafka: dict[str, object], fragment: str
) -> None:
    """The kafka passthrough refuses what would join a group or break confirm-only commits."""
    with pytest.raises(ConfigError, match="kafka") as caught:
        ClientBalanceSettings(**BASE, kafka=kafka)
    assert fragment in str(caught.value)


def test_consumer_config_is_assign_only() -> None:
    """The librdkafka config never auto-commits and keeps the classic protocol."""
    settings = ClientBalanceSettings(
        **BASE, start_position="earliest",
        kafka={"enable.auto.commit": False, "fetch.wait.max.ms": 50, "group.protocol": "classic"},
    )  # fmt: skip
    config = settings.consumer_config()
    assert config["enable.auto.commit"] is False
    assert config["enable.auto.offset.store"] is False
    assert config["group.protocol"] == "classic"
    assert config["auto.offset.reset"] == "error"  # the fetcher handles out-of-range itself
    assert config["group.id"] == "billing"
    assert config["fetch.wait.max.ms"] == 50
    assert "fetch.wait.max.ms" not in settings.admin_config()


def test_pinned_keys_are_normalized() -> None:
    """Pinned keys in any form are stored as 'topic:partition'."""
    settings = ClientBalanceSettings(**BASE, pinned={"3:orders:1": 100, "stock:0": -1})
    assert settings.pinned == {"orders:1": 100, "stock:0": -1}


def test_settings_are_frozen_and_picklable() -> None:
    """Settings cannot change after creation and cross process boundaries."""
    settings = ClientBalanceSettings(**BASE)
    with pytest.raises(Exception, match="frozen"):
        settings.group_id = "other"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(settings)) == settings


def test_config_error_pickles() -> None:
    """The ConfigError of a bad setting survives pickling with its message."""
    with pytest.raises(ConfigError) as caught:
        ClientBalanceSettings(**BASE, strategy="fair")
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is ConfigError
    assert str(again) == str(caught.value)


def test_client_defaults_apply_to_every_client_and_yield_to_kafka() -> None:
    """reconnect.backoff.ms is 10 for consumers and admin clients unless `kafka` sets it."""
    settings = ClientBalanceSettings(**BASE)
    assert settings.consumer_config()["reconnect.backoff.ms"] == 10
    assert settings.admin_config()["reconnect.backoff.ms"] == 10
    tuned = ClientBalanceSettings(**BASE, kafka={"reconnect.backoff.ms": 250})
    assert tuned.consumer_config()["reconnect.backoff.ms"] == 250
    assert tuned.admin_config()["reconnect.backoff.ms"] == 250


@pytest.mark.parametrize(
    "override",
    [
        {"request_timeout_s": 20},
        {"redelivery_policy": "dead-letter"},
        {"kafka": {"sasl.password": "hunter2", "group.id": "x"}},
        {"kafka": {"sasl.password": "hunter2", "fetch.wait.max.ms": [1]}},
    ],
)
def test_errors_and_repr_never_show_a_librdkafka_secret(override: dict[str, object]) -> None:
    """A refused setting names what is wrong without echoing the kafka values (credentials)."""
    kafka = {"sasl.password": "hunter2", **override.pop("kafka", {})}  # type: ignore[dict-item]
    with pytest.raises(ConfigError) as caught:
        ClientBalanceSettings(**{**BASE, "kafka": kafka, **override})
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(ClientBalanceSettings(**BASE, kafka={"sasl.password": "hunter2"}))


def test_a_callback_shows_by_name_and_a_misplaced_token_is_never_echoed() -> None:
    """A partial holding a client secret, or a token given where a callable goes, stays unshown.

    repr() printed the callable's own repr, a partial's arguments with it; the error for a
    non-callable oauth_cb quoted the value (the review of 2026-11-29).
    """

    def get_token(config: object, oauth_config: object) -> tuple[str, float]:
        return "t", 0.0

    token_maker = functools.partial(get_token, {"client_secret": "hunter2"})
    shown = repr(ClientBalanceSettings(**BASE, kafka={"oauth_cb": token_maker}))
    assert "hunter2" not in shown
    assert "'oauth_cb': <callable " in shown
    assert "get_token" in shown
    with pytest.raises(ConfigError) as caught:
        ClientBalanceSettings(**BASE, kafka={"oauth_cb": "hunter2-token"})
    assert "hunter2" not in str(caught.value)
    assert "oauth_cb takes a callable" in str(caught.value)


@pytest.mark.parametrize(
    "key",
    [
        "sasl.password",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.assertion.private.key.pem",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl.keystore.password",
    ],
)
def test_every_credential_librdkafka_flags_sensitive_is_masked(key: str) -> None:
    """Each credential property librdkafka 2.16 marks _RK_SENSITIVE stays out of repr and dumps.

    The two OAUTHBEARER assertion keys (its private key, in PEM, and its passphrase) and
    ``sasl.oauthbearer.config`` were shown in clear.
    """
    settings = ClientBalanceSettings(**BASE, kafka={key: "hunter2"})
    shown = [repr(settings), str(settings.model_dump()), settings.model_dump_json()]
    assert [text for text in shown if "hunter2" in text] == []
    assert settings.consumer_config()[key] == "hunter2"


def test_settings_and_a_consumer_load_neither_pydantic_nor_package_metadata() -> None:
    """Making settings and a consumer imports no pydantic and no importlib.metadata.

    Both stay in the process for good, and every full garbage collection walks their objects:
    pydantic's made the collections of a consumer loop three times as long.
    """
    code = textwrap.dedent(
        """
        import sys
        from client_balance import ClientBalanceConsumer, ClientBalanceSettings

        settings = ClientBalanceSettings(bootstrap_servers="127.0.0.1:9", group_id="g")
        ClientBalanceConsumer(settings)
        heavy = ("pydantic", "pydantic_core", "pydantic_settings", "importlib.metadata", "email")
        print(sorted(name for name in heavy if name in sys.modules))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("field", ["reconcile_interval_s", "batch_max_messages", "metrics_port"])
def test_a_bool_is_no_number(field: str) -> None:
    """True where a number belongs is a mistake, not 1."""
    with pytest.raises(ConfigError, match=f"{field}=True is not allowed: give a"):
        ClientBalanceSettings(**BASE, **{field: True})


class _OtherSecret:
    """A secret of another library (pydantic's SecretStr has the same one method)."""

    def get_secret_value(self) -> str:
        return "hunter2"


def test_a_secret_object_of_another_library_is_kept_and_never_shown() -> None:
    """Anything with get_secret_value() is a secret: passed to librdkafka, masked elsewhere."""
    settings = ClientBalanceSettings(**BASE, kafka={"sasl.password": _OtherSecret()})
    assert settings.consumer_config()["sasl.password"] == "hunter2"
    shown = [repr(settings), settings.model_dump_json(), str(settings.model_dump())]
    assert not [text for text in shown if "hunter2" in text]


def test_model_copy_applies_the_update_unchecked() -> None:
    """model_copy(update=...) skips the checks (for tests of what a reader refuses)."""
    settings = ClientBalanceSettings(**BASE)
    copy = settings.model_copy(update={"lease_timeout_s": 1e6})
    assert (copy.lease_timeout_s, copy.group_id) == (1e6, "billing")
    assert "lease_timeout_s" in copy.model_fields_set
    assert settings.lease_timeout_s == 30.0


def test_json_null_in_the_environment_leaves_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """CLIENT_BALANCE_KAFKA=null is as if unset."""
    monkeypatch.setenv("CLIENT_BALANCE_KAFKA", "null")
    assert ClientBalanceSettings(**BASE).kafka == {}


def test_a_bad_environment_variable_of_a_field_given_as_a_keyword_is_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Keywords win: CLIENT_BALANCE_KAFKA that is not JSON does not matter when kafka= is given."""
    monkeypatch.setenv("CLIENT_BALANCE_KAFKA", "{bad")
    assert ClientBalanceSettings(**BASE, kafka={"client.id": "x"}).kafka == {"client.id": "x"}


def test_a_bad_environment_variable_is_reported_with_the_other_problems(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CLIENT_BALANCE_<FIELD> that is not JSON joins the list of problems, not raised alone."""
    monkeypatch.setenv("CLIENT_BALANCE_KAFKA", "{bad")
    with pytest.raises(ConfigError) as caught:
        ClientBalanceSettings(**BASE, reconcile_interval_s=-1)
    message = str(caught.value)
    assert "CLIENT_BALANCE_KAFKA is not valid" in message
    assert "reconcile_interval_s=-1" in message


def test_one_setting_in_two_spellings_with_two_values_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CLIENT_BALANCE_GROUP_ID and client_balance_group_id disagreeing: refused, no value shown."""
    monkeypatch.delenv("CLIENT_BALANCE_GROUP_ID", raising=False)
    monkeypatch.setenv("CLIENT_BALANCE_GROUP_ID", "upper-secret-ish")
    monkeypatch.setenv("client_balance_group_id", "lower-secret-ish")
    with pytest.raises(ConfigError, match="client_balance_group_id are set to different") as caught:
        ClientBalanceSettings(bootstrap_servers="h:1")
    assert "secret-ish" not in str(caught.value)
    monkeypatch.setenv("client_balance_group_id", "upper-secret-ish")  # the same value: fine
    assert ClientBalanceSettings(bootstrap_servers="h:1").group_id == "upper-secret-ish"


def test_model_copy_keeps_new_secrets_out_of_repr_and_json() -> None:
    """A sasl.password or status_secret given to model_copy shows in neither repr nor JSON."""
    settings = ClientBalanceSettings(**BASE, kafka={"sasl.username": "u", "sasl.password": "old"})
    rotated = settings.model_copy(
        update={"kafka": {**settings.kafka, "sasl.password": "hunter2"}, "status_secret": "hunter2"}
    )
    for shown in (repr(rotated), rotated.model_dump_json()):
        assert "hunter2" not in shown
    assert rotated.kafka["sasl.password"].get_secret_value() == "hunter2"
    assert rotated.status_secret is not None
    assert rotated.status_secret.get_secret_value() == "hunter2"
    assert rotated.consumer_config()["sasl.password"] == "hunter2"


def test_checking_kafka_settings_with_debug_writes_nothing_to_stderr(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """kafka={"debug": ..., "logger": ...}: librdkafka's check at settings time prints nothing."""
    logger = logging.getLogger("tests.librdkafka")
    ClientBalanceSettings(**BASE, kafka={"debug": "generic", "logger": logger})
    assert "%7|" not in capfd.readouterr().err


def test_credentials_in_a_url_or_a_callable_never_show() -> None:
    """A URL's user:password, a callable's arguments: masked in repr, str, JSON and copies.

    An OIDC token endpoint with credentials in its URL, a decrypting deserializer partial and
    a registry URL given to model_copy were shown whole (the review of 2026-11-29, later).
    """
    decrypt = functools.partial(bytes, encoding="S3CRETaeskey")
    for url in (
        "https://cid:S3CRETurl@idp.example/token",
        "https://cid:S3CRET/url@idp.example/token",  # a raw "/" and "@" in the password
        "https://cid:S3CRET@url@idp.example/token",
    ):
        settings = ClientBalanceSettings(
            **BASE, kafka={"sasl.oauthbearer.token.endpoint.url": url}, value_deserializer=decrypt
        )
        for shown in (repr(settings), str(settings), settings.model_dump_json()):
            assert "S3CRET" not in shown
            assert "idp.example/token" in shown
    with pytest.raises(ConfigError, match="schema_registry_url") as refused:
        settings.model_copy(update={"schema_registry_url": "https://u:S3CRET/reg@registry:8081"})
    assert "S3CRET" not in str(refused.value)
    kept = settings.model_copy(update={"group_id": "svc://team@prod"})  # no URL of credentials
    assert kept.group_id == "svc://team@prod"


def test_a_kafka_value_of_the_wrong_type_is_named_by_its_type_only() -> None:
    """A partial under a key that takes no callable: the error names the key and the type.

    Its repr, a token inside, was printed in the ConfigError (the review of 2026-11-29, later).
    """
    fetch_token: Any = functools.partial(dict, client_secret="S3CRETtoken")  # noqa: S106 - the canary
    with pytest.raises(ConfigError, match="oauth_callback") as refused:
        ClientBalanceSettings(**BASE, kafka={"oauth_callback": fetch_token})
    assert "S3CRET" not in str(refused.value)
    assert "S3CRET" not in str(pickle.loads(pickle.dumps(refused.value)))
