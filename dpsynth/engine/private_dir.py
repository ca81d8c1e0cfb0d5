"""Private temporary folders for confidential files (data, draws), gone on every exit path.

Both backends keep what Stan reads and writes in one: CmdStan's data JSON and CSV files
(one folder per run) and httpstan's fit files (one folder per process). A folder is
``$TMPDIR/<prefix><pid>-<random>/`` (``tempfile.mkdtemp``: mode 0700) holding an empty
``.owner.lock`` that its process keeps locked (``flock``), ``.workers/`` naming the
forked processes that work for it (``<pid>-<start time>``, empty files) and ``.outside/``
linking to files of the owner made elsewhere (httpstan's sockets).

Removed when closed (the end of a run, or the process's exit), also on error and on
interruption. If the process dies without closing it (SIGKILL, out of memory), a watcher
process started with the folder (it waits for the end of a pipe only the owner holds)
kills the processes still working for the folder and removes it, with the files linked
from ``.outside/``. Folders left anyway (the watcher killed too) are removed when the
next folder is opened, in any process: their owner's lock is gone (:func:`sweep_stale`).
Processes are found through ``/proc`` (Linux).

Standard library only (and ``psutil`` if installed), no Stan.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence

from dpsynth.engine.common import flock

PREFIXES = ("dpsynth-cmdstan-", "dpsynth-pystan-")
"""The folders' name prefixes (one per backend); stale ones of each are swept."""
LOCK_NAME = ".owner.lock"
# also spelt out in :func:`_doomed_pids` and :func:`reap_folder` (the watcher's source)
WORKERS_NAME = ".workers"
OUTSIDE_NAME = ".outside"

_PARENT_ONLY_FDS: set[int] = set()
"""Lock and watcher-pipe descriptors that a forked child must not keep (:func:`_drop_in_child`)."""


def _drop_in_child() -> None:
    """After ``fork``: point the owner's lock and watcher pipe descriptors at the null device.

    A forked child (httpstan's sampler workers) holding the pipe would keep the watcher
    waiting after the owner died, and holding the lock would make the folder look alive.
    ``dup2`` rather than ``close``, so a later close of the copied file objects in the child
    cannot hit a descriptor reused for something else.
    """
    if not _PARENT_ONLY_FDS:
        return
    null = os.open(os.devnull, os.O_RDONLY)
    for fd in _PARENT_ONLY_FDS:
        with contextlib.suppress(OSError):
            os.dup2(null, fd, inheritable=False)
    os.close(null)
    _PARENT_ONLY_FDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_drop_in_child)


class PrivateFolder:
    """A private temporary folder with its owner's lock and watcher (see the module)."""

    def __init__(self, prefix: str) -> None:
        sweep_stale()
        self.owner = os.getpid()
        self.path = tempfile.mkdtemp(prefix=f"{prefix}{self.owner}-")
        self._watcher: subprocess.Popen | None = None
        lock = os.path.join(self.path, LOCK_NAME)
        self._lock: int | None = os.open(
            f"{lock}.new", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
        )
        _PARENT_ONLY_FDS.add(self._lock)
        try:
            flock(self._lock, blocking=True)
            os.replace(f"{lock}.new", lock)  # a sweep never sees the lock file free
            self._watcher = _start_watcher(self.path)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Kill this process's children working in the folder, remove it, stop the watcher.

        A forked copy of the owner (another process id) leaves the folder alone.
        """
        if os.getpid() != self.owner:
            return
        kill_descendants_naming(self.path)
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock is not None:
            _PARENT_ONLY_FDS.discard(self._lock)
            with contextlib.suppress(OSError):
                os.close(self._lock)
            self._lock = None
        watcher, self._watcher = self._watcher, None
        if watcher is not None and watcher.stdin is not None:
            _PARENT_ONLY_FDS.discard(watcher.stdin.fileno())
            with contextlib.suppress(OSError):
                watcher.stdin.close()  # the watcher finds the folder gone and exits
            # reaped without waiting here (it may still be starting up)
            threading.Thread(target=watcher.wait, name="dpsynth-watcher", daemon=True).start()


@contextlib.contextmanager
def private_folder(prefix: str) -> Iterator[str]:
    """A :class:`PrivateFolder`'s path for the block; the folder is removed when it ends."""
    folder = PrivateFolder(prefix)
    try:
        yield folder.path
    finally:
        folder.close()


def register_worker(folder: str) -> None:
    """Record this (forked) process in ``folder/.workers`` so that a watcher or a sweep
    can kill it. Nothing happens if the folder is gone (it is never created again here)."""
    workers = os.path.join(folder, WORKERS_NAME)
    with contextlib.suppress(FileExistsError, FileNotFoundError):
        os.mkdir(workers, 0o700)
    started = _start_time(os.getpid())
    if started is not None:
        with contextlib.suppress(OSError):
            os.close(os.open(os.path.join(workers, f"{os.getpid()}-{started}"), os.O_CREAT, 0o600))


