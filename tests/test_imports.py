"""The package reads top-down: each part imports only the parts below it.

backend (with _validation, _deprecation, startup) -> layers; text; features;
distribute -> training -> models -> cluster, serving -> datasets -> cli. Layers and
text import nothing of each other. (An old spelling of a moved name resolves on
use, through `keras_attn._deprecation.moved`: tests/test_moved_names.py checks
those.) Checked twice: statically, every
`import` of a keras_attn module anywhere in the package (module level or inside a
function) against that order, and no function-local import of keras_attn outside the
command line (whose commands import TensorFlow only after `main` has imported it
quietly); and in a fresh process, importing the packages bottom-up, each import
loads nothing of a part above it, no tensorflow-text (its ops are needed only to
tokenize), and no heavy package beyond what TensorFlow and Keras themselves load
(Keras 3 imports matplotlib and scikit-learn when they are installed: that baseline
is measured, not assumed).
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "keras_attn"

#: The part of the package each module belongs to, by its longest dotted prefix.
PARTS = {
    "keras_attn": "base",
    "keras_attn.backend": "base",
    "keras_attn._validation": "base",
    "keras_attn._deprecation": "base",
    "keras_attn.precision": "base",
    "keras_attn.startup": "base",
    "keras_attn._ranking": "base",
    "keras_attn.losses": "base",
    "keras_attn.metrics": "base",
    "keras_attn.optimizers": "base",
    "keras_attn.text": "text",
    "keras_attn.layers": "layers",
    "keras_attn.features": "features",
    "keras_attn.distribute": "distribute",
    "keras_attn.training": "training",
    "keras_attn.models": "models",
    "keras_attn.cluster": "cluster",
    "keras_attn.serving": "serving",
    "keras_attn.datasets": "datasets",
    "keras_attn.cli": "cli",
}
_BELOW_MODELS = {"base", "text", "layers", "features", "distribute", "training"}
#: What each part may import (besides itself).
MAY_IMPORT = {
    "base": set(),
    "text": {"base"},
    "layers": {"base"},
    "features": {"base"},
    "distribute": {"base"},
    "training": {"base", "distribute"},
    "models": _BELOW_MODELS,
    "cluster": _BELOW_MODELS | {"models"},
    "serving": _BELOW_MODELS | {"models"},
    "datasets": _BELOW_MODELS | {"models", "serving"},
    "cli": set(PARTS.values()),
}
#: Bottom-up: importing each of these may load only parts at or below it.
ORDER = [
    ("keras_attn.layers", {"base", "layers"}),
    ("keras_attn.text", {"base", "layers", "text"}),
    ("keras_attn.features", {"base", "text", "layers", "features"}),
    (
        "keras_attn.training",
        {"base", "text", "layers", "features", "distribute", "training"},
    ),
    ("keras_attn.models.ctr", _BELOW_MODELS | {"models"}),
    ("keras_attn.models", _BELOW_MODELS | {"models"}),
    ("keras_attn.serving", _BELOW_MODELS | {"models", "serving"}),
    ("keras_attn.datasets", _BELOW_MODELS | {"models", "serving", "datasets"}),
    (
        "keras_attn.cluster",
        _BELOW_MODELS | {"models", "serving", "datasets", "cluster"},
    ),
    ("keras_attn.cli", set(PARTS.values())),
]
HEAVY = ("tensorflow_text", "tensorflow_recommenders", "sklearn", "matplotlib")


def part_of(module: str) -> str:
    parts = module.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in PARTS:
            return PARTS[prefix]
    raise KeyError(module)


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree):
    """`(target module, line, inside a function)` of every keras_attn import."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            )
            if isinstance(child, ast.Import):
                found.extend(
                    (a.name, child.lineno, inside)
                    for a in child.names
                    if a.name.split(".")[0] == "keras_attn"
                )
            elif isinstance(child, ast.ImportFrom):
                module = child.module or ""
                assert child.level == 0, f"relative import at line {child.lineno}"
                if module == "keras_attn":  # from keras_attn import distribute
                    found.extend(
                        (f"keras_attn.{a.name}", child.lineno, inside)
                        for a in child.names
                        if a.name != "__version__"
                    )
                elif module.split(".")[0] == "keras_attn":
                    found.append((module, child.lineno, inside))
            visit(child, inside)

    visit(tree, False)
    return found


def _edges():
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(), filename=str(path))
        edges += [(module, *item) for item in _imports(tree)]
    return edges


def test_every_import_points_down():
    edges = _edges()
    assert len(edges) > 100  # the walk saw the package
    upward = [
        f"{module}:{line} imports {target}"
        for module, target, line, _ in edges
        if part_of(target) != part_of(module)
        and part_of(target) not in MAY_IMPORT[part_of(module)]
    ]
    assert not upward, "imports against the order:\n" + "\n".join(upward)


def test_no_function_local_import_of_the_package_outside_the_cli():
    local = [
        f"{module}:{line} imports {target}"
        for module, target, line, inside in _edges()
        if inside and part_of(module) != "cli"
    ]
    assert not local, "imports inside functions:\n" + "\n".join(local)


def test_the_checks_see_an_upward_import():
    # The walk finds imports inside functions, and the rule rejects text -> models.
    tree = ast.parse("def f():\n    from keras_attn.models import build_bert\n")
    assert _imports(tree) == [("keras_attn.models", 2, True)]
    assert part_of("keras_attn.models") not in MAY_IMPORT[part_of("keras_attn.text")]
    assert part_of("keras_attn.text") not in MAY_IMPORT[part_of("keras_attn.layers")]


PROBE = """
import json, sys
heavy = {heavy}
def loaded():
    return sorted(m for m in heavy if m in sys.modules)
import keras_attn.backend  # TensorFlow and Keras: the baseline
report = {{"baseline": loaded()}}
for module in {modules}:
    __import__(module)
    ours = sorted(m for m in sys.modules if m.split(".")[0] == "keras_attn")
    report[module] = {{"heavy": loaded(), "ours": ours}}
print(json.dumps(report))
"""


@pytest.mark.slow
def test_importing_bottom_up_loads_nothing_from_above():
    modules = [module for module, _ in ORDER]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY, modules=modules)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    baseline = set(report.pop("baseline"))
    assert "tensorflow_text" not in baseline
    for module, allowed in ORDER:
        got = report[module]
        above = [m for m in got["ours"] if part_of(m) not in allowed]
        assert not above, f"importing {module} loaded {above}"
        extra = sorted(set(got["heavy"]) - baseline)
        assert not extra, f"importing {module} loaded {extra}"
    # The chain reached the top: the CTR model and the CLI were imported.
    assert "keras_attn.models.ctr" in report["keras_attn.cli"]["ours"]


def test_building_a_tokenizer_loads_tensorflow_text():
    from keras_attn.text import Tokenizer

    Tokenizer("bert-base-uncased", sequence_length=8)
    assert "tensorflow_text" in sys.modules
