"""Session wiring: one real broker for everything marked ``integration``; no silent skips."""

from __future__ import annotations

import pytest

pytest_plugins = ["client_balance.testing"]


@pytest.fixture(autouse=True)
def _broker_for_integration_tests(request: pytest.FixtureRequest) -> None:
    # Every integration test gets the session broker, so one that cannot have it fails.
    if request.node.get_closest_marker("integration") is not None:
        request.getfixturevalue("kafka_bootstrap")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run in which no test passed is a failure, even if everything was skipped."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    passed = len(reporter.stats.get("passed", ())) if reporter is not None else 0
    if exitstatus == 0 and passed == 0:
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
