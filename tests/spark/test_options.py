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
from client_balance.spark._plan import node_partitions

pytestmark = pytest.mark.spark

CANARY = "canary-pw-7f3a9c"
BASE = {
    "kafka.bootstrap.servers": "h:1",
    "topics": "t",
    "group.id": "g",
    "kafka.sasl.password": CANARY,
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "PLAIN",
    "kafka.sasl.username": "reader",
}


def _options(**more: Any) -> dict[str, Any]:
    return {**BASE, **more}


def _partitions(options: SourceOptions) -> list[NodePartition]:
    ranges = {TopicPartition("t", 0): (0, 5), TopicPartition("t", 1): (2, 9)}
    return node_partitions(ranges, options)


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


def test_parity_options_have_backward_compatible_defaults() -> None:
    """Without the new options: fail on data loss, headers kept, one task per node, no times."""
    options = parse_options(BASE)
    assert options.fail_on_data_loss is True
    assert options.include_headers is True
    assert options.min_partitions is None
    assert (options.assign, options.subscribe_pattern) == (None, None)
    assert (options.starting_times, options.ending_times) == (None, None)
    assert options.by_timestamp_strategy == "latest"


@pytest.mark.parametrize("value", ["false", "FALSE", " False "])
def test_flags_read_true_and_false_in_any_case(value: str) -> None:
    """The flags failOnDataLoss and includeHeaders take true or false, any case, spaced."""
    options = parse_options(_options(failOnDataLoss=value, includeHeaders=value))
    assert (options.fail_on_data_loss, options.include_headers) == (False, False)


def test_assign_names_exact_partitions_sorted_once() -> None:
    """The JSON of assign becomes sorted partitions, each once; no topics option then."""
    options = parse_options({**_without("topics"), "assign": '{"stock": [2], "orders": [1, 0, 1]}'})
    assert options.assign == (
        TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("stock", 2)
    )  # fmt: skip
    assert options.topics == ()


def test_subscribe_is_sparks_name_for_topics() -> None:
    """subscribe=a,b reads the topics a and b, as Spark's source does; with topics it is refused."""
    assert parse_options({**_without("topics"), "subscribe": "a, b"}).topics == ("a", "b")
    with pytest.raises(ConfigError, match="options topics and subscribe are both given"):
        parse_options({**_without("topics"), "topics": "a", "subscribe": "a"})


def test_subscribe_pattern_is_kept_as_given() -> None:
    """A subscribePattern is a regular expression, matched later against whole topic names."""
    options = parse_options({**_without("topics"), "subscribePattern": "orders-.*"})
    assert options.subscribe_pattern == "orders-.*"
    assert options.topics == ()


def _without(name: str) -> dict[str, Any]:
    return {key: value for key, value in BASE.items() if key != name}


@pytest.mark.parametrize(
    ("more", "message"),
    [
        ({}, "option topics is required"),
        ({"topics": "t", "assign": '{"t": [0]}'}, "options topics and assign are both given"),
        ({"topics": "t", "subscribePattern": "t"}, "options topics and subscribePattern"),
        ({"assign": '{"t": [0]}', "subscribePattern": "t"}, "exactly one of topics"),
        ({"topics": " , "}, "topics=' , ' is not allowed"),
        ({"assign": "orders"}, "assign='orders' is not allowed; use JSON such as"),
        ({"assign": '["orders"]'}, "assign='[\"orders\"]' is not allowed"),
        ({"assign": "{}"}, "assign='{}' is not allowed"),
        ({"assign": '{"t": []}'}, "assign: topic 't' needs a list of partition numbers"),
        ({"assign": '{"t": 0}'}, "assign: topic 't' needs a list of partition numbers"),
        ({"assign": '{"t": [-1]}'}, "assign: 't' partition -1 is not allowed"),
        ({"assign": '{"t": [true]}'}, "assign: 't' partition bool is not allowed"),
        ({"assign": '{"t": ["0"]}'}, "assign: 't' partition str is not allowed"),
        ({"assign": '{"t": [2147483648]}'}, "partition 2147483648 is not allowed"),
        ({"assign": '{"bad topic": [0]}'}, "assign: "),
        ({"assign": "[" * 100_000}, "assign='[[[[["),
        ({"subscribePattern": "orders["}, "subscribePattern='orders[' is not allowed"),
        ({"subscribePattern": "(?P<x"}, "subscribePattern='(?P<x' is not allowed"),
        ({"subscribePattern": "  "}, "subscribePattern='  ' is not allowed"),
    ],
)
def test_the_subscription_is_exactly_one_valid_option(more: dict[str, str], message: str) -> None:
    """Exactly one of topics, subscribePattern and assign, each checked by name, briefly."""
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        parse_options({**_without("topics"), **more})
    assert len(str(raised.value)) < 400
    assert CANARY not in str(raised.value)


