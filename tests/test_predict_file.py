"""`keras-attn predict` never destroys data (issue 28, finding 4): kept columns are
never written over, the input is never the output, and the output appears whole
(a temporary file renamed at the end) or not at all."""

import os
import stat

import numpy as np
import pandas as pd
import pytest

from keras_attn.cli import main
from keras_attn.features import infer_features
from keras_attn.models import Task, build_ctr_model
from keras_attn.serving import export, predict_file


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """An (untrained) CTR export whose task is named after its label column, as
    the command line names them, and a file of rows with that label."""
    tmp = tmp_path_factory.mktemp("predict")
    rng = np.random.default_rng(0)
    n = 40
    df = pd.DataFrame(
        {
            "id": [f"r{i}" for i in range(n)],
            "city": rng.choice(["a", "b"], n),
            "age": rng.normal(40, 10, n).round(1),
            "income": rng.integers(0, 2, n),
        }
    )
    specs = infer_features(df, labels=["income"], exclude=["id"])
    model = build_ctr_model(specs, [Task("income")], num_experts=2, embedding_dim=2)
    path = export(model, tmp / "exp", features=specs)
    data = tmp / "rows.csv"
    df.to_csv(data, index=False)
    return {"tmp": tmp, "path": path, "data": data, "df": df}


def _predict(exported, output, *extra):
    args = ["predict", "--model", str(exported["path"]), "--data"]
    args += [str(exported["data"]), "--output", str(output), "--quiet"]
    return main(args + list(extra))


def test_a_kept_column_is_never_written_over(exported, capsys):
    output = exported["tmp"] / "kept.csv"
    output.write_text("precious\n")
    assert _predict(exported, output, "--keep", "id", "income") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "`keep` columns ['income'] have the names of the export's outputs" in err
    assert output.read_text() == "precious\n"  # nothing written
    assert _predict(exported, output, "--keep", "id", "income", "--prefix", "p_") == 0
    got = pd.read_csv(output)
    assert list(got.columns) == ["id", "income", "p_income"]
    assert got["income"].tolist() == exported["df"]["income"].tolist()  # the truth
    assert got["p_income"].between(0, 1).all()


def test_the_input_is_never_the_output(exported, capsys):
    before = exported["data"].read_bytes()
    assert _predict(exported, exported["data"]) == 2
    assert "`output` must not be the input file" in capsys.readouterr().err
    assert exported["data"].read_bytes() == before
    # Another spelling of the same path.
    same = exported["tmp"] / "." / exported["data"].name
    with pytest.raises(ValueError, match="must not be the input file"):
        predict_file(exported["path"], exported["data"], output=same, progress=False)
    assert exported["data"].read_bytes() == before


def test_a_failed_predict_leaves_the_old_output_whole(exported, capsys):
    output = exported["tmp"] / "old.jsonl"
    output.write_text('{"old": 1}\n')
    bad = exported["tmp"] / "bad.csv"
    rows = exported["df"].astype({"age": object})
    rows.loc[30, "age"] = "old"  # after the first batch of 8 is written
    rows.to_csv(bad, index=False)
    args = ["predict", "--model", str(exported["path"]), "--data", str(bad)]
    args += ["--output", str(output), "--batch-size", "8", "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "bad.csv', line 32, column 'age'" in err
    assert output.read_text() == '{"old": 1}\n'
    assert sorted(p.name for p in output.parent.glob(".old.jsonl*")) == []


def test_an_output_folder_that_does_not_exist_fails_before_reading(exported):
    with pytest.raises(ValueError, match="must be in an existing folder"):
        predict_file(
            exported["path"],
            exported["data"],
            output=exported["tmp"] / "no" / "out.csv",
            progress=False,
        )


def test_the_output_gets_the_mode_of_a_file_the_user_writes(exported):
    # The temporary file is private (0600); a server or a colleague reading the
    # predictions must not lose access because they were written whole.
    umask = os.umask(0o022)
    try:
        new = exported["tmp"] / "new.jsonl"
        predict_file(exported["path"], exported["data"], output=new, progress=False)
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
        new.chmod(0o640)
        predict_file(exported["path"], exported["data"], output=new, progress=False)
        assert stat.S_IMODE(new.stat().st_mode) == 0o640  # an old output's mode
    finally:
        os.umask(umask)


def test_an_export_without_feature_specs_reads_numbers_from_a_csv(tmp_path):
    # The reader gives text; a float or int input took "1.5" as a str and failed.
    from keras_attn.backend import keras

    x = keras.Input(shape=(), dtype="float32", name="x")
    k = keras.Input(shape=(), dtype="int64", name="k")
    s = keras.Input(shape=(), dtype="string", name="s")
    outputs = {
        "out_x": keras.layers.Reshape((1,), name="out_x")(x),
        "out_k": keras.layers.Reshape((1,), name="out_k")(k),
    }
    model = keras.Model({"x": x, "k": k, "s": s}, outputs)
    path = export(model, tmp_path / "exp")
    data = tmp_path / "d.csv"
    data.write_text("x,k,s\n1.5,2,a\nNA,3.0,NA\n-2e1, 04 ,\n")
    predict_file(path, data, output=tmp_path / "o.jsonl", progress=False)
    got = pd.read_json(tmp_path / "o.jsonl", lines=True)
    assert got["out_k"].tolist() == [2, 3, 4]
    assert got["out_x"][[0, 2]].tolist() == [1.5, -20.0]
    assert pd.isna(got["out_x"][1])  # "NA": missing, as the float input takes it
    data.write_text("x,k,s\n1.5,2,a\n1,two,b\n")
    with pytest.raises(ValueError, match=r"d\.csv', line 3, column 'k'"):
        predict_file(path, data, output=tmp_path / "o.jsonl", progress=False)


def test_a_jsonl_file_is_read_in_its_encoding(exported):
    # JSON lines went to pandas as UTF-8 whatever --encoding said; a Latin-1 file
    # gave a bare UnicodeDecodeError, and a byte-order mark broke the first row.
    rows = exported["df"].iloc[:3].assign(city=["é", "a", "b"])
    text = rows.to_json(orient="records", lines=True, force_ascii=False)
    latin = exported["tmp"] / "latin.jsonl"
    latin.write_bytes(text.encode("latin-1"))
    out = exported["tmp"] / "latin_out.jsonl"
    with pytest.raises(
        ValueError, match=r"latin\.jsonl' is not utf-8 text.*--encoding"
    ):
        predict_file(exported["path"], latin, output=out, progress=False)
    assert not out.exists()
    predict_file(
        exported["path"], latin, output=out, progress=False, encoding="latin-1"
    )
    bom = exported["tmp"] / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    predict_file(
        exported["path"], bom, output=exported["tmp"] / "b.jsonl", progress=False
    )
    same = [pd.read_json(p, lines=True) for p in (out, exported["tmp"] / "b.jsonl")]
    assert len(same[0]) == 3 and same[0].equals(same[1])


def test_a_file_without_rows_gives_a_table_without_rows(exported):
    # The CSV output of a header-only file was empty: not even a header to read.
    empty = exported["tmp"] / "empty.csv"
    exported["df"].iloc[:0].to_csv(empty, index=False)
    output = exported["tmp"] / "empty_out.csv"
    predict_file(exported["path"], empty, output=output, keep=["id"], progress=False)
    got = pd.read_csv(output)
    assert list(got.columns) == ["id", "income"] and len(got) == 0
