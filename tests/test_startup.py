"""keras_attn.startup: TensorFlow's native start-up lines kept off stderr."""

import os
import subprocess
import sys

import pytest

from keras_attn.startup import quiet_stderr

PROBE = """
import sys
from keras_attn.startup import import_tensorflow
tf = import_tensorflow({quiet})
tf.constant(1.0) + 1.0
print("python stderr line", file=sys.stderr)
print("ok")
"""
NATIVE = ("oneDNN custom operations", "cuda drivers", "absl::InitializeLog")


def _run(quiet, env_level=None):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if env_level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = env_level
    return subprocess.run(
        [sys.executable, "-c", PROBE.format(quiet=quiet)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )


@pytest.mark.generation_neutral
@pytest.mark.slow
def test_start_up_lines_are_dropped_and_python_stderr_kept():
    quiet = _run("None")
    assert quiet.stdout.strip() == "ok"
    assert not [n for n in NATIVE if n in quiet.stderr], quiet.stderr
    assert "python stderr line" in quiet.stderr
    # The same import, loud: the lines this module exists for are really printed
    # here, so the quiet run's silence means something.
    loud = _run("False", env_level="0")
    assert any(n in loud.stderr for n in NATIVE), loud.stderr


@pytest.mark.generation_neutral
def test_quiet_stderr_restores_the_descriptor_after_an_error(capfd):
    with pytest.raises(RuntimeError, match="inside"):
        with quiet_stderr():
            os.write(2, b"dropped\n")
            raise RuntimeError("raised inside")
    os.write(2, b"kept\n")
    err = capfd.readouterr().err
    assert "kept" in err and "dropped" not in err


@pytest.mark.slow
def test_the_command_line_prints_no_start_up_lines():
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run(
        [sys.executable, "-m", "keras_attn.cli", "layers"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert "MultiHeadAttention" in proc.stdout
    assert not [n for n in NATIVE if n in proc.stderr], proc.stderr
