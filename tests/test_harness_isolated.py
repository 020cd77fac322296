"""The harness's isolated interpreter: scripts run as `python -c` would run them."""

import json
import os

import pytest

from tests.harness import run_isolated

pytestmark = pytest.mark.generation_neutral

_REPORT = r"""
import json, os, sys
print(json.dumps({
    "argv": sys.argv[1:],
    "cwd": os.getcwd(),
    "pid": os.getpid(),
    "keras_attn": any(m.split(".")[0] == "keras_attn" for m in sys.modules),
    "pythonpath": os.environ.get("PYTHONPATH"),
}))
"""


def _report(script, *args, cwd, **kwargs):
    return json.loads(run_isolated(script, *args, cwd=cwd, **kwargs).stdout)


def test_script_gets_its_arguments_folder_and_no_checkout(tmp_path):
    report = _report(_REPORT, "a", 2, cwd=tmp_path)
    assert report["argv"] == ["a", "2"]
    assert os.path.samefile(report["cwd"], tmp_path)
    assert report["pid"] != os.getpid()
    assert report["keras_attn"] is False
    assert report["pythonpath"] is None


def test_failures_fail_the_test_and_the_next_script_still_runs(tmp_path):
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        run_isolated("print('before'); 1 / 0", cwd=tmp_path)
    with pytest.raises(AssertionError, match="isolated process failed"):
        run_isolated("import sys; sys.exit(3)", cwd=tmp_path)
    # Each script has its own globals: a name from an earlier script is not there.
    run_isolated("leftover = 1", cwd=tmp_path)
    with pytest.raises(AssertionError, match="NameError"):
        run_isolated("leftover", cwd=tmp_path)
    assert _report(_REPORT, cwd=tmp_path)["argv"] == []


def test_tensorflow_text_scripts_and_fresh_runs_get_other_processes(tmp_path):
    plain = _report(_REPORT, cwd=tmp_path)["pid"]
    assert _report(_REPORT, cwd=tmp_path)["pid"] == plain  # the same child again
    text = _report("import tensorflow_text\n" + _REPORT, cwd=tmp_path)["pid"]
    fresh = _report(_REPORT, cwd=tmp_path, fresh=True)["pid"]
    assert len({plain, text, fresh}) == 3


def test_a_child_that_imported_tensorflow_text_unasked_is_not_used_again(tmp_path):
    before = _report(_REPORT, cwd=tmp_path)["pid"]
    # Not a top-level `import tensorflow_text` line: it runs in the TF-only child.
    sneaky = "if True:\n    import tensorflow_text\n" + _REPORT
    assert _report(sneaky, cwd=tmp_path)["pid"] == before
    after = _report(
        _REPORT + "import sys\nassert 'tensorflow_text' not in sys.modules",
        cwd=tmp_path,
    )
    assert after["pid"] != before


def test_an_interrupted_request_never_answers_the_next_one(tmp_path, monkeypatch):
    import select

    from tests import harness

    first = _report(_REPORT, "first", cwd=tmp_path)["pid"]

    def interrupted(*args):  # what pytest-timeout's alarm does mid-wait
        raise KeyboardInterrupt

    monkeypatch.setattr(select, "select", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_isolated("import time; time.sleep(2); print('late')", cwd=tmp_path)
    monkeypatch.undo()
    assert harness._INTERPRETERS[False].process.poll() is not None  # killed
    after = _report(_REPORT, "second", cwd=tmp_path)
    assert after["argv"] == ["second"] and after["pid"] != first


def test_a_hang_fails_with_the_time_bound(tmp_path):
    with pytest.raises(AssertionError, match="no answer within 1 s"):
        run_isolated("import time; time.sleep(30)", cwd=tmp_path, timeout=1)
    assert json.loads(run_isolated(_REPORT, cwd=tmp_path).stdout)["argv"] == []
