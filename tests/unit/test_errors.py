import inspect
import logging
import pickle

import pytest

import client_balance
from client_balance import errors
from client_balance._kafka import from_kafka_exception
from client_balance._secrets import MASK, scrub

EXAMPLES: list[errors.ClientBalanceError] = [
    errors.ConfigError("bad"),
    errors.InvalidPartitionKeyError("bad key", key="x"),
    errors.InvalidOffsetError("bad offset", offset=-7),
    errors.NotStartedError("not started"),
    errors.InvalidConfirmContextError("stale", context="1:t:0:9"),
    errors.StrategyContractError("impure", strategy="mine", violation="deterministic"),
    errors.NoMessageError("nothing", code=408),
    errors.GroupInUseError("in use", group_id="g"),
    errors.PartitionNotFoundError("nope", key="1:t:9"),
    errors.PartitionOccupiedError("taken", key="1:t:0", holder="c-1"),
    errors.TooFrequentError("slow down", key="1:t:0", retry_after_s=5.0),
    errors.PinConflictError("pinned there", key="1:t:0", holder="c-3"),
    errors.CallbackError("assigner raised", callback="assigner", round_number=4),
    errors.RedeliveryLimitError("stuck", key="1:t:0", offset=7, rollbacks=4),
    errors.DataLossError("gone", partition="orders:3", lost_from=10, lost_to=25),
    errors.DeserializationError(
        "bad json", topic="t", partition=0, offset=3, field="value", deserializer="json"
    ),
    errors.GroupConflictError("contradicts"),
    errors.InconsistentTopicsError("topics", ours=["a"], group=["a", "b"]),
    errors.InconsistentFiltersError("filters", ours={"a": ["x"]}, group={}),
    errors.InconsistentStrategyError("strategy", ours="range", group="modulo"),
    errors.PartitionUnsubscribableError("no leader", key="-1:t:0"),
    errors.InconsistentSourceCountError("429", ours=3, group=4),
    errors.DuplicateNodeIdError("430", node_id=1, holder="c-2"),
    errors.KafkaClientError("kafka", kafka_code=25, kafka_name="UNKNOWN_MEMBER_ID"),
    errors.BrokerToolMissingError("no java", tool="java"),
    errors.BrokerFetchError("mvn failed", output_tail="tail"),
    errors.BrokerStartError("down", log_tail="boom", log_path="broker.log"),
]


def test_every_public_error_has_an_example() -> None:
    """The examples below cover the whole tree, so the pickling test covers it too."""
    classes = {
        obj for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, errors.ClientBalanceError)
    }  # fmt: skip
    covered = {type(example) for example in EXAMPLES} | {
        errors.ClientBalanceError, errors.BrokerError,
    }  # fmt: skip
    assert classes == covered


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda e: type(e).__name__)
def test_errors_survive_pickling(error: errors.ClientBalanceError) -> None:
    """Spark ships errors between processes: type, message, code and fields come back."""
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert again.code == error.code
    assert again.__dict__ == error.__dict__


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (errors.ConfigError, 400), (errors.NotStartedError, 420),
        (errors.PartitionNotFoundError, 404), (errors.PartitionOccupiedError, 410),
        (errors.TooFrequentError, 421), (errors.PartitionUnsubscribableError, 422),
        (errors.InconsistentSourceCountError, 429), (errors.DuplicateNodeIdError, 430),
        (errors.KafkaClientError, None), (errors.BrokerError, None), (errors.DataLossError, None),
    ],
)  # fmt: skip
def test_tubemq_codes(cls: type[errors.ClientBalanceError], code: int | None) -> None:
    """Each error carries TubeMQ's code for the same condition."""
    assert cls.code == code


def test_errors_are_exported_from_the_package() -> None:
    """Users catch errors from the top-level namespace."""
    for name in errors.__all__:
        assert getattr(client_balance, name) is getattr(errors, name)


class _StandInKafkaError:
    def __init__(
        self, code: int = 25, name: str = "UNKNOWN_MEMBER_ID", text: str = "Broker: Unknown member"
    ) -> None:
        self._code, self._name, self._text = code, name, text

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        return self._name

    def str(self) -> str:
        return self._text

    def retriable(self) -> bool:
        return False


def test_kafka_exceptions_map_to_kafka_client_error() -> None:
    """A KafkaException-shaped error keeps librdkafka's code and name."""
    mapped = from_kafka_exception(RuntimeError(_StandInKafkaError()), "committing orders:3")
    assert isinstance(mapped, errors.KafkaClientError)
    assert (mapped.kafka_code, mapped.kafka_name, mapped.retriable) == (
        25,
        "UNKNOWN_MEMBER_ID",
        False,
    )
    assert str(mapped) == "committing orders:3 failed: UNKNOWN_MEMBER_ID: Broker: Unknown member"


def test_a_record_too_large_names_the_limits_to_raise() -> None:
    """MSG_SIZE_TOO_LARGE says which settings bound a record, so the reader knows what to raise."""
    too_large = RuntimeError(
        _StandInKafkaError(10, "MSG_SIZE_TOO_LARGE", "Broker: Message size too large")
    )
    mapped = from_kafka_exception(too_large, "writing to the status topic 's'")
    assert mapped.kafka_name == "MSG_SIZE_TOO_LARGE"
    assert "max.message.bytes" in str(mapped)
    assert "message.max.bytes" in str(mapped)


