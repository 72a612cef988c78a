"""Files the agents' side writes that must never be left half written or readable by others:
private keys (``oanp keygen``, ``oanp witness keygen``) and the state of a witness or a log's
auditor."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: Owner read and write, nobody else anything: the file holds a private key.
KEY_FILE_MODE = 0o600


def replace_file(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` whole: a new file beside it, synced, renamed over it, and
    the folder synced, so a crash leaves the old content or the new, never a mix or nothing."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            os.fchmod(out.fileno(), mode)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def write_key_file(path: Path, data: bytes, *, force: bool = False) -> None:
    """Write a private key's ``data`` to ``path``, mode 0600. ``FileExistsError`` for a file
    that exists, unless ``force``, which replaces it whole; ``OSError`` as the system says."""
    if force:
        replace_file(path, data, mode=KEY_FILE_MODE)
        return
    # O_EXCL: a file that exists, or appears meanwhile, is never written over.
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_FILE_MODE)
    with os.fdopen(handle, "wb") as out:
        os.fchmod(out.fileno(), KEY_FILE_MODE)  # whatever the umask let through
        out.write(data)
