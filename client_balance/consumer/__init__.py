"""The consumer: ``ClientBalanceConsumer`` and what it hands out.

- ``_consumer``: the facade (lifecycle, meta, connect/disconnect, get/confirm)
- ``_reconcile``: the reconcile thread; ``_keeper``: its round (group checks, release,
  register) and the paths it shares with connect/disconnect; ``_targets``: the target of a
  round and the pins; ``_hooks``: the application's lifecycle hooks and callback failures;
  ``_launch``: what ``start()`` builds
- ``_fetch``: the Fetcher, the one place that drives the confluent-kafka ``Consumer``, with
  ``_client`` (the client lock), ``_buffers`` (per-partition state) and ``_commits``
- ``_async``: ``AsyncClientBalanceConsumer``, the same engine for asyncio, its calls run by
  ``_lanes`` off the event loop (cancellation rolls back what a task held)
- ``_decode``: the key and value deserializers, applied to a batch as it is handed out
- ``_meta``, ``_join``, ``_parse``, ``_setup``, ``_results``: the pieces they share
"""

from client_balance.consumer._async import AsyncBatch, AsyncClientBalanceConsumer
from client_balance.consumer._consumer import ClientBalanceConsumer
from client_balance.consumer._decode import DecodedMessage
from client_balance.consumer._hooks import PartitionHook
from client_balance.consumer._results import (
    AssignmentContext,
    Batch,
    ConfirmResult,
    ConsumeResult,
    MemberView,
    OffsetInfo,
    PartitionMeta,
)
from client_balance.consumer._setup import Assigner

__all__ = [
    "Assigner",
    "AssignmentContext",
    "AsyncBatch",
    "AsyncClientBalanceConsumer",
    "Batch",
    "ClientBalanceConsumer",
    "ConfirmResult",
    "ConsumeResult",
    "DecodedMessage",
    "MemberView",
    "OffsetInfo",
    "PartitionHook",
    "PartitionMeta",
]
