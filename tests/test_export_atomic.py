"""Exports appear complete or not at all, under concurrency and crashes (issue 28,
finding 5): two exports at once get two versions, `overwrite=True` keeps the old
version until the new one is in, a killed export's temporary folder is removed by
the next one, and `inspect` says an incomplete version is not loadable."""

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import keras_attn._publish as publish
from keras_attn.backend import keras, tf
from keras_attn.cli import main
from keras_attn.serving import check_export_target, export, inspect_export

# The module (keras_attn.serving's `export` attribute is the function).
export_module = sys.modules["keras_attn.serving.export"]


def _model(scale):
    x = keras.Input(shape=(), dtype="float32", name="x")
    y = keras.layers.Reshape((1,))(x)
    dense = keras.layers.Dense(1, name="y", kernel_initializer="ones")
    model = keras.Model({"x": x}, {"y": dense(y)})
    dense.set_weights([np.full((1, 1), scale, "float32"), np.zeros(1, "float32")])
    return model


def _served(path, value=1.0):
    fn = tf.saved_model.load(str(path)).signatures["serving_default"]
    return float(fn(x=tf.constant([value]))["y"].numpy()[0, 0])


def test_two_exports_at_once_get_two_versions(tmp_path, monkeypatch):
    base = tmp_path / "m"
    # Both exports are past their start (version chosen, if chosen early) before
    # either moves its folder in.
    barrier = threading.Barrier(2, timeout=120)
    write = export_module.features_to_json

    def wait_then_write(features):
        barrier.wait()
        return write(features)

    monkeypatch.setattr(export_module, "features_to_json", wait_then_write)
    paths, errors = {}, []

    def run(scale):
        try:
            paths[scale] = export(_model(scale), base, features=[])
        except Exception as error:  # noqa: BLE001  (reported below)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(s,)) for s in (2.0, 3.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert sorted(p.name for p in paths.values()) == ["1", "2"]
    for scale, path in paths.items():
        assert _served(path) == scale  # each version holds its own model
    assert [p.name for p in base.iterdir() if p.name.startswith(".")] == []


def test_overwrite_keeps_the_old_version_until_the_new_one_is_in(tmp_path, monkeypatch):
    base = tmp_path / "m"
    old = export(_model(2.0), base, version=1)
    rename = os.rename

    def crash_at_the_move(source, target):
        if Path(target) == old:
            raise OSError("killed while moving the new version in")
        return rename(source, target)

    # A crash at the last step of a rename-based move (Path.rename is os.rename).
    monkeypatch.setattr(os, "rename", crash_at_the_move)
    try:
        export(_model(3.0), base, version=1, overwrite=True)
    except OSError:
        pass
    # Version 1 is one model, whole: the old one, or the new one swapped in.
    assert publish.version_problem(old) is None
    assert _served(old) in (2.0, 3.0)


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "fallback"])
def test_overwrite_swaps_the_version_in_whole(tmp_path, monkeypatch, exchange):
    base = tmp_path / "m"
    export(_model(2.0), base, version=1)
    if not exchange:  # a system without renameat2: aside, then in
        monkeypatch.setattr(publish, "_renameat2", lambda *args: False)
    path = export(_model(3.0), base, version=1, overwrite=True)
    assert path == base / "1" and _served(path) == 3.0
    assert sorted(p.name for p in base.iterdir()) == ["1"]


@pytest.mark.generation_neutral
def test_fallback_puts_the_old_version_back_when_the_move_in_fails(
    tmp_path, monkeypatch
):
    base = tmp_path / "m"
    (base / "1" / "variables").mkdir(parents=True)
    (base / "1" / "saved_model.pb").write_text("old")
    (base / "1" / "variables" / "variables.index").write_text("old")
    new = base / ".new"
    new.mkdir()
    (new / "saved_model.pb").write_text("new")
    monkeypatch.setattr(publish, "_renameat2", lambda *args: False)

    def fail(*args, **kwargs):
        raise FileExistsError("taken")

    monkeypatch.setattr(publish, "_rename_noreplace", fail)
    with pytest.raises(FileExistsError):
        publish._exchange(new, base / "1", base / ".aside")
    assert (base / "1" / "saved_model.pb").read_text() == "old"


@pytest.mark.generation_neutral
def test_a_killed_exports_temporary_folder_is_removed_by_the_next(tmp_path):
    base = tmp_path / "m"
    # A process that dies in the middle of its export (after creating its folder).
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from keras_attn._publish import new_temp_folder\n"
        "folder = new_temp_folder(Path(sys.argv[1]))\n"
        "(folder / 'model').mkdir()\n"
        "os._exit(9)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-c", code, str(base)], env=env, timeout=120)
    assert proc.returncode == 9
    (left,) = list(base.iterdir())
    assert left.name.startswith(publish.TEMP_PREFIX)
    # One of this process, alive: kept.
    alive = base / f"{publish.TEMP_PREFIX}{socket.gethostname()}-{os.getpid()}-x"
    alive.mkdir()
    assert publish.remove_stale_temp_folders(base) == [left]
    assert sorted(base.iterdir()) == [alive]


def test_export_removes_stale_temporary_folders(tmp_path):
    base = tmp_path / "m"
    dead = base / f"{publish.TEMP_PREFIX}{socket.gethostname()}-999999999-abc"
    (dead / "model").mkdir(parents=True)
    export(_model(2.0), base)
    assert sorted(p.name for p in base.iterdir()) == ["1"]


def test_inspect_says_an_incomplete_version_is_not_loadable(tmp_path, capsys):
    base = tmp_path / "m"
    export(_model(2.0), base, version=1)
    (base / "2" / "variables").mkdir(parents=True)  # what a killed copy leaves
    with pytest.raises(ValueError, match=r"'.*2' is not loadable: it is incomplete"):
        inspect_export(base)
    assert main(["inspect", str(base / "2")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "is not loadable: it is incomplete (no saved_model.pb" in err
    assert inspect_export(base / "1")["export"] == str(base / "1")


@pytest.mark.generation_neutral
def test_check_export_target_names_what_is_wrong(tmp_path):
    base = tmp_path / "m"
    assert check_export_target(base) == base / "1"
    (base / "3").mkdir(parents=True)
    assert check_export_target(base) == base / "4"
    with pytest.raises(ValueError, match=r"'.*3' already exists"):
        check_export_target(base, 3)
    assert check_export_target(base, 3, overwrite=True) == base / "3"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        check_export_target(tmp_path / "file")
    with pytest.raises(ValueError, match="`version` must be a non-negative integer"):
        check_export_target(base, -1)
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(ValueError, match="cannot be written"):
            check_export_target(locked / "m")


@pytest.mark.generation_neutral
def test_a_given_export_folder_is_written_whole_or_not_at_all(tmp_path):
    # export_seq2seq and export_retrieval_index write one given folder this way.
    target = tmp_path / "index" / "1"
    with pytest.raises(RuntimeError):
        with publish.written_whole(target) as folder:
            folder.mkdir()
            (folder / "saved_model.pb").write_text("half")
            raise RuntimeError("killed while saving")
    assert not target.exists()
    assert list(target.parent.iterdir()) == []  # no temporary folder left
    with publish.written_whole(target) as folder:
        folder.mkdir()
        (folder / "saved_model.pb").write_text("whole")
    with pytest.raises(ValueError, match="already exists"):
        with publish.written_whole(target):
            pass
    assert (target / "saved_model.pb").read_text() == "whole"
