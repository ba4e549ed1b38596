"""A session log in an append-only JSON Lines file: one event per line, one writer per file."""

from __future__ import annotations

import io
import os
from pathlib import Path

from dsh_tools._errors import SessionLogLockedError

from ._events import SessionEvent
from ._log import SessionLogBase, check_integrity_key, fresh_chain
from ._wire import parse_lines

__all__ = ["JsonlSessionLog", "read_session_log"]


class JsonlSessionLog(SessionLogBase):
    r"""A :class:`SessionLog` in an append-only JSON Lines file: one event per line.

    Args:
        path: the file. It is opened (and created if missing) here, so a bad path fails here;
            an existing file is continued (its events keep their sequence numbers, new ones
            follow).
        fsync: also ``os.fsync`` after every event, so an appended event survives a power
            loss, not just a crash of this process. Every event reaches the operating system
            before ``append`` returns either way.
        integrity_key: a secret (32 random bytes, say) that makes the log tamper-evident:
            every event's line carries ``"mac"``, HMAC-SHA256 over the previous event's MAC
            and the line, and reading (here, :meth:`events`, :func:`read_session_log` with the
            key, and so resuming and folding grants) verifies the chain. Without a key the
            lines are what they always were.

    Raises:
        TypeError: ``fsync`` is not a ``bool``, or ``integrity_key`` not ``bytes``.
        SessionLogLockedError: another writer holds the file.
        SessionLogCorruptError: the existing file holds a line that is not an event.
        SessionLogIntegrityError: with a key, the existing file holds an event the chain does
            not vouch for (its ``seq`` names the first).
        OSError: the file cannot be opened or created.

    One writer per file. The log keeps the file open and holds an exclusive advisory lock on it
    (``fcntl.flock``, so POSIX systems: Linux, macOS, the BSDs) until :meth:`close`; it is also
    a context manager. A second ``JsonlSessionLog`` on the same file, in this process or
    another, gets :class:`SessionLogLockedError`. Readers use :func:`read_session_log`, which
    takes no lock and never writes. A log garbage-collected while open is closed with a
    ``ResourceWarning``, as a file is. Not available where ``fcntl`` is not (Windows):
    constructing one raises ``NotImplementedError`` there.

    Durability rules. Each event is written as one line with a single unbuffered ``write``
    before ``append`` returns, so an event whose ``append`` returned is never lost by a crash
    of the process. A crash in the middle of a write leaves a torn last line (no newline, not
    parseable): reading tolerates it, and the next writer, holding the lock, cuts it off first
    so the next event starts on a fresh line. A last line that parses as an event but lost only
    its newline is a complete event and is kept. A last line without newline that is JSON but
    not an event cannot be a torn write (no proper prefix of an event's JSON object is JSON),
    so it is corruption, like any other line that is not an event: reading raises
    :class:`SessionLogCorruptError` with its line number, never skipping it silently. An
    ``append`` whose write fails partway (a full disk, a file-size limit) cuts the file back to
    its last complete event before it raises, or refuses further appends until the log is
    reopened when it cannot (:meth:`append` says which in its error).

    Text. Every Python ``str`` is written losslessly: text is UTF-8, and a lone surrogate
    (from ``surrogateescape``, or model text) is written as its JSON ``\udXXX`` escape, which
    reads back as the same string. The one exception JSON itself imposes: a high surrogate
    directly followed by a low one is, in JSON, the escape of the character they spell, and
    reads back as that character.
    """

    __slots__ = ("_broken", "_end", "_file", "_fsync", "_key", "_path")

    _path: Path
    _fsync: bool
    _end: int
    _broken: bool
    _file: io.FileIO | None
    _key: bytes | None

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: bool = False,
        integrity_key: bytes | None = None,
    ) -> None:
        self._closed = True  # until the file is open and locked (so __del__ has nothing to do)
        self._file = None
        if type(fsync) is not bool:
            raise TypeError(f"fsync must be a bool, not {fsync!r}")
        self._key = check_integrity_key(integrity_key)
        self._chain = chain = fresh_chain(self._key)
        self._path = Path(path)
        self._fsync = fsync
        created = not self._path.exists()
        file = io.FileIO(self._path, "a+")
        try:
            _lock(file, self._path)
            raw = _read_all(file)
            events, good_end, needs_newline = parse_lines(raw, str(self._path), chain)
            if good_end is not None:
                # a torn tail from an earlier crash: cut it off so the next event starts clean
                file.truncate(good_end)
            elif needs_newline:
                _write_all(file, b"\n")
            if fsync:
                os.fsync(file.fileno())
                if created:
                    _fsync_directory(self._path.parent)  # makes the new file's name durable
            end = os.fstat(file.fileno()).st_size
        except BaseException:
            file.close()
            raise
        self._end = end
        self._broken = False
        self._file = file
        self._opened(len(events))

    @property
    def path(self) -> Path:
        """The file this log appends to."""
        return self._path

    def _store(self, seq: int, line: bytes) -> None:
        """Write ``event`` as one line (and ``fsync`` it when configured).

        A write that fails (a full disk, a file-size limit, an I/O error) may have written part
        of the line. The log then cuts the file back to the end of its last complete event
        before the error leaves, so the next event starts on a clean line and no reader ever
        meets the partial one: the failed event is not appended, every acknowledged one stays
        readable, and the log accepts further appends. If the cut itself fails, the log refuses
        every further append (``ValueError``) until it is reopened (reopening cuts the partial
        line, which reads as a torn last line until then). The ``OSError`` raised keeps the
        write's ``errno`` and its message ends with which of the two happened: ``... the log was
        cut back to its last complete event and accepts appends`` or ``... the log refuses
        appends until it is reopened``.
        """
        file = self._file
        assert file is not None  # open: the base refuses a closed log
        if self._broken:
            raise ValueError(
                f"append to a JsonlSessionLog whose failed append left a partial line it could "
                f"not cut off ({self._path}); reopen the log, which cuts it"
            )
        line = line + b"\n"
        end = self._end
        try:
            _write_all(file, line)
            if self._fsync:
                os.fsync(file.fileno())
        except OSError as exc:
            raise self._cut_back(file, end, exc) from exc
        except BaseException:
            self._cut_back(file, end, None)
            raise
        self._end = end + len(line)

    def _cut_back(self, file: io.FileIO, end: int, exc: OSError | None) -> OSError:
        """Cut the file back to ``end`` after a failed append; the error to raise for ``exc``."""
        what = f"{self._path}: {exc.strerror or exc}" if exc is not None else str(self._path)
        try:
            os.ftruncate(file.fileno(), end)
        except OSError as cut:
            self._broken = True
            return OSError(
                exc.errno if exc is not None else cut.errno,
                f"{what}; the event was not appended and its partial line could not be cut off "
                f"({cut.strerror or cut}): the log refuses appends until it is reopened",
            )
        return OSError(
            exc.errno if exc is not None else None,
            f"{what}; the event was not appended: the log was cut back to its last complete "
            "event and accepts appends",
        )

    def _read(self) -> list[SessionEvent]:
        """Read every event back, in order, tolerating a torn last line."""
        file = self._file
        assert file is not None
        return parse_lines(_read_all(file), str(self._path), fresh_chain(self._key))[0]

    def _release(self) -> None:
        file = self._file
        self._file = None
        if file is not None:
            file.close()

    def _describe(self) -> str:
        return repr(str(self._path))

    def _where(self) -> str:
        return str(self._path)


