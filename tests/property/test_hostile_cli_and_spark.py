"""Hostile input for the command line, ``simulate`` and the Spark options: only library errors.

Generated argv lists use the real command and option names with hostile values (negatives, nan,
inf, huge numbers, empty strings, unicode, ``:`` where a name goes). ``main`` must answer each
with an exit code (2 for usage, 1 for a library error, as one line on stderr), never raise, never
block, and never print the secret in ``CLIENT_BALANCE_KAFKA``. The cluster is never asked: every
admin call is answered offline (checking what it is given), and ``--watch`` ends at its first
sleep.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import string
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client_balance import _kafka, admin
from client_balance.admin import _reset
from client_balance.cli import main
from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition
from client_balance.strategies import simulation
from client_balance.strategies.simulation import plan_simulation

CANARY = "canary-pw-0b7e41"
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DEEP = settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_HOSTILE_WORDS = [
    "-1", "-2", "0", "-0", "-0.0", "nan", "NaN", "inf", "-inf", "+inf", "1e400", "1e-400", "",
    " ", "9" * 30, str(2**63), str(-(2**63) - 1), "1.5", "1_000", "\u0663", "\uff15", ":", "::",
    "t:", ":3", "t:-1", "t:0", "t:1e3", "t:99999999999", "=", "C1=", "=t", "C1=t+", "C1,,C2",
    ",", "\x00", "\n", "\u00fc", "\U0001f600", "-", "--", "earliest", "latest", "committed",
    "t:3", "C1", "C1,C2", "127.0.0.1:1", "h:0", "h:65536", "[red]", "%s", "{}", "a" * 300,
]  # fmt: skip
# No ASCII letters in free text: a value like "os:system" given to --strategy would import it.
_NO_LETTERS = st.characters(codec="utf-8", exclude_characters=string.ascii_letters)
hostile = st.one_of(
    st.sampled_from(_HOSTILE_WORDS),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats().map(repr),
    st.text(_NO_LETTERS, max_size=12),
    st.text("tC0123456789:,=+- ", max_size=16),
)
strategy_names = st.one_of(
    st.sampled_from(["modulo", "range", "sticky", "no_such_pkg_7q:rule", "7:x", "a.:b", ":"]),
    hostile,
)

_VALUED = {
    "simulate": ["--topics", "--members", "--strategy", "--then-remove", "--then-add"],
    "status": ["--group", "--watch", "--bootstrap-servers", "--status-topic"],
    "groups": ["--bootstrap-servers", "--status-topic"],
    "reset-offsets": ["--group", "--to", "--topic", "--bootstrap-servers", "--status-topic"],
    "reap": ["--group", "--older-than-s", "--bootstrap-servers", "--status-topic"],
    "lag": ["--group", "--topic", "--watch", "--bootstrap-servers", "--status-topic"],
    "tail": ["--topic", "--from", "--partition", "--count", "--deserializer",
             "--key-deserializer", "--bootstrap-servers"],
}  # fmt: skip
_FLAGS = {"simulate": ["--compare", "--json"], "status": ["--json"], "groups": ["--json"],
          "lag": ["--json"]}  # fmt: skip
_VALID = {
    "simulate": ["--topics", "t:3,u:2", "--members", "C1,C2"],
    "status": ["--group", "g", "--bootstrap-servers", "127.0.0.1:1"],
    "groups": ["--bootstrap-servers", "127.0.0.1:1"],
    "reset-offsets": ["--group", "g", "--to", "0", "--bootstrap-servers", "127.0.0.1:1"],
    "reap": ["--group", "g", "--bootstrap-servers", "127.0.0.1:1"],
    "lag": ["--group", "g", "--bootstrap-servers", "127.0.0.1:1"],
    "tail": ["--topic", "t", "--bootstrap-servers", "127.0.0.1:1"],
}

_GOOD = {
    "--group": "g", "--bootstrap-servers": "127.0.0.1:1", "--status-topic": "status",
    "--watch": "0.5", "--to": "0", "--topic": "t", "--older-than-s": "10", "--topics": "t:3",
    "--members": "C1,C2", "--then-remove": "C1", "--then-add": "C3", "--strategy": "range",
    "--from": "-2", "--partition": "0", "--count": "3", "--deserializer": "json",
    "--key-deserializer": "bytes",
}  # fmt: skip


@st.composite
def argvs(draw: st.DrawFn, commands: tuple[str, ...] = tuple(_VALUED)) -> list[str]:
    """A command with, maybe, valid required options, then hostile options and flags."""
    command = draw(st.sampled_from(commands))
    argv = [command, *(_VALID[command] if draw(st.booleans()) else [])]
    for option in draw(st.lists(st.sampled_from(_VALUED[command]), max_size=5)):
        bad = strategy_names if option == "--strategy" else hostile
        # Half the values fine: a hostile value is then often the only one, and gets checked.
        value = draw(bad if draw(st.booleans()) else st.just(_GOOD[option]))
        argv += [f"{option}={value}"] if draw(st.booleans()) else [option, value]
    argv += draw(st.lists(st.sampled_from(_FLAGS.get(command, ["--json"])), max_size=2))
    if draw(st.booleans()):
        argv.insert(0, "-v")
    if draw(st.integers(0, 9)) == 0:
        argv.append(draw(st.sampled_from(["--help", "-h", "--no-such-option", "stray", "--"])))
    return argv


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No cluster, no running broker, a secret in CLIENT_BALANCE_KAFKA, --watch ends at once."""
    empty = admin.GroupView(group="g", members=(), partitions=(), conflicts=())

    real_sleep, this_thread = time.sleep, threading.current_thread()

    # What reaches the cluster or the clock must be sane: -2 is Kafka's earliest, nan never ends.
    def interrupt(seconds: float) -> None:
        if threading.current_thread() is not this_thread:
            real_sleep(seconds)  # time.sleep is every thread's: a Spark session's py4j sleeps too
            return
        assert 0 < seconds < math.inf, seconds
        raise KeyboardInterrupt

    def offsets_for_times(*args: Any, **_: Any) -> dict[Any, Any]:
        assert args[3] >= 0, args[3]
        return {}

    def reap(*_: Any, older_than_s: float | None = None, **__: Any) -> list[str]:
        assert older_than_s is None or 0 <= older_than_s < math.inf, older_than_s
        return []

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("CLIENT_BALANCE_BOOTSTRAP_SERVERS", raising=False)
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        patch.setenv("CLIENT_BALANCE_KAFKA", json.dumps({"sasl.password": CANARY}))
        patch.setattr(admin.GroupView, "load", staticmethod(lambda *_, **__: empty))
        patch.setattr(admin, "list_groups", lambda *_, **__: {})
        patch.setattr(admin, "reap_dead_members", reap)
        patch.setattr(_reset, "partition_offsets", lambda *_, **__: {})
        patch.setattr(_reset, "offsets_for_times", offsets_for_times)
        patch.setattr(_reset, "commit_offsets", lambda *_, **__: None)
        # lag --topic and tail: one partition of five messages, none of which arrives.
        one = {TopicPartition("t", 0): (0, 5, None)}
        patch.setattr(admin, "partition_offsets", lambda *_, **__: one)
        patch.setattr(_kafka, "read_ranges", lambda *_, **__: iter(()))
        patch.setattr(_kafka, "follow", lambda *_, **__: iter(()))
        patch.setattr("time.sleep", interrupt)
        # Big valid groups are the unit tests' business; here they would only be slow.
        patch.setattr(simulation, "MAX_PARTITIONS_PER_TOPIC", 50)
        yield


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _check_cli(argv: list[str]) -> None:
    code, out, err = _run(argv)
    assert code in {0, 1, 2}, (argv, code)
    assert CANARY not in out + err
    assert "Traceback" not in err
    if code == 1:  # a library error: one line
        assert err.startswith("error: "), (argv, err)
        assert err.count("\n") == 1, (argv, err)


