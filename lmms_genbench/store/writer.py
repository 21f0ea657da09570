"""A background writer for the artifact store: PNG encoding (on a small pool), fsync and
rename off the describer's and the generator's threads.

Writes are done in the order they were queued, by one thread, each atomically
(:meth:`ChainLocation.write_image` / ``write_text``), so a chain's hops reach the
disk in hop order and a file that exists is complete, as with direct writes. The
queue is bounded: a producer that outruns the disk waits instead of holding
every image in memory.

After each hop's file the writer appends its record to the chain's ``hops.jsonl``: the file's
sha256 (of the bytes it wrote, not read back) and the sha256 of the hop it was computed from,
as stored (:mod:`.verify`). Each image it stores is also held in memory under that hash
(:mod:`.held`), so a scorer in the same process decodes no file the engine drew.

When a write fails the writer keeps nothing more: it discards what is queued
(producers never block on a dead writer) and :meth:`StoreWriter.check` raises
:class:`StoreWriteError` naming the file and the cause. Files written before
the failure stay as they are, and a rerun resumes from them.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.errors import ActionableError, describe
from . import held
from .layout import ChainLocation, encode_png
from .verify import append_record, sha256_file

__all__ = ["StoreWriteError", "StoreWriter"]

#: threads that PNG-encode and hash images (zlib and sha256 release the GIL): the last
#: batch's images are encoded side by side instead of one after another behind the writer
ENCODERS = 2

_STOP = object()
_CALL = object()


def _encode(image: Any) -> tuple[bytes, str]:
    blob = encode_png(image)
    return blob, hashlib.sha256(blob).hexdigest()


class StoreWriteError(ActionableError):
    """The artifact store could not be written (disk full, no permission, ...)."""

    def __init__(self, path: str, exc: BaseException) -> None:
        super().__init__(
            f"could not write the artifact store file {path} ({describe(exc)})",
            "free disk space or point model_args artifacts= (or $LMMS_GENBENCH_ARTIFACTS) at a writable "
            "folder, then rerun the same command: it resumes from the files already written",
        )
        self.path = path


class StoreWriter:
    """Queue of store writes served by one daemon thread.

    Use as a context manager: leaving it waits until every queued write is done
    (also when the body raised, so that work already computed is kept), then
    raises :class:`StoreWriteError` if a write failed.
    """

    def __init__(self, max_pending: int = 32) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, int(max_pending)))
        self._error: StoreWriteError | None = None
        self.written = 0
        self._last: dict = {}  # chain folder -> (hop, sha256) of the last hop written there
        self._thread = threading.Thread(target=self._serve, name="genbench-store-writer", daemon=True)
        self._encoders = ThreadPoolExecutor(max_workers=ENCODERS, thread_name_prefix="genbench-encode")

    def __enter__(self) -> "StoreWriter":
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()
        if exc_type is None:
            self.check()

    def write_image(self, location: ChainLocation, hop: int, image: Any, note: dict | None = None) -> None:
        """``note``: extra fields of the hop's record (the text the generator cut: ``{"cut": ...}``)."""
        self._put(location, hop, "image", image, note)

    def write_text(self, location: ChainLocation, hop: int, text: str) -> None:
        self._put(location, hop, "text", text)

    def _put(self, location: ChainLocation, hop: int, kind: str, payload: Any, note: dict | None = None) -> None:
        self.check()
        if kind == "image":  # encoded on the pool at once; stored in order by the writer thread
            payload = (payload, self._encoders.submit(_encode, payload))
        self._queue.put((location, hop, kind, payload, note))

    def after(self, fn) -> None:
        """Call ``fn`` on the writer thread once every write queued before it is done (or
        discarded after a failure): a chain's lock is released only when its hops are stored."""
        self._queue.put((_CALL, fn, None, None, None))

    def check(self) -> None:
        """Raise the first write failure, if any."""
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Wait until every queued write is done (or discarded after a failure)."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()
        self._encoders.shutdown(wait=True)

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if item[0] is _CALL:
                item[1]()
                continue
            if self._error is not None:
                continue  # drained, not written: the run stops at the next check
            location, hop, kind, payload, note = item
            try:
                # the hash is of the bytes in hand: the file is not read back to compute it
                if kind == "image":
                    image, encoded = payload
                    blob, sha = encoded.result()
                    location.write_image(hop, blob)
                    held.hold(sha, image)  # a scorer in this process reads it from memory
                else:
                    location.write_text(hop, payload)
                    sha = hashlib.sha256(payload.encode("utf-8")).hexdigest()
                self._record(location, hop, kind, sha, note)
                self.written += 1
            except BaseException as exc:  # any failure stops the writes, reported on the producer's side
                self._error = StoreWriteError(str(location.path(hop, kind)), exc)
                self._error.__cause__ = exc

    def _record(self, location: ChainLocation, hop: int, kind: str, sha: str, note: dict | None = None) -> None:
        """Append hop ``hop``'s record: its hash and its input's, as stored."""
        directory = location.directory
        last = self._last.get(directory)
        if hop == 0:
            source = None
        elif last is not None and last[0] == hop - 1:
            source = last[1]
        else:  # the first hop this run computed: its input was stored by an earlier run
            source = sha256_file(location.path(hop - 1, "text" if kind == "image" else "image"))
        append_record(directory, hop, sha, source, note)
        self._last[directory] = (hop, sha)
