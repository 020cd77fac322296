"""What the README names is importable from where it says."""

import importlib
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.generation_neutral

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()

# The public packages; `__all__` of each is its API.
PACKAGES = (
    "keras_attn.layers",
    "keras_attn.losses",
    "keras_attn.metrics",
    "keras_attn.features",
    "keras_attn.models",
    "keras_attn.text",
    "keras_attn.optimizers",
    "keras_attn.serving",
    "keras_attn.datasets",
    "keras_attn.distribute",
    "keras_attn.cluster",
    "keras_attn.startup",
)
# Functions of the library are named for what they do; other backticked snake_case
# words in the README are arguments, dtype policies or paths.
FUNCTION_PREFIXES = (
    "build_",
    "compile_",
    "encode_",
    "export",
    "fit_",
    "gate_",
    "get_",
    "han_",
    "infer_",
    "load_",
    "make_",
    "most_",
    "parse_",
    "read_",
    "rest_",
    "grpc_",
    "split_",
    "to_",
)


def _public_names():
    names = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            names.setdefault(name, []).append(package)
    return names


def _readme_functions():
    # `name` or `name(...)`: a word of lowercase letters and underscores.
    words = re.findall(r"`([a-z][a-z0-9_]*)(?:\([^`]*\))?`", README)
    return sorted({w for w in words if "_" in w and w.startswith(FUNCTION_PREFIXES)})


def test_every_function_the_readme_names_is_public():
    names = _public_names()
    functions = _readme_functions()
    assert "build_aoa_reader" in functions and "fit_ctr_model" in functions
    missing = [f for f in functions if f not in names]
    assert not missing, f"named in README.md, in no package's __all__: {missing}"
    # Builders live in keras_attn.models, as the README's layout says.
    misplaced = [
        f
        for f in functions
        if f.startswith("build_")
        and f not in importlib.import_module("keras_attn.models").__all__
    ]
    assert not misplaced, f"builders outside keras_attn.models: {misplaced}"


def test_every_dotted_name_in_the_readme_resolves():
    dotted = sorted(set(re.findall(r"`(keras_attn(?:\.[A-Za-z_]\w*)+)`", README)))
    assert "keras_attn.backend.KERAS_3" in dotted
    for name in dotted:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr)  # AttributeError names what is missing
            break


def test_every_readme_import_line_runs():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    imports = [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if re.match(r"\s*from keras_attn[\w.]* import ", line)
    ]
    assert imports
    for line in imports:
        exec(line, {})  # noqa: S102 - the README's own import lines
