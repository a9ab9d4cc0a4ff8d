import base64
import copy
import http.server
import io
import json
import pickle
import threading
from typing import Any, ClassVar

import fastavro
import pytest
from confluent_kafka import Message

from client_balance import (
    ClientBalanceSettings,
    ConfigError,
    DecodedMessage,
    DeserializationError,
)
from client_balance.consumer._decode import Decoder

SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}


def settings(**values: Any) -> ClientBalanceSettings:
    """Settings for a broker that is never reached: only the decoding matters here."""
    return ClientBalanceSettings(bootstrap_servers="127.0.0.1:9092", group_id="g", **values)


def message(value: bytes | None, key: bytes | None = None, offset: int = 0) -> Message:
    """A real confluent-kafka Message, as consume() would return it."""
    return Message(topic="orders", partition=2, offset=offset, key=key, value=value, headers=[])


def avro_bytes(record: object, schema: Any = SCHEMA) -> bytes:
    """Fastavro's schemaless encoding of ``record``."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def decode_one(raw: Message, **values: Any) -> DecodedMessage:
    """``raw`` decoded with the deserializers of these settings."""
    decoder = Decoder.of(settings(**values))
    assert decoder is not None
    (decoded,) = decoder.decode([raw])
    return decoded


def test_bytes_on_both_sides_builds_no_decoder() -> None:
    """The default decodes nothing: no decoder, so batches go out as fetched at no cost."""
    assert Decoder.of(settings()) is None
    assert Decoder.of(settings(value_deserializer="json"), value_deserializer="bytes") is None


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("str", "naïve".encode(), "naïve"),
        ("json", b'{"id": 1, "tags": ["a"]}', {"id": 1, "tags": ["a"]}),
        ("bytes", b"\x00\xff", b"\x00\xff"),
    ],
)
def test_each_name_decodes_values_and_keeps_the_raw_bytes(
    name: str, raw: bytes, expected: object
) -> None:
    """str, json and bytes decode a value; raw_value() and message give the bytes as fetched."""
    decoded = decode_one(message(raw, key=b"k"), value_deserializer=name, key_deserializer="str")
    assert decoded.value() == expected
    assert decoded.raw_value() == raw
    assert decoded.message.value() == raw
    assert decoded.key() == "k"
    assert decoded.raw_key() == b"k"
    assert (decoded.topic(), decoded.partition(), decoded.offset()) == ("orders", 2, 0)
    assert decoded.headers() == []
    assert "naïve" not in repr(decoded)


def test_avro_reads_schemaless_records_with_the_schema_as_dict_or_json_text() -> None:
    """'avro' with value_avro_schema reads fastavro's schemaless bytes; the schema may be JSON."""
    raw = avro_bytes({"id": 7, "item": "tea"})
    for schema in (SCHEMA, json.dumps(SCHEMA)):
        decoded = decode_one(message(raw), value_deserializer="avro", value_avro_schema=schema)
        assert decoded.value() == {"id": 7, "item": "tea"}
    key = decode_one(message(b"", key=avro_bytes(5, "long")), key_deserializer="avro",
                     key_avro_schema="long")  # fmt: skip
    assert key.key() == 5


def test_a_callable_gets_the_raw_bytes_and_none_passes_through_the_names() -> None:
    """A callable sees bytes (or None); the built-ins turn a tombstone's None into None."""
    seen: list[bytes | None] = []

    def upper(data: bytes | None) -> str | None:
        seen.append(data)
        return None if data is None else data.decode().upper()

    decoder = Decoder.of(settings(value_deserializer="json"), value_deserializer=upper)
    assert decoder is not None
    values = [m.value() for m in decoder.decode([message(b"a"), message(None, offset=1)])]
    assert values == ["A", None]
    assert seen == [b"a", None]
    for name in ("str", "json"):
        assert decode_one(message(None), value_deserializer=name).value() is None


def test_start_arguments_override_the_settings() -> None:
    """start()'s deserializers win over the settings'."""
    decoder = Decoder.of(settings(value_deserializer="str"), value_deserializer="json")
    assert decoder is not None
    assert decoder.decode([message(b"[1]")])[0].value() == [1]


@pytest.mark.parametrize("bad", ["xml", "JSON", "", 5, None])
def test_a_bad_name_is_a_config_error_naming_it_and_the_allowed_ones(bad: object) -> None:
    """Settings and start() refuse an unknown deserializer and list what is allowed."""
    if bad is not None:
        with pytest.raises(ConfigError, match=r"value_deserializer=.*'bytes', 'str', 'json'"):
            settings(value_deserializer=bad)
    with pytest.raises(ConfigError, match=r"key_deserializer=.*'avro', or a callable"):
        Decoder.of(settings(), key_deserializer=bad or "nope")  # type: ignore[arg-type]  # wrong on purpose


def test_avro_needs_a_schema_or_a_registry_and_a_valid_schema() -> None:
    """'avro' alone, or with a schema fastavro refuses, is a ConfigError naming the field."""
    with pytest.raises(ConfigError, match=r"value_avro_schema .* or schema_registry_url"):
        settings(value_deserializer="avro")
    with pytest.raises(ConfigError, match=r"key_avro_schema .* or schema_registry_url"):
        Decoder.of(settings(), key_deserializer="avro")
    with pytest.raises(ConfigError, match="value_avro_schema is not a valid Avro schema"):
        settings(value_avro_schema={"type": "no-such-type"})
    with pytest.raises(ConfigError, match="schema_registry_url"):
        settings(schema_registry_url="ftp://registry:8081")


