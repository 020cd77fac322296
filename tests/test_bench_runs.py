"""benchmarks/_ctr_runs.py: the one runner of a benchmark's fresh interpreters, the
throughput of an `EpochTimer`'s epochs and the wall-time ratios seed by seed."""

import pytest

from benchmarks._ctr_runs import (
    ROOT,
    examples_per_s,
    run_json,
    seed_ratios,
    wall_ratios,
)

pytestmark = pytest.mark.generation_neutral

PROBE = (
    "import json, os, sys; print('noise'); print(json.dumps([os.environ.get("
    "'TF_USE_LEGACY_KERAS'), os.environ.get('PYTHONPATH'), os.getcwd(), sys.argv[1:]]))"
)


def test_run_json_sets_the_generation_and_the_path(monkeypatch, tmp_path):
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    legacy, path, cwd, argv = run_json(["-c", PROBE, "a", 1], legacy=True)
    assert (legacy, path, argv) == ("1", str(ROOT), ["a", "1"])
    assert cwd != str(tmp_path)  # a fresh temporary folder
    assert run_json(["-c", PROBE], legacy=False)[0] is None
    assert run_json(["-c", PROBE], legacy=None)[0] == "1"  # this process' setting
    _, path, cwd, _ = run_json(["-c", PROBE], pythonpath=False, cwd=tmp_path)
    assert path is None and cwd == str(tmp_path)


def test_run_json_failures():
    assert run_json(["-c", "import not_a_module_29"], missing="not_a_module_29") is None
    with pytest.raises(RuntimeError, match=r"(?s)Benchmark run failed:.*boom"):
        run_json(["-c", "import sys; sys.exit('boom')"])


def test_throughput_leaves_the_first_epoch_out():
    assert examples_per_s([5.0, 1.0, 3.0], 100) == pytest.approx(50.0)
    assert examples_per_s([2.0], 100) == pytest.approx(50.0)


def test_wall_ratios_pair_runs_by_seed():
    base = [{"seed": 0, "wall_s": 10.0}, {"seed": 1, "wall_s": 20.0}]
    base.append({"seed": 1, "wall_s": 40.0})  # two baseline runs of seed 1: their mean
    runs = [{"seed": 1, "wall_s": 15.0}, {"seed": 0, "wall_s": 5.0}]
    runs.append({"seed": 2, "wall_s": 1.0})  # no baseline run of its seed
    assert seed_ratios(runs, base) == pytest.approx([0.5, 0.5])
    text = wall_ratios({"base": base, "ours": runs}, "base")
    assert text.endswith("ours: 0.50, 0.50 (mean 0.50).")
    assert wall_ratios({"ours": runs}, "base") == ""
