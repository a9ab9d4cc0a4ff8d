"""The status topic: member reports, ownership claims and the group state read from them.

Internal: the consumer uses :class:`StatusMember`; operators see the same records through
:class:`client_balance.admin.GroupView`. See ``docs/operations.md``.
"""

from client_balance.membership._checks import pid_space
from client_balance.membership._keys import claim_key, member_key, parse_key
from client_balance.membership._log import StatusReader, ensure_status_topic, status_partition
from client_balance.membership._member import StatusMember
from client_balance.membership._records import Claim, GroupState
from client_balance.membership._report import MAX_LEASE_S, HeldPartition, MemberReport
from client_balance.membership._signing import status_secret
from client_balance.membership._writer import StatusWriter

__all__ = [
    "MAX_LEASE_S",
    "Claim",
    "GroupState",
    "HeldPartition",
    "MemberReport",
    "StatusMember",
    "StatusReader",
    "StatusWriter",
    "claim_key",
    "ensure_status_topic",
    "member_key",
    "parse_key",
    "pid_space",
    "status_partition",
    "status_secret",
]