def test_a_value_that_does_not_decode_names_where_never_the_bytes() -> None:
    """DeserializationError names topic, partition, offset and side, and pickles; no payload."""
    decoder = Decoder.of(settings(value_deserializer="json", key_deserializer="str"))
    assert decoder is not None
    with pytest.raises(DeserializationError) as caught:
        decoder.decode([message(b"[1]", offset=4), message(b"secret-card-4111", offset=5)])
    error = caught.value
    assert (error.topic, error.partition, error.offset, error.field) == ("orders", 2, 5, "value")
    assert (error.deserializer, error.retriable) == ("json", False)
    assert "secret-card" not in str(error)
    assert isinstance(error.__cause__, json.JSONDecodeError)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.offset, copy.field, str(copy)) == (5, "value", str(error))
    with pytest.raises(DeserializationError) as key_error:
        decoder.decode([message(b"1", key=b"\xff\xfe")])
    assert key_error.value.field == "key"


def test_avro_with_trailing_bytes_is_refused() -> None:
    """A record of another schema (bytes left over after reading) does not pass as this one."""
    raw = avro_bytes({"id": 7, "item": "tea"}) + b"\x02"
    with pytest.raises(DeserializationError, match="ValueError"):
        decode_one(message(raw), value_deserializer="avro", value_avro_schema=SCHEMA)


def test_a_decoded_message_passes_other_calls_to_the_message_and_copies() -> None:
    """error(), latency(), len() are the message's; copy.copy works (no recursion on slots)."""
    decoded = decode_one(message(b'"abc"'), value_deserializer="json")
    assert (decoded.error(), decoded.latency(), len(decoded)) == (None, None, 5)
    assert copy.copy(decoded).value() == "abc"
    with pytest.raises(AttributeError):
        decoded.no_such_method()


def test_registry_credentials_stay_out_of_reprs_and_errors() -> None:
    """schema_registry_basic_auth is a secret; a URL holding credentials is refused unshown."""
    held = settings(schema_registry_url="https://registry:8081", schema_registry_basic_auth="u:pw9")
    assert "pw9" not in repr(held)
    with pytest.raises(ConfigError) as caught:
        settings(schema_registry_url="https://u:pw9@registry:8081")
    assert "pw9" not in str(caught.value)
    assert "schema_registry_basic_auth" in str(caught.value)
    # A password with a raw "/" hid its "@" from the check: accepted, shown in every repr.
    with pytest.raises(ConfigError) as caught:
        settings(schema_registry_url="https://u:pw/9@registry:8081")
    assert "pw/9" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("HTTPS://alice:hunter2@reg:8081", "'HTTPS://**********@reg:8081'"),
        ("http:/alice:hunter2@reg:8081", "'http:/**********@reg:8081'"),
        ("http://reg:8081, htps://alice:hunter2@reg2", "'htps://**********@reg2'"),
    ],
)
@pytest.mark.parametrize("given_as", ["keyword", "environment"])
def test_a_refused_registry_url_never_shows_its_userinfo(
    monkeypatch: pytest.MonkeyPatch, url: str, shown: str, given_as: str
) -> None:
    """A registry URL refused for its scheme is named with its user and password masked."""
    if given_as == "environment":
        monkeypatch.setenv("CLIENT_BALANCE_SCHEMA_REGISTRY_URL", url)
    with pytest.raises(ConfigError) as caught:
        settings(**({"schema_registry_url": url} if given_as == "keyword" else {}))
    message = str(caught.value)
    assert shown in message
    assert "is not an http:// or https:// URL" in message
    assert "hunter2" not in message
    assert "alice" not in message
    assert b"hunter2" not in pickle.dumps(caught.value)


class _Registry(http.server.BaseHTTPRequestHandler):
    """A Schema Registry of one schema (id 1), behind basic auth: ``u`` / ``pw9``."""

    authorizations: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        """Answer GET /schemas/ids/1 to a caller who logged in; 401 to anyone else, else 404."""
        said = self.headers.get("Authorization")
        expected = "Basic " + base64.b64encode(b"u:pw9").decode()
        status, body = 404, {"error_code": 40403, "message": "not here"}
        if self.path.startswith("/schemas/ids/1"):
            self.authorizations.append(said)
            ok = said == expected
            status, body = (200, {"schema": json.dumps(SCHEMA)}) if ok else (401, {})
        answer = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def test_registry_basic_auth_logs_in_and_decodes() -> None:
    """schema_registry_basic_auth reaches the registry as HTTP basic auth, and values decode.

    The client was given basic.auth.credentials.source as well, which confluent-kafka 2.16
    refuses ("Unrecognized properties"): every group with registry credentials failed to
    decode anything (the review of 2026-11-29, later).
    """
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        framed = b"\x00" + (1).to_bytes(4, "big") + avro_bytes({"id": 7, "item": "tea"})
        decoded = decode_one(
            message(framed),
            value_deserializer="avro",
            schema_registry_url=url,
            schema_registry_basic_auth="u:pw9",
        )
    finally:
        server.shutdown()
    assert decoded.value() == {"id": 7, "item": "tea"}
    assert _Registry.authorizations[-1] == "Basic " + base64.b64encode(b"u:pw9").decode()
