"""The filesystem retention store: ``ROOT/ab/cd/abcd…`` (``docs/retention.md`` §2).

Rules (in addition to :mod:`daemon.retention._store`'s):

1. Safe root. At open the root is created (mode 0700) when absent (unless ``create`` is
   false: replay and gc only read); it must be a directory
   (not a symbolic link), owned by the effective user, with no group or other permission
   bits, else :class:`StoreError`. Every later operation is relative to a descriptor of that
   directory, so renaming or replacing the root path afterwards redirects nothing.
2. Layout. Object ``sha256:abcd…`` is the file ``ab/cd/abcd…`` (two levels of 256
   directories), mode 0600; directories are created mode 0700. Names that are not 64
   lowercase hex digits under the matching directories are not objects (listing skips them).
3. Writing an absent object, in this order: create a unique temporary file beside it
   (``O_EXCL``, 0600), write every byte, ``fsync`` it, ``link`` it to the object's name
   (``link`` never replaces an existing name, unlike ``rename``), remove the temporary name,
   ``fsync`` the directory. A directory created on the way is ``fsync``-ed in its parent
   first. Any failure removes the temporary file and raises :class:`StoreError`; the object
   name then either does not exist or holds the complete, synced bytes.
4. A present object (found before writing, or created concurrently by another writer) is read
   and compared byte for byte with the bytes offered: different length or bytes are
   :class:`ObjectCorrupt`. The first time this process sees it, the object and its directories
   are ``fsync``-ed (a writer that crashed between ``link`` and the directory ``fsync`` may have
   left a name that is not yet durable); a bounded memory of synced names avoids repeating it.
   Its modification time is refreshed (at most once a minute) so ``store gc``'s grace period
   protects evidence whose decision is still in flight.
5. Files are opened with ``O_NOFOLLOW``: a symbolic link in an object's place is corrupt.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import os
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from daemon.retention._store import (
    ObjectCorrupt,
    ObjectMissing,
    PutResult,
    StoredObject,
    StoreError,
    hex_of,
)

__all__ = ["FilesystemStore"]

_TEMPORARY_PREFIX: Final = ".tmp-"
_REFRESH_SECONDS: Final = 60.0
_SYNCED_MEMORY: Final = 65_536
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _describe(error: OSError) -> str:
    if error.strerror:
        return f"{error.strerror} ({errno.errorcode.get(error.errno or 0, error.errno)})"
    return str(error)


def _relative(hexdigest: str) -> tuple[str, str]:
    """(directory, object path), relative to the root."""
    directory = f"{hexdigest[:2]}/{hexdigest[2:4]}"
    return directory, f"{directory}/{hexdigest}"


class FilesystemStore:
    """Evidence objects under one directory (module rules)."""

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True) -> None:
        self.root = Path(os.path.abspath(root))
        self._fd = _open_root(self.root, create)
        self._synced: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        return f"fs:{self.root}"

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    # -- put

    def put(self, data: bytes) -> PutResult:
        hexdigest = hashlib.sha256(data).hexdigest()
        name = "sha256:" + hexdigest
        directory, path = _relative(hexdigest)
        try:
            try:
                self._verify_present(name, path, directory, data)
                return PutResult(name, len(data), created=False)
            except FileNotFoundError:
                pass
            created = self._write(name, path, directory, data)
        except OSError as error:
            raise StoreError(f"store {self.id}: cannot store {name}: {_describe(error)}") from None
        return PutResult(name, len(data), created=created)

    def _write(self, name: str, path: str, directory: str, data: bytes) -> bool:
        self._make_directories(directory)
        temporary = f"{directory}/{_TEMPORARY_PREFIX}{secrets.token_hex(8)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o600, dir_fd=self._fd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(
                    temporary,
                    path,
                    src_dir_fd=self._fd,
                    dst_dir_fd=self._fd,
                    follow_symlinks=False,
                )
                created = True
            except FileExistsError:  # another writer won the race: verify theirs
                created = False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=self._fd)
        self._sync_directory(directory)
        if not created:
            self._verify_present(name, path, directory, data)
        else:
            self._remember(name)
        return created

    def _verify_present(self, name: str, path: str, directory: str, data: bytes) -> None:
        """Rule 4; ``FileNotFoundError`` when absent."""
        try:
            fd = os.open(path, _READ_FLAGS, dir_fd=self._fd)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise ObjectCorrupt(
                    f"store {self.id}: object {name} is a symbolic link (corrupt)"
                ) from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size != len(data):
                raise ObjectCorrupt(
                    f"store {self.id}: object {name} is {info.st_size} bytes, not the "
                    f"{len(data)} bytes that hash to its name (corrupt; never rewritten)"
                )
            if _read_all(fd, info.st_size) != data:
                raise ObjectCorrupt(
                    f"store {self.id}: object {name} holds other bytes than its name says "
                    "(corrupt; never rewritten)"
                )
            if not self._known_synced(name):
                os.fsync(fd)
                self._sync_directory(directory, parents=True)
                self._remember(name)
            if time.time() - info.st_mtime > _REFRESH_SECONDS:
                os.utime(fd)
        finally:
            os.close(fd)

    def _make_directories(self, directory: str) -> None:
        parent = ""
        for part in directory.split("/"):
            target = f"{parent}/{part}" if parent else part
            try:
                os.mkdir(target, 0o700, dir_fd=self._fd)
            except FileExistsError:
                pass
            else:
                self._sync_directory(parent)
            parent = target

    def _sync_directory(self, directory: str, *, parents: bool = False) -> None:
        chain = [directory]
        if parents:
            chain += [directory.split("/")[0], ""]
        for item in chain:
            fd = os.open(item or ".", _DIRECTORY_FLAGS, dir_fd=self._fd)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _known_synced(self, name: str) -> bool:
        with self._lock:
            if name in self._synced:
                self._synced.move_to_end(name)
                return True
            return False

    def _remember(self, name: str) -> None:
        with self._lock:
            self._synced[name] = None
            if len(self._synced) > _SYNCED_MEMORY:
                self._synced.popitem(last=False)

    # -- get, list, delete

    def get(self, name: str, size: int | None = None) -> bytes:
        hexdigest = hex_of(name)
        _, path = _relative(hexdigest)
        try:
            fd = os.open(path, _READ_FLAGS, dir_fd=self._fd)
        except FileNotFoundError:
            raise ObjectMissing(f"store {self.id}: no object {name}") from None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise ObjectCorrupt(
                    f"store {self.id}: object {name} is a symbolic link (corrupt)"
                ) from None
            raise StoreError(f"store {self.id}: cannot read {name}: {_describe(error)}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ObjectCorrupt(f"store {self.id}: object {name} is not a regular file")
            if size is not None and info.st_size != size:
                raise ObjectCorrupt(
                    f"store {self.id}: object {name} is {info.st_size} bytes, the log says "
                    f"{size} (corrupt)"
                )
            data = _read_all(fd, info.st_size)
        except OSError as error:
            raise StoreError(f"store {self.id}: cannot read {name}: {_describe(error)}") from None
        finally:
            os.close(fd)
        if hashlib.sha256(data).hexdigest() != hexdigest:
            raise ObjectCorrupt(
                f"store {self.id}: object {name} does not hash to its name (corrupt)"
            )
        return data

    def objects(self) -> Iterator[StoredObject]:
        for path, hexdigest in self._entries(temporaries=False):
            try:
                info = os.stat(path, dir_fd=self._fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            yield StoredObject("sha256:" + hexdigest, info.st_size, info.st_mtime)

    def temporaries(self) -> Iterator[tuple[str, float]]:
        """Temporary files left by interrupted writes: (path relative to the root, mtime)."""
        for path, _ in self._entries(temporaries=True):
            try:
                yield path, os.stat(path, dir_fd=self._fd, follow_symlinks=False).st_mtime
            except FileNotFoundError:
                continue

    def remove_temporary(self, path: str) -> None:
        if _TEMPORARY_PREFIX not in path:
            raise ValueError(f"{path!r} is not a temporary file of this store")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path, dir_fd=self._fd)

    def _entries(self, *, temporaries: bool) -> Iterator[tuple[str, str]]:
        try:
            for first in _listdir(self._fd, "."):
                if not _is_hex_pair(first):
                    continue
                for second in _listdir(self._fd, first):
                    if not _is_hex_pair(second):
                        continue
                    directory = f"{first}/{second}"
                    for entry in _listdir(self._fd, directory):
                        if temporaries:
                            if entry.startswith(_TEMPORARY_PREFIX):
                                yield f"{directory}/{entry}", ""
                        elif (
                            len(entry) == 64
                            and entry.startswith(first + second)
                            and all(c in "0123456789abcdef" for c in entry)
                        ):
                            yield f"{directory}/{entry}", entry
        except OSError as error:
            raise StoreError(f"store {self.id}: cannot list: {_describe(error)}") from None

    def delete(self, name: str) -> bool:
        _, path = _relative(hex_of(name))
        try:
            os.unlink(path, dir_fd=self._fd)
        except FileNotFoundError:
            return False
        except OSError as error:
            raise StoreError(f"store {self.id}: cannot delete {name}: {_describe(error)}") from None
        return True


def _is_hex_pair(name: str) -> bool:
    return len(name) == 2 and all(c in "0123456789abcdef" for c in name)


def _listdir(root_fd: int, relative: str) -> list[str]:
    fd = os.open(relative, _DIRECTORY_FLAGS | os.O_NOFOLLOW, dir_fd=root_fd)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    chunks = []
    remaining = size
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _open_root(root: Path, create: bool) -> int:
    """Rule 1: create or check the root, and open it."""
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        if not create:
            raise StoreError(f"store fs:{root} does not exist") from None
        try:
            root.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(root, 0o700)
        except FileExistsError:
            pass
        except OSError as error:
            raise StoreError(f"store fs:{root}: cannot create it: {_describe(error)}") from None
        info = os.lstat(root)
    except OSError as error:
        raise StoreError(f"store fs:{root}: {_describe(error)}") from None
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a directory"
    elif info.st_uid != os.geteuid():
        problem = f"is owned by uid {info.st_uid}, not by this user ({os.geteuid()})"
    elif info.st_mode & 0o077:
        problem = (
            f"is accessible to group or others (mode {stat.S_IMODE(info.st_mode):04o}); "
            "evidence can be sensitive: chmod 0700 it"
        )
    if problem is not None:
        raise StoreError(f"store fs:{root} {problem}")
    try:
        return os.open(root, _DIRECTORY_FLAGS | os.O_NOFOLLOW)
    except OSError as error:
        raise StoreError(f"store fs:{root}: cannot open it: {_describe(error)}") from None