def test_timestamps_parse_and_win_over_starting_offsets() -> None:
    """A startingTimestamp beats startingOffsetsByTimestamp, which beats startingOffsets."""
    by_partition = '{"t": {"0": 1700000000000, "1": 0}}'
    options = parse_options(
        _options(startingOffsetsByTimestamp=by_partition, endingOffsetsByTimestamp=by_partition)
    )
    assert options.starting_times == {"t": {0: 1_700_000_000_000, 1: 0}}
    assert options.ending_times == {"t": {0: 1_700_000_000_000, 1: 0}}
    both = parse_options(
        _options(startingTimestamp="5", startingOffsetsByTimestamp=by_partition,
                 endingTimestamp=str(2**63 - 1))
    )  # fmt: skip
    assert (both.starting_times, both.ending_times) == (5, 2**63 - 1)


def test_a_starting_timestamp_needs_no_group() -> None:
    """Timestamps win over startingOffsets=committed, so group.id is not required with them."""
    options = parse_options({**_without("group.id"), "startingTimestamp": "1700000000000"})
    assert options.group_id is None
    with pytest.raises(ConfigError, match=r"group\.id is required"):
        parse_options(_without("group.id"))


def test_a_committed_end_needs_a_group_too() -> None:
    """A -3 (committed) in endingOffsets without group.id is refused by name, as for a start."""
    ending = '{"t": {"0": -3, "1": 5}}'
    without = {**_without("group.id"), "startingOffsets": "earliest", "endingOffsets": ending}
    with pytest.raises(ConfigError, match=r"group\.id is required .*endingOffsets"):
        parse_options(without)
    parse_options({**without, "group.id": "g"})
    parse_options({**without, "endingTimestamp": "5"})  # a timestamp wins over endingOffsets


@pytest.mark.parametrize(
    ("more", "message"),
    [
        ({"startingTimestamp": "-1"}, "startingTimestamp='-1' is not allowed; use a timestamp"),
        ({"startingTimestamp": "soon"}, "startingTimestamp='soon' is not allowed"),
        ({"endingTimestamp": str(2**63)}, "endingTimestamp='9223372036854775808' is not allowed"),
        ({"endingTimestamp": "1.5"}, "endingTimestamp='1.5'"),
        ({"startingOffsetsByTimestamp": "1700000000000"},
         "startingOffsetsByTimestamp='1700000000000' is not allowed; use JSON such as"),
        ({"startingOffsetsByTimestamp": '{"t": {"0": -2}}'},
         "startingOffsetsByTimestamp: 't' partition 0 timestamp -2 is not allowed"),
        ({"endingOffsetsByTimestamp": '{"t": {"x": 5}}'},
         "endingOffsetsByTimestamp: 't' partition 'x' is not allowed"),
        ({"endingOffsetsByTimestamp": '{"t": [5]}'},
         "endingOffsetsByTimestamp: topic 't' needs an object of partition"),
        ({"startingOffsetsByTimestampStrategy": "earliest"},
         "startingOffsetsByTimestampStrategy='earliest' is not allowed; use error or latest"),
        ({"endingOffsets": '{"t": {"0": 5, "1": -2}}'},
         "endingOffsets: 't' partition 1 ends at -2 (earliest), which reads nothing"),
        ({"kafka.fetch.wait.max.msx": "5"},
         'the kafka.* options: librdkafka refuses the kafka settings: No such configuration '
         'property: "fetch.wait.max.msx"'),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss='maybe' is not allowed; use true or false"),
        ({"includeHeaders": "1"}, "includeHeaders='1' is not allowed; use true or false"),
        ({"minPartitions": "0"}, "minPartitions='0' is not allowed; use a whole number from 1"),
        ({"minPartitions": "10001"}, "use a whole number from 1 to 10000"),
        ({"minPartitions": "x" * 5000}, "minPartitions='xxxx"),
    ],
)  # fmt: skip
def test_parity_option_values_are_refused_by_name(more: dict[str, str], message: str) -> None:
    """A bad timestamp, flag, strategy or minPartitions names the option, value and what is ok."""
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        parse_options(_options(**more))
    assert len(str(raised.value)) < 400
    assert CANARY not in str(raised.value)


def test_the_by_timestamp_strategy_and_min_partitions_parse() -> None:
    """The by-timestamp strategy is error or latest in any case; minPartitions up to 10,000."""
    options = parse_options(
        _options(startingOffsetsByTimestampStrategy="ERROR", minPartitions="10000")
    )
    assert (options.by_timestamp_strategy, options.min_partitions) == ("error", 10_000)


