"""Files of one folder written all or nothing, whatever point a kill (SIGKILL, power loss) interrupts the write at.

`write_all(folder, files)`:
1. stage: each file is written into `<folder>/.blueprint-write/` (`STAGING_DIR`, mode 0700: stack configs carry the
   stack's encrypted secrets and `encryptionsalt`) and flushed to disk; the folder's own files are not touched;
2. commit: `journal.json` there names each staged file's target; it is written under a temporary name, flushed and
   renamed into place: its rename is the commit point;
3. install: each staged file is renamed over its target (`os.replace`, atomic per file);
4. clean: the staging folder is removed.

The writer holds an exclusive `flock` on `LOCK` in the staging folder from its creation to its removal; the kernel
releases it when the process dies, so a staging folder whose lock can be taken was left by a killed write, and one
whose lock is held is another command's write in progress, left alone.

`recover(folder)` runs before every write and at the start of every command (`blueprints.cli`): a journal found
(killed while installing) is replayed, so every file of that write lands (roll forward: the write was complete); a
staging folder without one (killed while staging) is removed, and the folder's files are those of the write
before (roll back). Temporary files an earlier version left beside the stack configs (`.Pulumi.<stack>.yaml.*`)
are removed too. It returns what it did, for the command to say. `.gitignore` ignores both patterns, so a
staged secret is never committed.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

from blueprints.core.errors import StackConfigError

#: The staging folder inside the folder written.
STAGING_DIR = ".blueprint-write"
JOURNAL = "journal.json"
LOCK = "lock"
#: Temporary files of the per-file writes before the journal (`tempfile.mkstemp(prefix=".<name>.")`).
LEGACY_TEMP_GLOB = ".Pulumi.*.yaml.*"


def _fsync_dir(folder: Path) -> None:
    """Make renames within `folder` durable (POSIX: a rename is on disk once its directory is flushed)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _install(folder: Path) -> tuple[list[str], list[str]]:
    """Rename every staged file of the committed journal over its target, then remove the staging folder: (the files
    installed now, every file of the write)."""
    staging = folder / STAGING_DIR
    entries = json.loads((staging / JOURNAL).read_text(encoding="utf-8"))
    installed = []
    for staged, target in entries:
        if (staging / staged).is_file():
            os.replace(staging / staged, folder / target)
            installed.append(target)
    _fsync_dir(folder)
    shutil.rmtree(staging)
    return installed, [target for _, target in entries]


def _lock(staging: Path, *, wait: bool) -> int | None:
    """An exclusive lock on the staging folder's `LOCK` (created if absent): its file descriptor, or None when
    another process holds it (`wait` False)."""
    fd = os.open(staging / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def recover(folder: Path) -> list[str]:
    """Finish or undo a write a kill interrupted in `folder` (see the module docstring), and remove stale temporary
    files. Returns one sentence per thing done (none: nothing was left over).

    Raises:
        StackConfigError: the staging folder or a file cannot be removed or renamed (names it).
    """
    staging = folder / STAGING_DIR
    done: list[str] = []
    lock = None
    try:
        if staging.is_dir():
            lock = _lock(staging, wait=False)
            if lock is None:
                return []  # another command is writing: its write, not a leftover
        if (staging / JOURNAL).is_file():
            installed, every = _install(folder)
            done.append(f"finished a write to {folder} that was killed while installing its files: installed "
                        f"{', '.join(installed) or 'none left'} (the write: {', '.join(every)})")
        elif staging.is_dir():
            shutil.rmtree(staging)
            done.append(f"undid a write to {folder} that was killed before it completed: removed its staged files "
                        f"({staging}); the files there are those of the write before")
        for temp in sorted(folder.glob(LEGACY_TEMP_GLOB)):
            temp.unlink()
            done.append(f"removed {temp}: a temporary file an interrupted write left (it may hold encrypted secrets)")
    except (OSError, ValueError) as exc:
        raise StackConfigError(f"{staging}: an interrupted write cannot be recovered ({exc}); check the stack configs "
                               "with `blueprint plan --check`, then remove that folder") from None
    finally:
        if lock is not None:
            os.close(lock)
    return done


def write_all(folder: Path, files: list[tuple[Path, str]]) -> None:
    """Write each (path in `folder`, text) all or nothing (see the module docstring), after `recover`ing what an
    earlier interrupted write left.

    Raises:
        StackConfigError: the folder cannot be created or written (nothing was changed), or a file of another folder
            is given.
    """
    if any(path.parent != folder for path, _ in files):
        raise StackConfigError(f"{folder}: one write covers one folder (got {', '.join(str(p) for p, _ in files)})")
    if folder.is_dir():
        recover(folder)
    staging = folder / STAGING_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)  # a file where the folder should be: FileExistsError, not a writer
    except OSError as exc:
        raise StackConfigError(f"{folder}: cannot write stack configs ({exc.strerror}); nothing was changed") from None
    try:
        staging.mkdir(mode=0o700)
    except FileExistsError:
        raise StackConfigError(f"{staging}: another blueprint command is writing stack configs to {folder}; run this "
                               "one when it has finished") from None
    except OSError as exc:
        raise StackConfigError(f"{folder}: cannot write stack configs ({exc.strerror}); nothing was changed") from None
    lock = None
    try:
        lock = _lock(staging, wait=True)
        entries = []
        for i, (path, text) in enumerate(files):
            _write(staging / f"{i}.yaml", text.encode("utf-8"))
            entries.append((f"{i}.yaml", path.name))
        _write(staging / f"{JOURNAL}.tmp", json.dumps(entries).encode("utf-8"))
        os.replace(staging / f"{JOURNAL}.tmp", staging / JOURNAL)  # the commit point
        _fsync_dir(staging)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if lock is not None:
            os.close(lock)
        if isinstance(exc, OSError):
            raise StackConfigError(f"{folder}: cannot write stack configs ({exc.strerror}); nothing was "
                                   "changed") from None
        raise
    try:
        _install(folder)
    except OSError as exc:
        raise StackConfigError(f"{folder}: the stack configs were written but not all installed ({exc.strerror}); "
                               "the next `blueprint` command finishes installing them") from None
    finally:
        os.close(lock)
