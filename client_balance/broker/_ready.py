"""Whether a starting LocalKafka is ready, and why its start failed (with the log's tail)."""

from __future__ import annotations

from collections.abc import Mapping

from client_balance import admin
from client_balance._kafka import wait_for_brokers
from client_balance._timing import Deadline
from client_balance.broker._node import KafkaNode
from client_balance.broker._process import KILLED_REAP_S
from client_balance.errors import BrokerStartError, ClientBalanceError

__all__ = ["node_name", "restart_node", "start_failure", "why_not_ready"]


def why_not_ready(
    nodes: list[KafkaNode], deadline: Deadline, limit_s: float, login: Mapping[str, str]
) -> str | None:
    """None once the cluster is ready, else why not ("" when a node exited).

    Ready: every node answers metadata, the group coordinator serves offsets and, on a
    secured cluster, the SASL listener takes the admin's ``login``.
    """
    bootstrap = ",".join(node.address for node in nodes)

    def all_alive() -> bool:
        return all(node.alive() for node in nodes)

    answered = admin.cluster_answers(
        bootstrap, timeout_s=deadline.left_s(), keep_waiting=all_alive
    ) and wait_for_brokers(
        bootstrap, [node.node_id for node in nodes], timeout_s=deadline.left_s(),
        keep_waiting=all_alive,
    )  # fmt: skip
    if not all_alive():
        return ""
    if not answered:
        which = "broker" if len(nodes) == 1 else "cluster"
        return f"the {which} did not answer metadata on {bootstrap} within {limit_s:.0f} s"
    try:
        admin.wait_for_group_coordinator(bootstrap, timeout_s=max(deadline.left_s(), 5.0))
    except ClientBalanceError as error:
        return f"the group coordinator did not come up: {error}"
    clients = ",".join(node.client_address for node in nodes)
    if login and not admin.cluster_answers(
        clients, timeout_s=max(deadline.left_s(), 5.0), kafka=login
    ):
        return (
            f"the SASL listener {clients} did not accept the {login['sasl.mechanism']} login of "
            f"{login['sasl.username']!r}"
        )
    return None


def start_failure(
    version: str, brokers: int, nodes: list[KafkaNode], what: str | None
) -> BrokerStartError:
    """Kill ``nodes``; why the start failed (``what``, or how a node exited) with its log."""
    exited = [n for n in nodes if n.process is not None and n.process.poll() is not None]
    blamed = exited[0] if exited else nodes[0]
    if what is None:
        assert blamed.process is not None  # noqa: S101 - exited nodes have a process
        which = "broker" if brokers == 1 else f"broker of node {blamed.node_id}"
        what = f"the {which} exited with code {blamed.process.returncode}"
    last_lines = blamed.log_tail()
    for node in nodes:
        node.kill(KILLED_REAP_S)
    return BrokerStartError(
        f"Apache Kafka {version} did not start: {what}. Last lines of "
        f"{blamed.log_path}:\n{last_lines}",
        log_tail=last_lines,
        log_path=str(blamed.log_path),
    )


def node_name(version: str, brokers: int, node: KafkaNode) -> str:
    return f"Apache Kafka {version}" + ("" if brokers == 1 else f" node {node.node_id}/{brokers}")


def restart_node(node: KafkaNode, version: str, brokers: int, timeout_s: float) -> None:
    """Start ``node`` again; wait until metadata lists it, else kill it and raise why not."""
    node.spawn(node_name(version, brokers, node))
    # Only the node answers a client that knows no other address; then it is listed unfenced.
    deadline = Deadline(timeout_s)
    back = admin.cluster_answers(
        node.address, timeout_s=deadline.left_s(), keep_waiting=node.alive
    ) and wait_for_brokers(
        node.address, [node.node_id], timeout_s=deadline.left_s(), keep_waiting=node.alive
    )
    if not back:
        late = f"node {node.node_id} did not rejoin within {timeout_s:.0f} s"
        raise start_failure(version, brokers, [node], late if node.alive() else None)
