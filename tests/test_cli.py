"""The `keras-attn` console script."""

import pytest

import keras_attn
import keras_attn.layers
from keras_attn.cli import main

pytestmark = pytest.mark.generation_neutral


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == keras_attn.__version__


def test_layers_lists_every_public_layer(capsys):
    assert main(["layers"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    public = [
        n
        for n in keras_attn.layers.__all__
        if isinstance(getattr(keras_attn.layers, n), type)
    ]
    assert listed == public
    assert "MultiHeadAttention" in listed


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage: keras-attn" in capsys.readouterr().out


def test_readme_layer_table_lists_every_public_layer():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("<!-- layers-table:start -->")[1].split(
        "<!-- layers-table:end"
    )[0]
    rows = set(re.findall(r"^\| `(\w+)` \|", table, flags=re.M))
    public = {
        n
        for n in keras_attn.layers.__all__
        if isinstance(getattr(keras_attn.layers, n), type)
    }
    assert rows == public


@pytest.mark.generation_neutral
@pytest.mark.parametrize(
    "name", ["predict_file", "inspect_export", "resolve_export", "TF_SERVING_TEXT_OPS"]
)
def test_library_functions_moved_to_serving_keep_the_old_path_one_release(name):
    import keras_attn.cli.serving as old
    import keras_attn.serving as new

    with pytest.warns(DeprecationWarning, match=f"keras_attn.serving.{name}"):
        assert getattr(old, name) is getattr(new, name)
    with pytest.raises(AttributeError):
        old.no_such_name  # noqa: B018
