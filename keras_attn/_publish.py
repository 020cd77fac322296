"""Placing a version folder where TF Serving polls: complete, or not at all.

(Plain file-system work, below every part of the package: `keras_attn.serving`'s
`export` and the exports of `keras_attn.models` use it.)

An export is written beside its target, in a hidden temporary folder of the base
folder (the same file system), and moved in by one rename that fails, rather than
replaces, when the target exists: two exports never write into one version, an
automatic version that another export took moves on to the next number, and TF
Serving never sees a half-written version. `overwrite=True` swaps the new version
with the old one in one step (Linux `renameat2(RENAME_EXCHANGE)`; elsewhere the old
version is moved aside first and back if the move in fails), and only then removes
the old one. A killed export leaves its temporary folder: the next export in the
base folder removes the ones whose process is gone.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from keras_attn._validation import check_folder, check_int

__all__ = [
    "TEMP_PREFIX",
    "check_export_target",
    "latest_version",
    "new_temp_folder",
    "place_folder",
    "place_version",
    "remove_stale_temp_folders",
    "version_problem",
    "written_whole",
]

#: Hidden folders of exports in progress: `.keras_attn-tmp-<host>-<pid>-<random>`.
TEMP_PREFIX = ".keras_attn-tmp-"
#: Temporary folders older than this are removed whoever made them (another host
#: of a shared file system, whose processes cannot be asked).
STALE_SECONDS = 24 * 3600

_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2
_AT_FDCWD = -100


def latest_version(base_dir: str | Path) -> int | None:
    """The highest numbered version folder under `base_dir`, or None."""
    base = Path(base_dir)
    if not base.is_dir():
        return None
    versions = [int(p.name) for p in base.iterdir() if p.is_dir() and p.name.isdigit()]
    return max(versions) if versions else None


def version_problem(path: str | Path) -> str | None:
    """Why a version folder is not a loadable SavedModel (None when it is)."""
    path = Path(path)
    if not path.is_dir():
        return "it does not exist"
    missing = [
        name
        for name in ("saved_model.pb", "variables/variables.index")
        if not (path / name).is_file()
    ]
    if missing:
        return f"it is incomplete (no {' and no '.join(missing)})"
    return None


def _renameat2(source: Path, target: Path, flags: int) -> bool:
    """Linux's renameat2; False where the system or the file system lacks it."""
    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    except (OSError, TypeError):  # no C library to ask (Windows)
        return False
    if function is None:
        return False
    result = function(
        _AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flags
    )
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(target))


def _rename_noreplace(source: Path, target: Path) -> None:
    """Moves `source` to `target`; FileExistsError when `target` exists."""
    try:
        if _renameat2(source, target, _RENAME_NOREPLACE):
            return
    except OSError as error:
        if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise FileExistsError(errno.EEXIST, "exists", str(target)) from None
        raise
    # Without renameat2: a directory does not replace a non-empty one (the check
    # before it covers an empty one).
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, "exists", str(target))
    try:
        os.rename(source, target)
    except OSError as error:
        if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise FileExistsError(errno.EEXIST, "exists", str(target)) from None
        raise


def _exchange(new: Path, target: Path, aside: Path) -> None:
    """Puts `new` at `target` and the old `target` at `aside`, never leaving
    `target` empty where the system can swap them in one step."""
    if _renameat2(new, target, _RENAME_EXCHANGE):
        new.rename(aside)  # `new` now holds the old version
        return
    target.rename(aside)
    try:
        _rename_noreplace(new, target)
    except BaseException:
        aside.rename(target)  # the old version back
        raise


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
        return False
    return False


