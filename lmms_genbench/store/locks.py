"""One writer per chain: an advisory lock per chain folder while a run computes it.

The lock is ``<chain folder>/.lock`` taken with ``filelock`` (``flock`` on POSIX), so the
kernel releases it when its process dies: a killed run never blocks another for good. A run
skips a chain another run holds, computes the rest, then waits for the held chains and reads
what the other run stored. ``flock`` is honoured across processes on local filesystems and
on NFSv4 and recent CIFS/SMB mounts; on NFSv3 without lockd, some FUSE mounts and object-store
mounts it may not be (README, "What survives what").
"""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock, Timeout

__all__ = ["ChainLocks", "LOCK_NAME"]

LOCK_NAME = ".lock"


class _ChainLock(FileLock):
    """filelock's lock, as its own class: lmms-eval 0.7.3 patches ``FileLock(path)`` to return
    one shared, reentrant instance per path in a process, so two runs in one process (a
    notebook, tests) would both hold a chain; its patch leaves subclasses alone."""


class ChainLocks:
    """The chain locks one run holds."""

    def __init__(self, poll_seconds: float = 0.5) -> None:
        self.poll_seconds = poll_seconds
        self._held: dict[Path, FileLock] = {}

    def try_acquire(self, directory: Path) -> bool | None:
        """True: this run holds the chain now; False: another run does; None: it cannot be
        locked (a read-only store: nothing will be written to it by this run either)."""
        if directory in self._held:
            return True
        try:
            directory.mkdir(parents=True, exist_ok=True)
            lock = _ChainLock(str(directory / LOCK_NAME))
            lock.acquire(timeout=0)
        except Timeout:
            return False
        except OSError:
            return None
        self._held[directory] = lock
        return True

    def release(self, directory: Path) -> None:
        lock = self._held.pop(directory, None)
        if lock is not None:
            lock.release()

    def release_all(self) -> None:
        for directory in list(self._held):
            self.release(directory)

    def wait(self, directory: Path) -> None:
        """Block until no other run holds the chain (then leave it free)."""
        try:
            lock = _ChainLock(str(directory / LOCK_NAME))
            lock.acquire(poll_interval=self.poll_seconds)
        except OSError:
            return
        lock.release()
