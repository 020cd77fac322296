"""Every docstring example in the package runs and prints what it says.

The examples are collected from each module with `doctest` and run in that module's
namespace, under whichever Keras generation the suite runs (`python -m tests` runs
both). A failing example fails here with the module and the example's line.
"""

import doctest
import importlib
import pkgutil

import pytest

import keras_attn

# Modules whose import needs what CI lacks are none today; the command-line modules
# have no examples (argparse), but are collected all the same.
MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(keras_attn.__path__, prefix="keras_attn.")
)


def _examples(module_name):
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    # Only what the module defines, not what it imports.
    return [
        test
        for test in finder.find(module, module_name)
        if test.examples
        and (getattr(test, "lineno", None) is not None or test.name == module_name)
    ]


def test_the_package_has_examples():
    assert sum(len(_examples(m)) for m in MODULES) >= 40


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name):
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    for test in _examples(module_name):
        runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, f"{failed} of {attempted} examples in {module_name} failed"
