"""Session wiring: one real broker for everything marked ``integration``; no silent skips."""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["client_balance.testing"]


@pytest.fixture(autouse=True)
def _broker_for_integration_tests(request: pytest.FixtureRequest) -> None:
    # Every integration test gets the session broker, so one that cannot have it fails.
    if request.node.get_closest_marker("integration") is not None:
        request.getfixturevalue("kafka_bootstrap")


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_bootstrap: str) -> str:
    """``client_balance.testing``'s broker, its default status topic made with 1-hour segments.

    The topic is made as the SDK makes it, but for ``segment.ms``.
    Tests read the status log back and count what is in it (forgeries skipped, a withdrawal
    copied back), and the SDK's 1-minute segments let the cleaner drop superseded records
    between a write and its check. How verdicts survive real compaction is tested on a topic
    of its own (``test_verdicts_hold_on_the_status_log_after_real_compaction``), and the SDK's
    own settings on another (``test_a_created_status_topic_rolls_and_forgets_tombstones_soon``).
    A cluster named by the environment keeps whatever status topic it has.
    """
    # Imported here: a plugin module imported by conftest first is not assertion-rewritten.
    from client_balance.testing import BROKER_ENV
    from tests.integration.history import STATUS_TOPIC, audited_status_topic

    if not os.environ.get(BROKER_ENV):
        audited_status_topic(kafka_bootstrap, STATUS_TOPIC)
    return kafka_bootstrap


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run in which no test passed is a failure, even if everything was skipped."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    passed = len(reporter.stats.get("passed", ())) if reporter is not None else 0
    if exitstatus == 0 and passed == 0:
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
