"""Text labels are read once and checked (issue 28, finding 6): a missing label or
document is an error naming the rows (or the row is dropped on request), 3 and 3.0
are one class, and the early-stopping part is never empty."""

import json

import numpy as np
import pytest

from keras_attn.cli import main
from keras_attn.cli.train import read_text_file
from keras_attn.models import fit_text_classifier
from keras_attn.text import early_stopping_split, text_labels

pytestmark = pytest.mark.generation_neutral


def test_numbers_are_one_class_whatever_their_spelling():
    texts, labels = text_labels(list("abcdef"), [3, 3.0, "3.0", " 3 ", True, "pos "])
    assert labels == ["3", "3", "3", "3", "True", "pos"]
    assert texts == list("abcdef")


@pytest.mark.parametrize("missing", [None, float("nan"), "", "  "])
def test_a_missing_label_is_an_error_naming_the_rows(missing):
    with pytest.raises(ValueError, match=r"no label in rows 1, 3\b"):
        text_labels(list("abcd"), ["x", missing, "y", missing])
    texts, labels = text_labels(list("abcd"), ["x", missing, "y", missing], True)
    assert (texts, labels) == (["a", "c"], ["x", "y"])


def test_a_missing_document_is_an_error_an_empty_one_is_kept():
    with pytest.raises(ValueError, match=r"no document in rows 1\b"):
        text_labels(["a", None, ""], ["x", "y", "x"])
    assert text_labels(["a", None, ""], ["x", "y", "x"], drop_missing=True) == (
        ["a", ""],
        ["x", "x"],
    )
    with pytest.raises(ValueError, match=r"must hold strings.*\(int\) in row 0"):
        text_labels([5], ["x"])


def test_files_give_missing_cells_as_none(tmp_path):
    jsonl = tmp_path / "d.jsonl"
    rows = [
        {"text": "good", "label": "pos"},
        {"text": "bad", "label": None},
        {"text": None, "label": "neg"},
        {"text": "fine", "label": 3.0},
    ]
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    texts, labels = read_text_file(jsonl, "text", "label")
    assert texts == ["good", "bad", None, "fine"]
    assert labels == ["pos", None, "neg", 3.0]
    # A list of sentences (review_polarity's layout) with a null in it.
    jsonl.write_text(
        '{"text": ["One.", "Two."], "label": 1}\n{"text": ["a", null], "label": 0}\n'
    )
    with pytest.raises(ValueError, match=r"d\.jsonl', line 2: 'text' must be a"):
        read_text_file(jsonl, "text", "label")
    # A line that is not an object (a TypeError, a traceback, for a string).
    jsonl.write_text('{"text": "a", "label": 1}\n"the text label"\n')
    with pytest.raises(ValueError, match=r"line 2: each line must be an object"):
        read_text_file(jsonl, "text", "label")
    # Read as the CSV files are: a byte-order mark, another encoding named.
    jsonl.write_bytes(b'\xef\xbb\xbf{"text": "caf\xc3\xa9", "label": 1}\n')
    assert read_text_file(jsonl, "text", "label") == (["café"], [1])
    jsonl.write_bytes('{"text": "café", "label": 1}\n'.encode("latin-1"))
    with pytest.raises(ValueError, match=r"line 1 \(or near it\).*--encoding latin-1"):
        read_text_file(jsonl, "text", "label")
    assert read_text_file(jsonl, "text", "label", "latin-1") == (["café"], [1])
    csv = tmp_path / "d.csv"
    csv.write_text('text,label\ngood,pos\nbad,\n,neg\nNA,NA\n"NA ok",3.0\n')
    texts, labels = read_text_file(csv, "text", "label")
    # A document reads as written (only an empty one is missing); a label as
    # pandas reads it ("NA" is missing).
    assert texts == ["good", "bad", None, "NA", "NA ok"]
    assert labels == ["pos", None, "neg", None, "3.0"]
    with pytest.raises(
        ValueError, match=r"no label in rows 1, 3; no document in rows 2"
    ):
        text_labels(texts, labels)


def test_cli_names_the_rows_and_drops_them_on_request(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("review,label\nnice,pos\nawful,\nok,neg\n")
    args = ["train", "text", "--data", str(data), "--text-column", "review"]
    args += ["--label-column", "label", "--epochs", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no label in rows 1" in err
    assert "--drop-missing" in err


def test_labels_are_normalized_in_the_fit_path():
    # 3 and 3.0 are one class: two documents of one class are refused early.
    with pytest.raises(ValueError, match=r"at least 2 classes. Received: \['3'\]"):
        fit_text_classifier(["a b", "c d"], [3, 3.0])
    with pytest.raises(ValueError, match=r"no label in rows 1"):
        fit_text_classifier(["a b", "c d", "e"], ["x", None, "y"])


def test_the_early_stopping_part_is_never_empty():
    labels = ["a"] * 4 + ["b"] * 4  # 10% of 4 rounds to 0 in each class
    with pytest.raises(ValueError, match="carves none for early stopping"):
        early_stopping_split(labels, 0.1)
    with pytest.raises(ValueError, match="carves none.*--patience 0"):
        fit_text_classifier(["w x"] * 8, labels, epochs=1)
    with pytest.raises(ValueError, match=r"class\(es\) \['b'\]"):
        early_stopping_split(["a"] * 10 + ["b"], 0.6)
    train, validation = early_stopping_split(["a"] * 10 + ["b"] * 10, 0.1)
    assert len(validation) == 2 and len(np.intersect1d(train, validation)) == 0
    with pytest.raises(ValueError, match="`validation_texts` must hold documents"):
        fit_text_classifier(["a b", "c d"], ["x", "y"], validation_texts=[],
                            validation_labels=[])  # fmt: skip
