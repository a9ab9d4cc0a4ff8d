"""The data source's options without Spark or a broker: secrets out of sight, bad input refused."""

from __future__ import annotations

import pickle
import re
from typing import Any

import pytest
from pyspark import cloudpickle

from client_balance import ConfigError
from client_balance._secrets import MASK
from client_balance.keys import TopicPartition
from client_balance.spark import NodePartition, SourceOptions, parse_options
from client_balance.spark._source import _node_partitions

pytestmark = pytest.mark.spark

CANARY = "canary-pw-7f3a9c"
BASE = {
    "kafka.bootstrap.servers": "h:1",
    "topics": "t",
    "group.id": "g",
    "kafka.sasl.password": CANARY,
    "kafka.security.protocol": "SASL_SSL",
}


def _options(**more: Any) -> dict[str, Any]:
    return {**BASE, **more}


def _partitions(options: SourceOptions) -> list[NodePartition]:
    ranges = {TopicPartition("t", 0): (0, 5), TopicPartition("t", 1): (2, 9)}
    return _node_partitions(ranges, options)


def test_options_and_partitions_never_show_the_password() -> None:
    """No repr or str of the options or of a task's partition contains a kafka.* secret."""
    options = parse_options(BASE)
    partitions = _partitions(options)
    assert partitions
    shown = [repr(options), str(options), repr(options.kafka), str(options.kafka)]
    shown += [repr(options.kafka_config("g")), *map(repr, partitions), *map(str, partitions)]
    for text in shown:
        assert CANARY not in text
        assert MASK in text
    assert "SASL_SSL" in repr(options)  # only secrets are masked


@pytest.mark.parametrize("dump", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_partitions_carry_the_real_password_to_the_executors(dump: Any) -> None:
    """Pickled, as Spark ships them, options and partitions keep the real secret."""
    options = parse_options(BASE)
    assert options.kafka["sasl.password"] == CANARY
    assert pickle.loads(dump(options)).kafka["sasl.password"] == CANARY
    for partition in _partitions(options):
        assert partition.kafka["sasl.password"] == CANARY
        copy = pickle.loads(dump(partition))
        assert copy.kafka["sasl.password"] == CANARY
        assert copy.kafka["bootstrap.servers"] == "h:1"
        assert CANARY not in repr(copy)


def test_options_built_by_hand_are_masked_too() -> None:
    """SourceOptions and NodePartition made with a plain dict still mask it."""
    options = SourceOptions(
        bootstrap_servers="h:1", topics=("t",), group_id="g", source_count=1, strategy="modulo",
        starting=-2, ending=-1, kafka={"sasl.password": CANARY}, batch_max_messages=10,
    )  # fmt: skip
    partition = NodePartition(
        node_id=0, ranges=(), kafka={"ssl.key.password": CANARY}, batch_max_messages=1
    )
    assert CANARY not in repr(options)
    assert CANARY not in repr(partition)
    assert partition.kafka["ssl.key.password"] == CANARY


@pytest.mark.parametrize(
    ("more", "message"),
    [
        ({"kafka.sasl.password": [CANARY]}, "option kafka.sasl.password is of type list"),
        ({"kafka.sasl.password": {CANARY: CANARY}}, "option kafka.sasl.password is of type dict"),
        ({"KAFKA.SASL.PASSWORD": CANARY}, "option 'KAFKA.SASL.PASSWORD' is given twice"),
        ({"kafka.": CANARY}, "option 'kafka.' names no property"),
        ({"kafka.group.id": CANARY}, "option kafka.group.id is not allowed"),
        ({"startingOffsets": "soon", "sourceCount": "0"}, "startingOffsets='soon'"),
        ({"sourceCount": "-1", "kafka.ssl.key.password": CANARY}, "sourceCount='-1'"),
        ({"strategy": "no-such-strategy"}, "no-such-strategy"),
        ({"topics": "bad topic"}, "'bad topic'"),
        ({1: CANARY}, "option names are strings, not int"),
    ],
)
def test_errors_never_show_a_kafka_secret(more: dict[Any, Any], message: str) -> None:
    """A ConfigError from bad options, one or several, never contains a kafka.* secret."""
    with pytest.raises(ConfigError) as raised:
        parse_options({**BASE, **more})
    assert message.replace("'", "") in str(raised.value).replace("'", "")
    assert CANARY not in str(raised.value)
    assert CANARY not in repr(raised.value)
    assert CANARY not in str(pickle.loads(pickle.dumps(raised.value)))


@pytest.mark.parametrize(
    ("more", "message"),
    [
        ({"startingOffsets": "[" * 100_000}, "startingOffsets='[[[[["),
        ({"startingOffsets": '{"t": {"' + "9" * 5000 + '": 1}}'}, "startingOffsets: 't' partition"),
        ({"startingOffsets": '{"t": {"\u0663": 1}}'}, "partition '\u0663'"),
        ({"startingOffsets": '{"t": {"0": 9223372036854775808}}'}, "offset 9223372036854775808"),
        ({"startingOffsets": '{"t": {"0": 1.5}}'}, "offset float is not allowed"),
        ({"sourceCount": "99999999999999999999"}, "use a whole number from 1 to 10000"),
        ({"sourceCount": "1" * 5000}, "use a whole number from 1 to 10000"),
        ({"batchMaxMessages": "2000000"}, "use a whole number from 1 to 1000000"),
        ({"maxOffsetsPerTrigger": str(2**63)}, "maxOffsetsPerTrigger='9223372036854775808'"),
        ({"sourceCount": "\u0663"}, "sourceCount='\u0663'"),
        ({"group.id": "   "}, "group.id='   ' is not allowed"),
        ({"group.id": "g" * 256}, "1 to 255 characters"),
        ({"startingOffsets": "x" * 10_000}, "startingOffsets='xxxx"),
    ],
)
def test_hostile_values_are_config_errors(more: dict[str, str], message: str) -> None:
    """Nested JSON, huge or foreign numbers and blank ids are refused by name, briefly."""
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        parse_options(_options(**more))
    assert len(str(raised.value)) < 400


def test_offsets_within_the_bounds_are_kept() -> None:
    """The largest allowed values still parse."""
    options = parse_options(
        _options(
            sourceCount="10000", batchMaxMessages="1000000",
            maxOffsetsPerTrigger=str(2**63 - 1),
            startingOffsets='{"t": {"2147483647": 9223372036854775807, "0": -3}}',
        )
    )  # fmt: skip
    assert options.source_count == 10_000
    assert options.batch_max_messages == 1_000_000
    assert options.max_offsets_per_trigger == 2**63 - 1
    assert options.starting == {"t": {2147483647: 2**63 - 1, 0: -3}}
