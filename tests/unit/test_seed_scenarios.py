import pytest

from client_balance.strategies import get_strategy, strategy_names
from tests.seeds import SeedScenario, load_seed_scenarios

SCENARIOS = load_seed_scenarios()


def _param(scenario: SeedScenario) -> object:
    if scenario.strategy in strategy_names():
        return pytest.param(scenario, id=scenario.id)
    reason = f"strategy {scenario.strategy!r} is not implemented yet (issue 3 open)"
    return pytest.param(scenario, id=scenario.id, marks=pytest.mark.skip(reason=reason))


def test_scenarios_are_loaded() -> None:
    """The seed file is where the tests expect it and holds every seed's scenarios."""
    assert len(SCENARIOS) == 17
    assert {s.strategy for s in SCENARIOS} == {"range", "roundrobin", "sticky"}


@pytest.mark.parametrize("scenario", [_param(s) for s in SCENARIOS if s.check == "exact"])
def test_exact_seed_scenarios_match_kafka(scenario: SeedScenario) -> None:
    """Each 'exact' scenario gives Kafka's Java answer, member by member."""
    result = get_strategy(scenario.strategy).assign(scenario.topics, scenario.members)
    assert {member: set(parts) for member, parts in result.items()} == scenario.expected