def remove_stale_temp_folders(base: Path) -> list[Path]:
    """Removes the temporary folders of exports that died in `base`: made on this
    host by a process that is gone, or older than `STALE_SECONDS`. Returns them."""
    removed = []
    if not base.is_dir():
        return removed
    host = socket.gethostname()
    for entry in base.iterdir():
        if not entry.name.startswith(TEMP_PREFIX) or not entry.is_dir():
            continue
        owner = entry.name[len(TEMP_PREFIX) :].rsplit("-", 2)
        try:
            age = time.time() - entry.stat().st_mtime
        except FileNotFoundError:
            continue  # its export just finished
        mine = len(owner) == 3 and owner[0] == host and owner[1].isdigit()
        if (mine and _process_gone(int(owner[1]))) or age > STALE_SECONDS:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def new_temp_folder(base: Path) -> Path:
    """A hidden temporary folder in `base` (created, with its parents), after the
    stale ones are removed."""
    base.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_folders(base)
    prefix = f"{TEMP_PREFIX}{socket.gethostname()}-{os.getpid()}-"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def check_export_target(
    base_dir: str | Path, version: int | None = None, overwrite: bool = False
) -> Path:
    """Checks, before a long fit, that an export to `base_dir` can succeed.

    The version must be free (unless `overwrite`), `base_dir` must be a folder (or
    creatable) that this process can write in. Returns the version folder the
    export would write (for an automatic version, the next number now).

    Raises:
        ValueError: naming the folder and what is wrong with it.
    """
    base = Path(base_dir)
    check_int("version", version, minimum=0, allow_none=True)
    if base.exists() and not base.is_dir():
        raise ValueError(
            f"The export folder {str(base)!r} is a file: give a folder (the model's "
            "base folder, versions go inside it)"
        )
    if version is None:
        version = (latest_version(base) or 0) + 1
    target = base / str(version)
    if target.exists() and not overwrite:
        raise ValueError(
            f"Version folder {str(target)!r} already exists: pass `overwrite=True` "
            "(--overwrite) or another `version` (--version), or leave the version "
            "out for the next free one"
        )
    existing = check_folder("base_dir", base)  # no file at it or above it
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(
            f"The export folder {str(base)!r} cannot be written: no write permission "
            f"in {str(existing)!r}"
        )
    return target


def place_folder(source: Path, target: Path, overwrite: bool = False) -> Path:
    """Moves the complete folder `source` to `target` in one rename (swapped with an
    existing `target` when `overwrite`, which is removed with `source`'s temporary
    folder)."""
    try:
        _rename_noreplace(source, target)
        return target
    except FileExistsError:
        if not overwrite:
            raise ValueError(
                f"Version folder {str(target)!r} already exists (perhaps written by "
                "another export while this one was saving): pass `overwrite=True` "
                "or another path"
            ) from None
    _exchange(source, target, source.parent / "replaced")
    return target


def place_version(
    model_dir: Path, base: Path, version: int | None, overwrite: bool
) -> Path:
    """Moves the complete SavedModel folder `model_dir` (inside `base`) to
    `base/<version>` in one rename; an automatic version (None) takes the next
    free number. Returns the version folder."""
    if version is not None:
        return place_folder(model_dir, base / str(version), overwrite)
    while True:
        target = base / str((latest_version(base) or 0) + 1)
        try:
            _rename_noreplace(model_dir, target)
            return target
        except FileExistsError:
            continue  # another export took that number: the next one


@contextmanager
def written_whole(target: str | Path, overwrite: bool = False):
    """A path to write a SavedModel folder at (not made yet: `tf.saved_model.save`
    makes it), moved to `target` whole at the end.

    For the exports that write one given folder (`export_seq2seq`,
    `export_retrieval_index`): an existing `target` is an error before anything is
    written (unless `overwrite`), and `target` never holds half a model.

    Example:

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> with written_whole(root / "1") as folder:
    ...     folder.mkdir()
    ...     _ = (folder / "saved_model.pb").write_text("...")
    >>> sorted(p.name for p in root.iterdir()), (root / "1" / "saved_model.pb").exists()
    (['1'], True)
    """
    target = Path(target)
    if target.exists() and not overwrite:
        raise ValueError(
            f"The export folder {str(target)!r} already exists: remove it, write to "
            "another folder, or pass `overwrite=True`"
        )
    tmp = new_temp_folder(target.parent)
    try:
        yield tmp / "model"
        place_folder(tmp / "model", target, overwrite)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
