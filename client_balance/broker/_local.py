"""``LocalKafka``: Apache Kafka 4.x (KRaft) on 127.0.0.1, one node or a cluster of several.

Every node is a combined broker and controller (``_node.py``). One node is formatted with
``kafka.tools.StorageTool format --standalone``; the nodes of a cluster share a static quorum
(``controller.quorum.voters``) and are formatted with the same cluster id and no flag. The
JVMs start from the cached Maven jars with a small heap, and ``start()`` polls until every
broker answers metadata and the group coordinator serves offsets (never a fixed sleep).
``stop()`` asks for a graceful shutdown (SIGTERM) and kills a JVM that does not exit in time.
With ``security="SASL_PLAINTEXT"`` clients log in with SCRAM and need ACLs (``_config.py``).
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

from client_balance._kafka import partition_leader, retry_immediately
from client_balance._timing import Deadline
from client_balance.broker._config import Sasl, check_launch
from client_balance.broker._datadir import create_data_dir, remove_data_dir
from client_balance.broker._jars import DEFAULT_KAFKA_VERSION, ensure_kafka_jars, find_java
from client_balance.broker._node import LOG_NAME, KafkaNode, Launch, prepare_nodes, stop_nodes
from client_balance.broker._node import cleanup as cleanup_nodes
from client_balance.broker._process import KILLED_REAP_S, stop_pid
from client_balance.broker._ready import node_name, restart_node, start_failure, why_not_ready
from client_balance.errors import BrokerStartError, ClientBalanceError, ConfigError

__all__ = ["LocalKafka", "stop_pid"]

_BIND_FAILURE = "Address already in use"
_OnSpawned = Callable[[dict[int, int]], None] | None
_START_ATTEMPTS = 3  # a free port can be taken by someone else before the JVM binds it


class LocalKafka:
    """A local Apache Kafka 4.x cluster of ``brokers`` nodes, for tests, benchmarks and demos.

    >>> with LocalKafka() as kafka:                                 # doctest: +SKIP
    ...     print(kafka.bootstrap_servers)
    127.0.0.1:40123

    ``data_dir=None`` uses a fresh temporary folder that ``stop()`` deletes; a given ``data_dir``
    is kept, and a second start on it reuses its data, cluster id and ports. ``config`` adds or
    overrides broker properties (of every node). ``port=None`` picks a free port (for the first
    node; the others always get free ports). ``heap_mb`` is per node.

    With ``brokers > 1`` each node has its own folder ``node-<id>/`` in the data dir, and the
    fault methods (:meth:`kill_broker`, :meth:`stop_broker`, :meth:`restart_broker`,
    :meth:`leader_of`) let tests fail one of them. ``proxied=True`` gives every node a third
    listener advertised at a port where a test puts a proxy: clients bootstrapped through it
    can be cut off alone (:attr:`proxied_listeners`).

    ``security="SASL_PLAINTEXT"`` gives clients a SASL listener (``mechanism`` SCRAM-SHA-512
    or SCRAM-SHA-256) and runs the StandardAuthorizer: :attr:`bootstrap_servers` is that
    listener, ``admin_user`` is a super user created when the log dir is formatted, and
    :attr:`admin_config` is how a client logs in as it. Every other user needs ACLs.
    ``admin_password=None`` makes a random one (kept in the data dir for restarts on it).

    With ``die_with_parent`` (the default) a JVM gets SIGTERM when the thread that started it
    ends, even if this process is killed outright (Linux ``setpriv --pdeathsig``, where present).
    Start it from a long-lived thread, or pass False for a broker meant to outlive its starter
    (:meth:`detach` refuses a True one).
    """

    def __init__(
        self,
        *,
        brokers: int = 1,
        version: str = DEFAULT_KAFKA_VERSION,
        data_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        heap_mb: int = 512,
        config: Mapping[str, str] | None = None,
        startup_timeout_s: float = 90.0,
        stop_timeout_s: float = 20.0,
        die_with_parent: bool = True,
        class_data_sharing: bool = True,
        progress: Callable[[str], None] | None = None,
        proxied: bool = False,
        security: str = "PLAINTEXT",
        mechanism: str = "SCRAM-SHA-512",
        admin_user: str = "admin",
        admin_password: str | None = None,
    ) -> None:
        timeouts = {"startup_timeout_s": startup_timeout_s, "stop_timeout_s": stop_timeout_s}
        check_launch(brokers=brokers, port=port, heap_mb=heap_mb, **timeouts)
        Sasl.check(security, mechanism, admin_user, admin_password)
        self.security = security
        self._sasl_wanted = (mechanism, admin_user, admin_password)
        self._sasl: Sasl | None = None
        self.brokers = brokers
        self.version = version
        self.die_with_parent = die_with_parent
        self.class_data_sharing = class_data_sharing
        self.heap_mb = heap_mb
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._requested_port = port
        self._extra_config = dict(config or {})
        self.proxied = proxied
        self._progress = progress
        self._owns_data_dir = data_dir is None
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._nodes: list[KafkaNode] = []
        self._finalizer: weakref.finalize[..., LocalKafka] | None = None
        self.startup_s: float | None = None
        """Seconds from ``start()`` to a cluster that serves metadata and offsets."""

    # -- properties -------------------------------------------------------------------------

    @property
    def proxied_listeners(self) -> dict[int, tuple[int, int]]:
        """``proxied=True``: node id -> (listener port, advertised port for a test's proxy)."""
        return {n.node_id: n.ports.proxied for n in self._nodes if n.ports and n.ports.proxied}

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:<port>"`` of every node (its SASL listener if secured), joined by commas."""
        if not self.is_running():
            raise ClientBalanceError("LocalKafka is not running; call start() first")
        return ",".join(node.client_address for node in self._nodes)

    @property
    def admin_config(self) -> dict[str, str]:
        """The librdkafka settings that log in as the super user (``{}`` for PLAINTEXT)."""
        if self.security == "PLAINTEXT":
            return {}
        if self._sasl is None:
            raise ClientBalanceError("LocalKafka has no admin credentials before start()")
        return self._sasl.client_config()

    def _internal_servers(self) -> str:
        # The PLAINTEXT listeners: the launcher's own probes, a super user when secured.
        return ",".join(node.address for node in self._nodes)

    @property
    def data_dir(self) -> Path:
        """Folder with the config, log (``broker.log``) and data (of each node, with brokers>1)."""
        if self._data_dir is None:
            raise ClientBalanceError("LocalKafka has no data dir before start()")
        return self._data_dir

    @property
    def log_path(self) -> Path:
        """The broker's stdout/stderr log (the first node's, with brokers > 1)."""
        return self._node_dir(1) / LOG_NAME

    @property
    def pid(self) -> int | None:
        """Process id of the (first) broker's JVM while it runs."""
        return self._nodes[0].pid if self._nodes else None

    def broker_pids(self) -> dict[int, int]:
        """The JVM pid of each node that runs, by node id."""
        return {node.node_id: node.pid for node in self._nodes if node.pid is not None}

    def is_running(self) -> bool:
        """True while a broker process of this cluster is alive."""
        return any(node.alive() for node in self._nodes)

    def _node_ids(self) -> range:
        return range(1, self.brokers + 1)

    def _node_dir(self, node_id: int) -> Path:
        return self.data_dir if self.brokers == 1 else self.data_dir / f"node-{node_id}"

    def _node(self, node_id: int) -> KafkaNode:
        for node in self._nodes:
            if node.node_id == node_id:
                return node
        raise ConfigError(
            f"node {node_id!r} is not a node of this running LocalKafka "
            f"(ids {list(self._node_ids()) if self._nodes else 'none: not started'})"
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, *, on_spawned: _OnSpawned = None) -> Self:
        """Fetch jars if needed, format, start the JVMs and wait until the cluster is ready.

        ``on_spawned(pids)`` gets :meth:`broker_pids` once every JVM is spawned, before the
        wait: where a starter that may be killed records them. Its error fails the start.
        """
        if self.is_running():
            return self
        began = time.monotonic()
        data_dir = self._data_dir = create_data_dir(self._data_dir)
        try:
            self._start_in(data_dir, began, on_spawned)
        except BaseException as error:  # no Java, no jars: its own data dir goes (no node ran)
            ran = self._finalizer is not None or isinstance(error, BrokerStartError)
            if self._owns_data_dir and not ran:  # a broker's failure keeps its log to be read
                remove_data_dir(data_dir)
            raise
        self.startup_s = time.monotonic() - began
        return self

    def _start_in(self, data_dir: Path, began: float, on_spawned: _OnSpawned) -> None:
        if self.security != "PLAINTEXT":
            self._sasl = Sasl.for_data_dir(*self._sasl_wanted, data_dir)
        launch = Launch(
            java=find_java(),
            libs=ensure_kafka_jars(self.version, progress=self._progress),
            version=self.version,
            heap_mb=self.heap_mb,
            die_with_parent=self.die_with_parent,
            class_data_sharing=self.class_data_sharing,
            progress=self._progress,
            sasl=self._sasl,
        )

        def port_was_taken(error: BaseException) -> bool:  # taken between probe and bind
            taken = (
                isinstance(error, BrokerStartError)
                and _BIND_FAILURE in error.log_tail
                and self._requested_port is None
                and self._owns_data_dir
            )
            if taken:
                remove_data_dir(data_dir)
                create_data_dir(data_dir)
            return taken

        retry_immediately(
            lambda: self._start_once(launch, began, on_spawned),
            attempts=_START_ATTEMPTS,
            retry_if=port_was_taken,
        )

    def _start_once(self, launch: Launch, began: float, on_spawned: _OnSpawned) -> None:
        nodes = [
            KafkaNode(node_id, self._node_dir(node_id), launch, dumps_cds=node_id == 1)
            for node_id in self._node_ids()
        ]
        extra = {**(self._sasl.broker_config() if self._sasl else {}), **self._extra_config}
        prepare_nodes(nodes, first_port=self._requested_port, extra=extra, proxied=self.proxied)
        self._nodes = nodes
        if self._finalizer is not None:
            self._finalizer.detach()
        owned = self.data_dir if self._owns_data_dir else None
        self._finalizer = weakref.finalize(self, cleanup_nodes, nodes, self.stop_timeout_s, owned)
        for node in nodes:
            node.spawn(node_name(self.version, self.brokers, node))
        if on_spawned is not None:
            on_spawned(self.broker_pids())
        self._wait_until_ready(began)

    def _wait_until_ready(self, began: float) -> None:
        deadline = Deadline(self.startup_timeout_s - (time.monotonic() - began))
        why = why_not_ready(self._nodes, deadline, self.startup_timeout_s, self.admin_config)
        if why is not None:
            raise self._failed(why or None)

    def _failed(self, what: str | None) -> BrokerStartError:
        """Kill every node; why the start failed, from the exited node's log."""
        nodes, self._nodes = self._nodes, []
        return start_failure(self.version, self.brokers, nodes, what)

    # -- faults ------------------------------------------------------------------------------

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL node ``node_id``'s JVM (no shutdown at all) and wait until it is gone."""
        self._node(node_id).kill(KILLED_REAP_S)

    def stop_broker(self, node_id: int) -> None:
        """Shut node ``node_id`` down gracefully (SIGTERM; SIGKILL after ``stop_timeout_s``)."""
        self._node(node_id).stop(self.stop_timeout_s)

    def restart_broker(self, node_id: int) -> None:
        """Start node ``node_id`` again on its ports and data; wait until metadata lists it.

        A node that runs is left alone.
        """
        node = self._node(node_id)
        if not node.alive():
            restart_node(node, self.version, self.brokers, self.startup_timeout_s)

    def leader_of(self, topic: str, partition: int, *, timeout_s: float = 10.0) -> int:
        """The node id leading ``topic``'s ``partition`` now, as metadata says; -1 for none."""
        if not self.is_running():
            raise ClientBalanceError("LocalKafka is not running; call start() first")
        return partition_leader(self._internal_servers(), topic, partition, timeout_s=timeout_s)

    # -- stop --------------------------------------------------------------------------------

    def detach(self) -> int:
        """Leave the cluster running after this object and this interpreter are gone.

        Returns the pid of the first node that runs (:meth:`broker_pids` has all); stop it
        later with :func:`stop_pid` (``client-balance broker stop`` stops a cluster's
        together). The data dir is then kept. Only a LocalKafka made with
        ``die_with_parent=False`` can be detached (else :class:`ConfigError`): the JVMs of
        the default one get SIGTERM when the thread that started them ends, which no later
        call can undo.
        """
        if self.die_with_parent:
            raise ConfigError(
                "detach() needs a LocalKafka made with die_with_parent=False; this one has "
                "die_with_parent=True, so its JVMs stop when the thread that started them ends"
            )
        pids = self.broker_pids()
        if not pids or self._finalizer is None:
            raise ClientBalanceError("LocalKafka is not running; nothing to detach")
        self._finalizer.detach()
        self._owns_data_dir = False
        return pids[min(pids)]

    def stop(self) -> None:
        """Stop every broker together (SIGTERM, SIGKILL after ``stop_timeout_s``). Idempotent."""
        stop_nodes(self._nodes, self.stop_timeout_s)
        self._nodes = []
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._owns_data_dir and self._data_dir is not None:
            remove_data_dir(self._data_dir)
            self._data_dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running at {self.bootstrap_servers}" if self.is_running() else "stopped"
        nodes = "" if self.brokers == 1 else f" ({self.brokers} nodes)"
        return f"<LocalKafka {self.version}{nodes} {state}>"
