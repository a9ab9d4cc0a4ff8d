"""The Schema Registry branch of "avro": confluent-kafka's deserializer, wired (edge cases).

Needs the extra client-balance[schema-registry] (in the test extra). confluent-kafka's in-memory
registry (``mock://``) stands in for a server here; tests/integration/test_schema_registry.py
runs the same path against a real one, and docs/deserializers.md says what is left untested.
"""

import contextlib
import http.server
import json
import socket
import threading
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from client_balance import DeserializationError
from tests.unit.test_deserializers import SCHEMA, avro_bytes, decode_one, message


def registry_framed(client: SchemaRegistryClient, record: dict[str, Any]) -> bytes:
    """``record`` as confluent-kafka's AvroSerializer frames it, registering SCHEMA."""
    serializer = AvroSerializer(client, json.dumps(SCHEMA))
    framed = serializer(record, SerializationContext("orders", MessageField.VALUE))
    assert isinstance(framed, bytes)
    return framed


def test_registry_avro_reads_framed_records_through_confluent_kafka(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With schema_registry_url, 'avro' is confluent-kafka's AvroDeserializer over the registry.

    confluent-kafka's in-memory registry (mock://) stands in for a server: the record is
    framed by its AvroSerializer and read back through the decoder's own registry client.
    """
    registry = SchemaRegistryClient.new_client({"url": "mock://wiring"})
    framed = registry_framed(registry, {"id": 3, "item": "jam"})
    assert framed[0] == 0  # the magic byte, then the 4-byte schema id
    monkeypatch.setattr(SchemaRegistryClient, "new_client", staticmethod(lambda conf: registry))
    values = {"value_deserializer": "avro", "schema_registry_url": "mock://wiring"}
    assert decode_one(message(framed), **values).value() == {"id": 3, "item": "jam"}
    reader = {**SCHEMA, "fields": [*SCHEMA["fields"], {"name": "n", "type": "int", "default": 1}]}
    with_reader = decode_one(message(framed), **values, value_avro_schema=reader)
    assert with_reader.value() == {"id": 3, "item": "jam", "n": 1}
    with pytest.raises(DeserializationError) as caught:  # not framed: the data's fault
        decode_one(message(avro_bytes({"id": 3, "item": "jam"})), **values)
    assert caught.value.retriable is False


def test_registry_errors_tell_the_data_from_the_registry() -> None:
    """An unknown schema id counts against the data; a registry that cannot be reached does not."""
    framed = registry_framed(SchemaRegistryClient.new_client({"url": "mock://a"}), {"id": 1,
                             "item": "x"})  # fmt: skip
    unknown = {"value_deserializer": "avro", "schema_registry_url": "mock://empty"}
    with pytest.raises(DeserializationError) as caught:
        decode_one(message(framed), **unknown)
    assert caught.value.retriable is False
    away = {"value_deserializer": "avro", "schema_registry_url": "http://127.0.0.1:1"}
    with pytest.raises(DeserializationError, match="did not answer") as caught:
        decode_one(message(framed), **away)
    assert caught.value.retriable is True


class _NotARegistry(http.server.BaseHTTPRequestHandler):
    """A proxy or a wrong base path: an HTML 404 for every path, no registry error code."""

    def do_GET(self) -> None:
        body = b"<html><body>404 Not Found</body></html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


def test_a_404_that_is_not_the_registrys_own_is_no_fault_of_the_data() -> None:
    """A wrong registry URL answers 404 to everything: rolled back uncounted, never skipped.

    Any 404 counted against the data: with "skip" or "dead-letter", every record of the topic
    went past the application (the review of 2026-11-29). The registry's own "not found"
    carries a 4040x code in its JSON answer.
    """
    framed = registry_framed(SchemaRegistryClient.new_client({"url": "mock://b"}), {"id": 1,
                             "item": "x"})  # fmt: skip
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotARegistry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/wrong/base"
        with pytest.raises(DeserializationError) as caught:
            decode_one(message(framed), value_deserializer="avro", schema_registry_url=url)
    finally:
        server.shutdown()
        server.server_close()
    assert caught.value.retriable is True


def test_a_registry_that_never_answers_fails_the_decode_within_the_request_timeout() -> None:
    """A registry that accepts but never answers gives a retriable DeserializationError, no hang."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # the server closed at the end of the test
            while True:
                held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    framed = registry_framed(SchemaRegistryClient.new_client({"url": "mock://silent"}), {"id": 1,
                             "item": "x"})  # fmt: skip
    silent = {
        "value_deserializer": "avro",
        "schema_registry_url": f"http://127.0.0.1:{server.getsockname()[1]}",
        "request_timeout_s": 0.2,
    }
    outcome: list[BaseException] = []

    def decode() -> None:
        try:
            decode_one(message(framed), **silent)
        except BaseException as error:  # handed to the test thread, whatever it is
            outcome.append(error)

    decoding = threading.Thread(target=decode, daemon=True)
    decoding.start()
    # 4 tries of 0.2 s, and confluent-kafka's backoff between them (at most 7 s in all).
    decoding.join(30)
    try:
        assert not decoding.is_alive(), "the decode still waits for the registry"
        (error,) = outcome
        assert isinstance(error, DeserializationError)
        assert error.retriable is True
        assert "Schema Registry did not answer" in str(error)
    finally:
        server.close()
        for connection in held:  # lets a decode still waiting (before the fix) end
            connection.close()
