"""Checks across settings, and the repr of a kafka dict changed after the settings were made."""

import pytest

from client_balance import ClientBalanceSettings, ConfigError

BASE = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "billing"}


@pytest.mark.parametrize("status_topic", [None, "team.status"])
def test_a_dead_letter_topic_that_is_the_status_topic_is_refused(status_topic: str | None) -> None:
    """dead_letter_topic equal to status_topic is a ConfigError naming the topic."""
    topics = {"status_topic": status_topic} if status_topic else {}
    dead_letters = status_topic or "__client_balance_status"
    with pytest.raises(ConfigError, match=f"dead_letter_topic='{dead_letters}' is the status"):
        ClientBalanceSettings(
            **BASE, **topics, redelivery_policy="dead-letter", dead_letter_topic=dead_letters
        )


def test_a_secret_put_into_kafka_after_the_settings_were_made_is_masked_in_repr() -> None:
    """A plain sasl.password added to the kafka dict later shows masked in repr, as in JSON."""
    settings = ClientBalanceSettings(**BASE, kafka={"client.id": "billing"})
    settings.kafka["sasl.password"] = "Hunter2-canary"
    assert "Hunter2-canary" not in repr(settings)
    assert "Hunter2-canary" not in settings.model_dump_json()
    assert "'client.id': 'billing'" in repr(settings)
