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
5. Every path is walked one component at a time from the root's descriptor (``openat`` with
   ``O_DIRECTORY | O_NOFOLLOW``: the one guarded step of :mod:`daemon.tlog._served_files`,
   rule 2 there): a symbolic link, or anything but a directory, at ``ab`` or
   ``ab/cd`` is :class:`UnsafeStorePath` (code ``STORE_PATH_UNSAFE``) and nothing is read or
   written through it, so no object ever lands outside the root.
6. Objects are opened ``O_NOFOLLOW | O_NONBLOCK`` and must then be regular files
   (``fstat``; :func:`daemon.tlog._served_files.open_regular`, rule 3 there): a symbolic
   link, a FIFO, a socket or a device in an object's place is :class:`ObjectCorrupt`,
   answered at once (a FIFO never blocks the opening thread).
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
    UnsafeStorePath,
    hex_of,
)
from daemon.tlog._served_files import SYMLINK, NotServed, open_directory, open_regular

__all__ = ["FilesystemStore"]

_TEMPORARY_PREFIX: Final = ".tmp-"
_REFRESH_SECONDS: Final = 60.0
_SYNCED_MEMORY: Final = 65_536
_DIRECTORY_FLAGS: Final = (
    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
)


def _describe(error: OSError) -> str:
    if error.strerror:
        return f"{error.strerror} ({errno.errorcode.get(error.errno or 0, error.errno)})"
    return str(error)