@pytest.mark.parametrize("name", ["endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"])
def test_ending_options_are_batch_only(name: str) -> None:
    """A streaming read refuses every ending option by name; a batch read takes it."""
    value = '{"t": {"0": 5}}' if name != "endingTimestamp" else "5"
    parse_options(_options(**{name: value}))
    with pytest.raises(ConfigError, match=f"option {name} is not allowed in a streaming read"):
        parse_options(_options(**{name: value}), streaming=True)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("groupIdPrefix", "use group.id"),
        ("minOffsetsPerTrigger", "use maxOffsetsPerTrigger"),
        ("maxTriggerDelay", "minOffsetsPerTrigger"),
        ("kafkaConsumer.pollTimeoutMs", "60 s without a message"),
        ("fetchOffset.numRetries", "30 s"),
        ("fetchOffset.retryIntervalMs", "30 s"),
    ],
)
def test_spark_options_this_source_lacks_are_refused(name: str, message: str) -> None:
    """Spark's Kafka options without an equivalent here are refused, never silently ignored."""
    with pytest.raises(ConfigError, match="of Spark's Kafka source is not supported") as raised:
        parse_options(_options(**{name: "1"}))
    assert message in str(raised.value)


def test_kafka_auto_offset_reset_is_the_sources_own() -> None:
    """The option kafka.auto.offset.reset is refused: startingOffsets and failOnDataLoss say it."""
    with pytest.raises(ConfigError, match=r"option kafka\.auto\.offset\.reset is not allowed") as e:
        parse_options(_options(**{"kafka.auto.offset.reset": "earliest"}))
    assert "failOnDataLoss" in str(e.value)


def test_the_schema_has_headers_unless_include_headers_is_false() -> None:
    """DataSource.schema() reads includeHeaders from the options: no headers column if false."""
    from client_balance.spark import SCHEMA, ClientBalanceDataSource

    with_headers = ClientBalanceDataSource(dict(BASE)).schema()
    without = ClientBalanceDataSource({**BASE, "includeheaders": "False"}).schema()
    assert with_headers == SCHEMA
    assert without.names == [name for name in SCHEMA.names if name != "headers"]
    with pytest.raises(ConfigError, match="includeHeaders='no'"):
        ClientBalanceDataSource({**BASE, "includeHeaders": "no"}).schema()


def test_tasks_carry_the_headers_and_data_loss_choices() -> None:
    """Each task's partition says whether to build headers and whether data loss fails it."""
    options = parse_options(_options(includeHeaders="false", failOnDataLoss="false"))
    for partition in _partitions(options):
        assert (partition.include_headers, partition.fail_on_data_loss) == (False, False)
    assert all(p.include_headers and p.fail_on_data_loss for p in _partitions(parse_options(BASE)))


def test_a_stream_reader_refuses_ending_options() -> None:
    """The data source's stream reader parses as a stream: an ending option is refused."""
    from client_balance.spark import SCHEMA, ClientBalanceDataSource

    source = ClientBalanceDataSource({**BASE, "endingTimestamp": "5"})
    with pytest.raises(ConfigError, match="option endingTimestamp is not allowed in a streaming"):
        source.streamReader(SCHEMA)
    assert source.reader(SCHEMA) is not None


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("startingOffset", "did you mean startingOffsets?"),
        ("maxOffsetPerTrigger", "did you mean maxOffsetsPerTrigger?"),
        ("maxRecordsPerPartition", "they are assign,"),
    ],
)
def test_an_option_this_source_does_not_read_is_refused_by_name(name: str, hint: str) -> None:
    """A misspelt or unknown option is a ConfigError naming it, with the nearest known name.

    They were ignored: startingOffset=earliest read from the committed offsets, and a misspelt
    maxOffsetsPerTrigger left a stream without its limit (the review of 2026-11-29, later).
    """
    with pytest.raises(ConfigError, match=re.escape(hint)) as refused:
        parse_options({**BASE, name: "1"})
    assert name.lower() in str(refused.value)


def test_kafka_options_are_checked_as_the_tasks_make_their_clients() -> None:
    """kafka.group.protocol=consumer is refused when the read is planned, not in every task.

    The driver checked the kafka.* options alone; the tasks add the SDK's own settings
    (session.timeout.ms), which librdkafka refuses beside it: every task failed with a raw
    KafkaException (the review of 2026-11-29, later).
    """
    with pytest.raises(ConfigError, match=r"group\.protocol"):
        parse_options({**BASE, "kafka.group.protocol": "consumer"})


def test_a_schema_of_the_users_is_refused_when_the_read_is_planned() -> None:
    """reader()/streamReader() given another schema than the source's raise ConfigError.

    The reader ignored it: the read planned fine and failed in a task once data came (an
    empty read passed) (the review of 2026-11-29, later).
    """
    from pyspark.sql.types import StringType, StructField, StructType

    from client_balance.spark import ClientBalanceDataSource

    source = ClientBalanceDataSource(dict(BASE))
    other = StructType([StructField("key", StringType())])
    with pytest.raises(ConfigError, match=r"\.schema\(\.\.\.\) is not allowed"):
        source.reader(other)
    with pytest.raises(ConfigError, match=r"\.schema\(\.\.\.\) is not allowed"):
        source.streamReader(other)
    source.reader(source.schema())  # its own: fine