def register_outside(folder: str, path: str) -> None:
    """Record a file of ``folder``'s owner made outside it (httpstan's sockets, which must
    be in ``$TMPDIR`` for their short names): a watcher or a sweep removes it with the
    folder. A symbolic link ``.outside/<name>`` to the file; none if the folder is gone."""
    outside = os.path.join(folder, OUTSIDE_NAME)
    with contextlib.suppress(FileExistsError, FileNotFoundError):
        os.mkdir(outside, 0o700)
    with contextlib.suppress(OSError):
        os.symlink(path, os.path.join(outside, os.path.basename(path)))


def forget_outside(folder: str, path: str) -> None:
    """Remove the file ``path`` recorded by :func:`register_outside`, then its record."""
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(folder, OUTSIDE_NAME, os.path.basename(path)))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def sweep_stale(prefixes: Sequence[str] = PREFIXES, max_unlocked_age: float = 60.0) -> int:
    """Remove the private folders of processes that died without cleaning up; return how many.

    A live owner holds an exclusive lock on its ``.owner.lock`` (the kernel drops it when
    the process dies, whatever kills it). A folder without that file (its owner died
    between creating the folder and the file) counts as stale after ``max_unlocked_age``
    seconds. Only this user's folders are considered; their processes are killed first.
    """
    count = 0
    try:
        entries = [
            e for e in os.scandir(tempfile.gettempdir()) if e.name.startswith(tuple(prefixes))
        ]
    except OSError:
        return 0
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False) and entry.stat().st_uid == os.getuid():
                if _stale(entry.path, max_unlocked_age):
                    reap_folder(entry.path)
                    count += 1
    return count


def _stale(folder: str, max_unlocked_age: float) -> bool:
    """Whether ``folder``'s owner is gone (its lock is free, or it never made one)."""
    try:
        fd = os.open(os.path.join(folder, LOCK_NAME), os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return time.time() - os.stat(folder).st_mtime >= max_unlocked_age
    try:
        return flock(fd, blocking=False)
    finally:
        os.close(fd)


def _start_time(pid: int) -> str | None:
    """Process ``pid``'s start time (field 22 of ``/proc/<pid>/stat``), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _doomed_pids(folder: str) -> list[int]:
    """Processes working for ``folder``: their arguments name it (CmdStan chains), or they
    are recorded in its ``.workers`` with their start time (a reused id does not match)."""
    import os

    marker = os.path.join(folder, "").encode()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    except OSError:
        pids = []
    doomed = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if any(marker in arg for arg in fh.read().split(b"\0")):
                    doomed.append(pid)
        except OSError:
            continue
    try:
        workers = os.listdir(os.path.join(folder, ".workers"))
    except OSError:
        workers = []
    for name in workers:
        pid, _, started = name.partition("-")
        if pid.isdigit() and int(pid) != os.getpid() and _start_time(int(pid)) == started:
            doomed.append(int(pid))
    return doomed


def reap_folder(folder: str) -> None:
    """Kill the processes working for ``folder`` (this user's: others refuse), remove the
    files linked from its ``.outside/``, remove it.

    Standard library only: it is also the body of the watcher process (:func:`_start_watcher`).
    """
    import os
    import shutil
    import signal

    for pid in _doomed_pids(folder):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
    outside = os.path.join(folder, ".outside")
    try:
        links = os.listdir(outside)
    except OSError:
        links = []
    for name in links:
        try:
            os.unlink(os.readlink(os.path.join(outside, name)))
        except OSError:
            continue
    shutil.rmtree(folder, ignore_errors=True)


def _watcher_source() -> str | None:
    """The watcher's program: :func:`reap_folder` and its helpers' source, then its main lines.

    Read once, when this module is imported (the file on disk may change later, for
    example when dpsynth is upgraded under a running kernel); ``None`` without source.
    """
    import inspect

    try:
        parts = [inspect.getsource(f) for f in (_start_time, _doomed_pids, reap_folder)]
    except (OSError, TypeError):
        return None
    main = (
        "import os, sys\n"
        "sys.stdin.buffer.read()  # returns when the owner closes the folder or dies\n"
        "if os.path.isdir(sys.argv[1]):\n"
        "    reap_folder(sys.argv[1])\n"
    )
    return "\n\n".join([*parts, main])


_WATCHER_SOURCE = _watcher_source()


def _start_watcher(folder: str) -> subprocess.Popen | None:
    """Start a process that reaps ``folder`` (:func:`reap_folder`) if this one dies.

    It reads a pipe whose writing end only this process holds (close-on-exec, so CmdStan
    does not inherit it, and dropped in forked children by :func:`_drop_in_child`); the
    read returns when the folder is closed or this process dies, however. It runs in its
    own session, so a signal to this process group does not reach it. ``None`` if no
    Python interpreter can be started.
    """
    if not sys.executable or not os.path.isdir("/proc") or not _WATCHER_SOURCE:
        return None
    try:
        watcher = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHER_SOURCE, folder],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None
    if watcher.stdin is not None:
        _PARENT_ONLY_FDS.add(watcher.stdin.fileno())
    return watcher


def kill_descendants_naming(folder: str) -> None:
    """Kill this process's descendants whose arguments name ``folder`` (CmdStan chains)."""
    try:
        import psutil
    except ImportError:
        return
    marker = os.path.join(folder, "")
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if any(marker in arg for arg in child.cmdline()):
                child.kill()