@pytest.mark.usefixtures("offline")
@pytest.mark.timeout(120)
@FAST
@given(argvs())
def test_cli_answers_hostile_argv_with_an_exit_code(argv: list[str]) -> None:
    """Every generated argv ends in 0, 1 (one line) or 2, without a traceback or the secret."""
    _check_cli(argv)


@pytest.mark.slow
@pytest.mark.usefixtures("offline")
@DEEP
@given(argvs())
def test_cli_answers_hostile_argv_deep(argv: list[str]) -> None:
    """The same property over many more argv lists."""
    _check_cli(argv)


@pytest.mark.usefixtures("offline")
@pytest.mark.timeout(120)
@FAST
@given(argvs(("simulate",)))
def test_simulate_answers_hostile_arguments_with_an_exit_code(argv: list[str]) -> None:
    """Simulate's topics, members, changes and strategy end in 0 or 2, never an exception."""
    code, _, err = _run(argv)
    assert code in {0, 2}, (argv, code, err)
    if code == 2 and "usage:" not in err:  # simulate's own refusal: one line
        assert err.startswith("client-balance simulate: error: "), err
        assert err.count("\n") == 1, err


change_kinds = st.sampled_from(["remove", "add"])


@FAST
@given(hostile, hostile, st.lists(st.tuples(change_kinds, hostile), max_size=3))
def test_plan_simulation_raises_only_config_errors(
    topics: str, members: str, changes: list[Any]
) -> None:
    """Parsing simulate's arguments raises ConfigError or plans, nothing else."""
    with contextlib.suppress(ConfigError):
        plan_simulation(topics, members, changes)


