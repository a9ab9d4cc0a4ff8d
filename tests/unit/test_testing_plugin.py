"""The pytest plugin shipped for users (``client_balance.testing``)."""

from __future__ import annotations

from client_balance.keys import check_topic_name
from client_balance.testing import _topic_name_for


def test_new_topic_makes_a_legal_name_from_any_test_name() -> None:
    """Letters outside ASCII, brackets and spaces in a test's name become '-' in the topic's.

    ``str.isalnum()`` kept 'é' and '名', which Kafka refuses in a topic name: a user's test
    named in their own language failed in ``new_topic`` with a ConfigError.
    """
    name = _topic_name_for("test_café_名前[ü 1]")
    assert check_topic_name(name) == name
    assert name.endswith("-test-caf-------1-")
    assert _topic_name_for("test_café_名前[ü 1]") != name  # unique
