"""The data dirs a LocalKafka creates: each carries a marker, and only a marked dir is deleted.

``client-balance broker stop`` deletes the data dir its state file names. That file is plain
JSON that anyone (or a bug) can change, so a name alone must never be enough to delete a
folder: it must also hold the marker that :func:`create_data_dir` wrote when it made it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from client_balance.errors import BrokerError

__all__ = ["MARKER_NAME", "create_data_dir", "is_marked", "new_data_dir", "remove_data_dir"]

MARKER_NAME = ".client-balance-kafka"
_MARKER_TEXT = (
    "A data dir that client-balance's LocalKafka created. 'client-balance broker stop' deletes\n"
    "a data dir only if it holds this file.\n"
)


def create_data_dir(path: Path | None) -> Path:
    """A fresh temporary data dir (``path`` None), or ``path``; marked if this call made it.

    A folder that exists already is used as it is and never marked: it may be anyone's.
    """
    if path is None:
        return new_data_dir(None, "client-balance-kafka-")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir()
    except FileExistsError:
        return path
    (path / MARKER_NAME).write_text(_MARKER_TEXT)
    return path


def new_data_dir(parent: Path | None, prefix: str) -> Path:
    """A new, marked data dir ``<prefix><random>`` in ``parent`` (None: the temp folder).

    The name is unique even for starts in the same instant, and only its owner may enter it.
    """
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    (made / MARKER_NAME).write_text(_MARKER_TEXT)
    return made


def is_marked(path: Path) -> bool:
    """Whether ``path`` is a data dir that a LocalKafka created (it holds the marker)."""
    marker = path / MARKER_NAME
    try:
        # A link could be planted to point at any marker; only a real file counts.
        return not marker.is_symlink() and marker.read_text() == _MARKER_TEXT
    except OSError:
        return False


def remove_data_dir(path: Path) -> None:
    """Delete the data dir ``path`` that a LocalKafka created; a missing one is fine.

    Raises :class:`BrokerError` and deletes nothing when ``path`` lacks the marker.
    """
    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink() or not path.is_dir() or not is_marked(path):
        raise BrokerError(
            f"refusing to delete {path}: it is not a data dir that client-balance's LocalKafka "
            f"created (it has no {MARKER_NAME} marker file). Delete it yourself if you are sure"
        )
    shutil.rmtree(path, ignore_errors=True)
