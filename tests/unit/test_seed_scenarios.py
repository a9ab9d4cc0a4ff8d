"""The seed documents' scenarios, checked against our strategies."""

import pytest

from client_balance.strategies import get_strategy
from tests.assignment_checks import balance_problems, validity_problems
from tests.seeds import SeedScenario, load_seed_scenarios

SCENARIOS = load_seed_scenarios()


def test_scenarios_are_loaded() -> None:
    """The seed file is where the tests expect it and holds every seed's scenarios."""
    assert len(SCENARIOS) == 17
    assert {s.strategy for s in SCENARIOS} == {"range", "roundrobin", "sticky"}


@pytest.mark.parametrize(
    "scenario", [s for s in SCENARIOS if s.check == "exact"], ids=lambda s: s.id
)
def test_exact_seed_scenarios_match_kafka(scenario: SeedScenario) -> None:
    """Each 'exact' scenario gives Kafka's Java answer, member by member."""
    result = get_strategy(scenario.strategy).assign(scenario.topics, scenario.members)
    assert {member: set(parts) for member, parts in result.items()} == scenario.expected


@pytest.mark.parametrize(
    "scenario", [s for s in SCENARIOS if s.check == "properties"], ids=lambda s: s.id
)
def test_property_seed_scenarios_are_valid_balanced_and_sticky(scenario: SeedScenario) -> None:
    """Each 'properties' scenario is valid and balanced, and survivors keep what they held."""
    result = get_strategy(scenario.strategy).assign(scenario.topics, scenario.members)
    assert validity_problems(scenario.topics, scenario.members, result) == []
    assert balance_problems(scenario.members, result) == []
    for member in scenario.members:
        assert set(member.owned) <= set(result[member.id]), member.id


@pytest.mark.parametrize(
    "scenario", [s for s in SCENARIOS if s.check == "properties"], ids=lambda s: s.id
)
def test_property_seed_scenarios_give_the_recorded_java_answer(scenario: SeedScenario) -> None:
    """Where the file records Java's answer for a 'properties' scenario, we give that answer."""
    result = get_strategy(scenario.strategy).assign(scenario.topics, scenario.members)
    assert {member: set(parts) for member, parts in result.items()} == scenario.expected