def read_session_log(
    path: str | os.PathLike[str], *, integrity_key: bytes | None = None
) -> list[SessionEvent]:
    """Read every event of a JSON Lines session log, in order, without writing or locking.

    Safe while a :class:`JsonlSessionLog` in another process is appending: a torn last line
    (an event being written right now, or left by a crash) is skipped, never cut.

    Safe on any file: a line JSON cannot be read from within Python's limits (nested deeper
    than the recursion limit, a number longer than ``int`` converts) is no event, so it is
    reported as corruption like any other such line, or skipped as a torn last line.

    With ``integrity_key`` (the key the log was written with), every complete line is verified
    (see :class:`JsonlSessionLog`); without it a keyed log reads as well, unchecked.

    Raises:
        FileNotFoundError: there is no such file.
        SessionLogCorruptError: a line other than a torn last one is not an event.
        SessionLogIntegrityError: with a key, an event the chain does not vouch for.
        TypeError, ValueError: ``integrity_key`` is not non-empty ``bytes``.
    """
    chain = fresh_chain(check_integrity_key(integrity_key))
    raw = Path(path).read_bytes()
    return parse_lines(raw, str(path), chain)[0]


try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None


def _lock(file: io.FileIO, path: Path) -> None:
    if fcntl is None:  # pragma: no cover - Windows
        raise NotImplementedError("JsonlSessionLog needs fcntl.flock (a POSIX system)")
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SessionLogLockedError(
            str(path), log_class="JsonlSessionLog", read_with="read_session_log()"
        ) from None


def _read_all(file: io.FileIO) -> bytes:
    size = os.fstat(file.fileno()).st_size
    chunks: list[bytes] = []
    offset = 0
    while offset < size:
        chunk = os.pread(file.fileno(), size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all(file: io.FileIO, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = file.write(view)
        if written is None:  # pragma: no cover - only for non-blocking files
            continue
        view = view[written:]


def _fsync_directory(directory: Path) -> None:
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:  # a platform that cannot open directories (Windows): nothing to sync
        return
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