# --- Spark options ---------------------------------------------------------------------------

# "strategy" is drawn apart (strategy_names): a generated module:attr would be imported.
_OPTION_NAMES = [
    "kafka.bootstrap.servers", "topics", "group.id", "startingOffsets", "endingOffsets",
    "sourceCount", "batchMaxMessages", "commitToKafka", "maxOffsetsPerTrigger",
    "kafka.sasl.password", "kafka.ssl.key.password", "kafka.fetch.max.bytes", "path",
    "assign", "subscribePattern", "startingTimestamp", "startingOffsetsByTimestamp",
    "endingTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "includeHeaders", "minPartitions", "subscribe",
]  # fmt: skip
# Names that are refused whatever their value: drawn now and then, or nothing else is reached.
_BAD_NAMES = ["KAFKA.SASL.PASSWORD", "kafka.", "kafka. ", "kafka.group.id", "", ":", 7]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**64) | st.floats() | st.text("t0-", max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("t01-", max_size=3), inner),
    max_leaves=8,
).map(json.dumps)
option_values = st.one_of(
    hostile, json_values, st.sampled_from(["true", "false", "t", "h:1", "g", "0", "1", "latest"])
)
# The secret only where it belongs: a password given as, say, sourceCount is shown as any value.
_SECRET_NAMES = {"kafka.sasl.password", "kafka.ssl.key.password", "KAFKA.SASL.PASSWORD", "kafka."}
not_strings = st.one_of(st.none(), st.integers(), st.lists(st.just(CANARY), max_size=1))


@st.composite
def option_sets(draw: st.DrawFn) -> dict[Any, Any]:
    """Option dicts holding a secret, with hostile values and names (never letters to import)."""
    options: dict[Any, Any] = {"kafka.sasl.password": CANARY}
    if draw(st.integers(0, 3)) != 1:  # valid required options, so later checks are reached too
        options |= {"kafka.bootstrap.servers": "h:1", "topics": "t", "group.id": "g"}
    for _ in range(draw(st.integers(0, 8))):
        # Now and then a bad name or a value that is no string (not 0: hypothesis favours it).
        odd = draw(st.integers(0, 19))
        name = draw(st.sampled_from(_BAD_NAMES if odd == 7 else _OPTION_NAMES))
        values = st.just(CANARY) if name in _SECRET_NAMES else option_values
        options[name] = draw(not_strings if odd == 11 else values)
    if draw(st.integers(0, 3)) == 2:
        options["strategy"] = draw(strategy_names)
    return options


def _check_options(options: Mapping[str, Any]) -> None:
    from client_balance.spark import parse_options  # pyspark: the spark extra

    try:
        shown = repr(parse_options(options))
    except ConfigError as error:  # anything else fails the test
        shown = f"{error} {error!r}"
    assert CANARY not in shown


@pytest.mark.spark
@pytest.mark.timeout(120)
@FAST
@given(option_sets())
def test_spark_options_raise_only_config_errors_without_secrets(options: dict[str, Any]) -> None:
    """parse_options answers any option dict with options or a ConfigError, never the secret."""
    _check_options(options)


@pytest.mark.slow
@pytest.mark.spark
@DEEP
@given(option_sets())
def test_spark_options_deep(options: dict[str, Any]) -> None:
    """The same property over many more option dicts."""
    _check_options(options)


def test_the_generated_names_are_the_parsers() -> None:
    """The option names generated above are the commands' own (a rename would hollow the test)."""
    for command, options in _VALUED.items():
        code, out, _ = _run([command, "--help"])
        assert code == 0
        for option in [*options, *_FLAGS.get(command, [])]:
            assert option in out, (command, option)