def test_unknown_exceptions_still_map() -> None:
    """Anything else becomes a KafkaClientError with code -1 and the original text."""
    mapped = from_kafka_exception(OSError("socket closed"), "listing topics")
    assert mapped.kafka_code == -1
    assert "socket closed" in str(mapped)


OAUTH_SECRET = "hunter2-0c7a1f"  # noqa: S105 - a test value
OAUTH_CONFIG = f"principal=admin scope=read bogus={OAUTH_SECRET}"


def test_a_refused_oauthbearer_config_shows_its_secret_in_no_message_pickle_or_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The quote librdkafka makes of a bad sasl.oauthbearer.config reaches no error or log."""
    caplog.set_level(logging.DEBUG, logger="client_balance")
    settings = client_balance.ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:1", group_id="g", request_timeout_s=3,
        kafka={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
               "enable.sasl.oauthbearer.unsecure.jwt": True,
               "sasl.oauthbearer.config": OAUTH_CONFIG},
    )  # fmt: skip
    consumer = client_balance.ClientBalanceConsumer(settings)
    try:
        with pytest.raises(errors.KafkaClientError) as caught:
            consumer.start(["orders"], source_count=1, node_id=0)
    finally:
        consumer.shutdown()
    message = str(caught.value)
    assert "refused this client's own sasl.oauthbearer.config" in message
    assert "sasl.password" not in message  # no login was tried: the password is not the fault
    assert OAUTH_SECRET not in message
    assert OAUTH_SECRET.encode() not in pickle.dumps(caught.value)
    logged = [record.getMessage() + repr(record.__dict__) for record in caplog.records]
    assert logged  # the fetcher's error_cb line is among them
    assert not [text for text in logged if OAUTH_SECRET in text]


def test_scrub_masks_secret_values_their_tokens_and_a_quoted_tail() -> None:
    """scrub() hides whole secret values, each key=value token in one, and a quoted config."""
    kafka = {"sasl.password": "pw-7b2e", "sasl.oauthbearer.config": OAUTH_CONFIG, "acks": "all"}
    assert scrub("login pw-7b2e refused", kafka) == f"login {MASK} refused"
    assert scrub(f"got {OAUTH_CONFIG}.", kafka) == f"got {MASK}."
    assert scrub(f"bad token bogus={OAUTH_SECRET} here", kafka) == f"bad token bogus={MASK} here"
    assert OAUTH_SECRET not in scrub(f"value {OAUTH_SECRET!r}", kafka)
    assert scrub("acks all", kafka) == "acks all"  # not a secret
    assert scrub("config beginning at: x=y z", None) == f"config beginning at: {MASK}"


def test_scrub_leaves_words_that_only_contain_a_secret_token_and_the_plain_ones() -> None:
    """Token values are masked as whole words; principal, scope and lifeSeconds are no secret."""
    kafka = {"sasl.oauthbearer.config": "principal=admin scope=read lifeSeconds=3600 x=ready"}
    said = "topic admin_events already retrying after 3600ms; token ready"
    assert scrub(said, kafka) == f"topic admin_events already retrying after 3600ms; token {MASK}"
    error = 'KafkaError{code=_INVALID_ARG,str="Unrecognized config beginning at: x=ready"}'
    assert (
        scrub(error, kafka)
        == f'KafkaError{{code=_INVALID_ARG,str="Unrecognized config beginning at: {MASK}"}}'
    )


def test_scrub_cuts_a_quoted_tail_whole_and_masks_credentials_in_urls() -> None:
    """A quote inside a refused config's tail, and a URL's user:password, never come through.

    The tail was cut at its first quote, and what followed it was shown; a token endpoint's
    credentials in a librdkafka log line passed unmasked (the review of 2026-11-29, later).
    """
    error = 'KafkaError{code=_INVALID_ARG,str="config beginning at: x=ab"S3CRETkey"}'
    assert (
        scrub(error, None) == f'KafkaError{{code=_INVALID_ARG,str="config beginning at: {MASK}"}}'
    )
    said = 'Failed to retrieve OIDC token from "https://cid:S3CRETurl@idp.example/token"'
    assert scrub(said) == f'Failed to retrieve OIDC token from "https://{MASK}@idp.example/token"'
    said = "token from https://cid:S3CRET/u@rl@idp.example/token failed; mail admin@example.com"
    masked = f"token from https://{MASK}@idp.example/token failed; mail admin@example.com"
    assert scrub(said) == masked


@pytest.mark.parametrize(
    "error",
    [
        errors.ConfigError(42),  # type: ignore[arg-type]
        errors.ClientBalanceError(None),  # type: ignore[arg-type]
        errors.ConfigError("x"),
    ],
)
def test_an_error_of_plain_arguments_keeps_their_types_through_pickle(
    error: errors.ClientBalanceError,
) -> None:
    """ConfigError(42) comes back from pickle with args (42,), not ('42',)."""
    copy = pickle.loads(pickle.dumps(error))
    assert copy.args == error.args
    assert [type(arg) for arg in copy.args] == [type(arg) for arg in error.args]
    assert copy.message == error.message


def test_an_error_of_an_argument_that_does_not_pickle_still_pickles_as_its_text() -> None:
    """An error made with a lambda comes back from pickle with the lambda's text."""
    error = errors.ConfigError(lambda: 1)  # type: ignore[arg-type]
    copy = pickle.loads(pickle.dumps(error))
    assert copy.message == error.message
