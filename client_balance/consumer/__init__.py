"""The consumer: ``ClientBalanceConsumer`` and what it hands out.

- ``_consumer``: the facade (lifecycle, meta, connect/disconnect, get/confirm)
- ``_reconcile``: the reconcile thread and its round (targets, group checks, release, register)
- ``_fetch``: the Fetcher, the one place that drives the confluent-kafka ``Consumer``, with
  ``_client`` (the client lock), ``_buffers`` (per-partition state) and ``_commits``
- ``_meta``, ``_join``, ``_parse``, ``_setup``, ``_results``: the pieces they share
"""

from client_balance.consumer._consumer import ClientBalanceConsumer
from client_balance.consumer._results import (
    Batch,
    ConfirmResult,
    ConsumeResult,
    NodeContext,
    OffsetInfo,
    PartitionMeta,
)
from client_balance.consumer._setup import Assigner

__all__ = [
    "Assigner",
    "Batch",
    "ClientBalanceConsumer",
    "ConfirmResult",
    "ConsumeResult",
    "NodeContext",
    "OffsetInfo",
    "PartitionMeta",
]
