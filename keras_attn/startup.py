"""TensorFlow's start-up without its native libraries' notices on stderr.

Importing TensorFlow 2.21 prints lines such as `oneDNN custom operations are on`,
`Could not find cuda drivers` and `failed call to cuInit` from C++ before its logging
is initialised, so `TF_CPP_MIN_LOG_LEVEL` does not hold them back; in a Jupyter
notebook they land in the cell's output. `import_tensorflow` imports TensorFlow and
initialises its devices with the process's stderr file descriptor pointed at
`/dev/null`, then restores it, and sets `TF_CPP_MIN_LOG_LEVEL=2` (unless it is set)
for what TensorFlow logs later. Python's own warnings and errors are not affected:
an exception raised by the import propagates after stderr is restored.

This module imports nothing heavy itself; it is what the command line and the
notebooks call before anything else imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import os
import sys

__all__ = ["import_tensorflow", "quiet_stderr"]


@contextlib.contextmanager
def quiet_stderr():
    """Points file descriptor 2 at `/dev/null` for the `with` block.

    What native code writes to stderr in the block is dropped; Python's
    `sys.stderr` is flushed before and after so its order is kept.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(devnull)
        os.close(saved)


def import_tensorflow(quiet: bool | None = None):
    """Imports TensorFlow and initialises its devices, quietly by default.

    Args:
        quiet: bool or None. Drop the native start-up lines. None (the default)
            means: quiet unless the user set `TF_CPP_MIN_LOG_LEVEL` themselves, in
            which case TensorFlow's own setting rules.

    Returns:
        The `tensorflow` module.

    Example:

    >>> tf = import_tensorflow()
    >>> int(tf.constant(2) + 1)
    3
    """
    if quiet is None:
        quiet = "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    if not quiet:
        import tensorflow as tf

        return tf
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with quiet_stderr():
        import tensorflow as tf

        # Device discovery (cuInit and its error on a machine without a GPU)
        # happens on first use, not on import: do it here too.
        tf.config.list_logical_devices()
    return tf