def _parts(hexdigest: str) -> tuple[str, str]:
    """The two directory components of an object."""
    return hexdigest[:2], hexdigest[2:4]


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

    # -- the walk (rule 5)

    def _open_directory(self, parts: tuple[str, ...], *, create: bool) -> int:
        """A descriptor of ``parts`` under the root, opened one component at a time without
        following links; absent components are created (0700, parent ``fsync``-ed) when
        ``create``, else ``FileNotFoundError``. The caller closes it."""
        current = self._fd
        walked: list[str] = []
        try:
            for part in parts:
                try:
                    following = self._open_component(current, part, walked)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(part, 0o700, dir_fd=current)
                    except FileExistsError:
                        pass
                    else:
                        os.fsync(current)
                    following = self._open_component(current, part, walked)
                if current != self._fd:
                    os.close(current)
                current = following
                walked.append(part)
        except BaseException:
            if current != self._fd:
                os.close(current)
            raise
        return current

    def _open_component(self, parent: int, part: str, walked: list[str]) -> int:
        """One step of the walk: ``daemon.tlog._served_files.open_directory`` (rule 5)."""
        try:
            return open_directory(parent, part, "/".join([*walked, part]))
        except NotServed as unsafe:
            raise UnsafeStorePath(
                f"store {self.id}: STORE_PATH_UNSAFE: {unsafe.where} is {unsafe.kind}; nothing "
                "is read or written through it (remove it: every directory in the store must "
                "be a real directory)"
            ) from None

    # -- put

    def put(self, data: bytes) -> PutResult:
        hexdigest = hashlib.sha256(data).hexdigest()
        name = "sha256:" + hexdigest
        try:
            directory = self._open_directory(_parts(hexdigest), create=True)
            try:
                try:
                    self._verify_present(name, hexdigest, directory, data)
                    return PutResult(name, len(data), created=False)
                except FileNotFoundError:
                    pass
                created = self._write(name, hexdigest, directory, data)
            finally:
                os.close(directory)
        except StoreError:
            raise
        except OSError as error:
            raise StoreError(f"store {self.id}: cannot store {name}: {_describe(error)}") from None
        return PutResult(name, len(data), created=created)

    def _write(self, name: str, hexdigest: str, directory: int, data: bytes) -> bool:
        temporary = f"{_TEMPORARY_PREFIX}{secrets.token_hex(8)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o600, dir_fd=directory)
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
                    hexdigest,
                    src_dir_fd=directory,
                    dst_dir_fd=directory,
                    follow_symlinks=False,
                )
                created = True
            except FileExistsError:  # another writer won the race: verify theirs
                created = False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=directory)
        os.fsync(directory)
        if not created:
            self._verify_present(name, hexdigest, directory, data)
        else:
            self._remember(name)
        return created

    def _open_object(self, name: str, hexdigest: str, directory: int) -> int:
        """Rule 6 (``daemon.tlog._served_files.open_regular``): a descriptor of a regular
        file, ``FileNotFoundError`` when absent."""
        try:
            return open_regular(directory, hexdigest)
        except NotServed as refused:
            if refused.kind == SYMLINK:
                raise ObjectCorrupt(
                    f"store {self.id}: object {name} is a symbolic link (corrupt)"
                ) from None
            raise ObjectCorrupt(
                f"store {self.id}: object {name} is not a regular file "
                f"({refused.kind}; corrupt, never read)"
            ) from None

    def _verify_present(self, name: str, hexdigest: str, directory: int, data: bytes) -> None:
        """Rule 4; ``FileNotFoundError`` when absent."""
        fd = self._open_object(name, hexdigest, directory)
        try:
            info = os.fstat(fd)
            if info.st_size != len(data):
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
                os.fsync(directory)
                first = self._open_directory(_parts(hexdigest)[:1], create=False)
                try:
                    os.fsync(first)
                finally:
                    os.close(first)
                os.fsync(self._fd)
                self._remember(name)
            if time.time() - info.st_mtime > _REFRESH_SECONDS:
                os.utime(fd)
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
        try:
            directory = self._open_directory(_parts(hexdigest), create=False)
            try:
                fd = self._open_object(name, hexdigest, directory)
            finally:
                os.close(directory)
        except FileNotFoundError:
            raise ObjectMissing(f"store {self.id}: no object {name}") from None
        except StoreError:
            raise
        except OSError as error:
            raise StoreError(f"store {self.id}: cannot read {name}: {_describe(error)}") from None
        try:
            info = os.fstat(fd)
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
        for _, hexdigest, info in self._entries(temporaries=False):
            yield StoredObject("sha256:" + hexdigest, info.st_size, info.st_mtime)

    def temporaries(self) -> Iterator[tuple[str, float]]:
        """Temporary files left by interrupted writes: (path relative to the root, mtime)."""
        for path, _, info in self._entries(temporaries=True):
            yield path, info.st_mtime

    def remove_temporary(self, path: str) -> None:
        first, second, entry = [*path.split("/"), "", "", ""][:3]
        if not entry.startswith(_TEMPORARY_PREFIX) or "/" in entry:
            raise ValueError(f"{path!r} is not a temporary file of this store")
        try:
            directory = self._open_directory((first, second), create=False)
        except FileNotFoundError:
            return
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry, dir_fd=directory)
        finally:
            os.close(directory)

    def _entries(self, *, temporaries: bool) -> Iterator[tuple[str, str, os.stat_result]]:
        """(path relative to the root, hex digest or "", lstat) of each object or temporary;
        a directory that is a link is :class:`UnsafeStorePath` (rule 5), never followed."""
        try:
            for first in os.listdir(self._fd):
                if not _is_hex_pair(first):
                    continue
                for second in self._listdir((first,)):
                    if not _is_hex_pair(second):
                        continue
                    try:
                        directory = self._open_directory((first, second), create=False)
                    except FileNotFoundError:
                        continue
                    try:
                        for entry in os.listdir(directory):
                            if temporaries:
                                if not entry.startswith(_TEMPORARY_PREFIX):
                                    continue
                            elif not (
                                len(entry) == 64
                                and entry.startswith(first + second)
                                and all(c in "0123456789abcdef" for c in entry)
                            ):
                                continue
                            try:
                                info = os.stat(entry, dir_fd=directory, follow_symlinks=False)
                            except FileNotFoundError:
                                continue
                            yield (
                                f"{first}/{second}/{entry}",
                                "" if temporaries else entry,
                                info,
                            )
                    finally:
                        os.close(directory)
        except StoreError:
            raise
        except OSError as error:
            raise StoreError(f"store {self.id}: cannot list: {_describe(error)}") from None

    def _listdir(self, parts: tuple[str, ...]) -> list[str]:
        try:
            fd = self._open_directory(parts, create=False)
        except FileNotFoundError:
            return []
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def delete(self, name: str) -> bool:
        hexdigest = hex_of(name)
        try:
            directory = self._open_directory(_parts(hexdigest), create=False)
        except FileNotFoundError:
            return False
        except StoreError:
            raise
        except OSError as error:
            raise StoreError(f"store {self.id}: cannot delete {name}: {_describe(error)}") from None
        try:
            os.unlink(hexdigest, dir_fd=directory)
        except FileNotFoundError:
            return False
        except OSError as error:
            raise StoreError(f"store {self.id}: cannot delete {name}: {_describe(error)}") from None
        finally:
            os.close(directory)
        return True


def _is_hex_pair(name: str) -> bool:
    return len(name) == 2 and all(c in "0123456789abcdef" for c in name)


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
        return os.open(root, _DIRECTORY_FLAGS)
    except OSError as error:
        raise StoreError(f"store fs:{root}: cannot open it: {_describe(error)}") from None
