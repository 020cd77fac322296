"""Every moved public name still works at its old spelling for one release: it is
the same object as the new one and its use warns with a `DeprecationWarning` naming
the new spelling (one mechanism for all: `keras_attn._deprecation.moved`)."""

import importlib
import inspect

import pytest

from keras_attn import _deprecation

# Imports and warnings: the same code under both generations.
pytestmark = pytest.mark.generation_neutral

#: (old module, name, new module): the names issue 29 moved.
MOVED = [
    *[
        ("keras_attn.layers.text", name, module)
        for name, module in [
            ("COMBINERS", "keras_attn.layers.wide"),
            ("TERM_WEIGHTINGS", "keras_attn.layers.wide"),
            ("NgramLinear", "keras_attn.layers.wide"),
            ("POOLINGS", "keras_attn.layers.pooling:SEQUENCE_POOLINGS"),
            ("SequencePooling", "keras_attn.layers.pooling"),
            ("PredictedLabel", "keras_attn.layers.labels"),
            ("TokenMask", "keras_attn.layers.token_ids"),
            ("SegmentIds", "keras_attn.layers.token_ids"),
            ("PerSentence", "keras_attn.layers.per_sentence"),
            ("CandidateSum", "keras_attn.layers.aoa"),
            ("HashedNgrams", "keras_attn.text.ngrams"),
        ]
    ],
    ("keras_attn.models", "HistoryPooling", "keras_attn.layers"),
    ("keras_attn.models.retrieval", "HistoryPooling", "keras_attn.layers.pooling"),
    ("keras_attn.models", "export_retrieval_index", "keras_attn.serving"),
    (
        "keras_attn.models.retrieval",
        "export_retrieval_index",
        "keras_attn.serving.retrieval",
    ),
    *[
        ("keras_attn.cli.serving", name, "keras_attn.serving")
        for name in (
            "TF_SERVING_TEXT_OPS",
            "inspect_export",
            "predict_file",
            "resolve_export",
        )
    ],
    ("keras_attn.models", "Seq2SeqEncoder", "keras_attn.layers"),
    ("keras_attn.models.seq2seq", "Seq2SeqEncoder", "keras_attn.layers.seq2seq"),
    ("keras_attn.models", "export_seq2seq", "keras_attn.serving"),
    ("keras_attn.models.seq2seq", "export_seq2seq", "keras_attn.serving.seq2seq"),
    *[
        ("keras_attn.distribute", name, "keras_attn.training")
        for name in [
            "check_static_input",
            "completed_epochs",
            "distribute_dataset",
            "epoch_batches",
            "fit_callbacks",
            "numbers_only",
            "steps_per_execution",
            "weights_checkpoint",
        ]
    ],
]


@pytest.mark.parametrize("old, name, new", MOVED, ids=[f"{o}.{n}" for o, n, _ in MOVED])
def test_old_spelling_warns_and_is_the_new_object(old, name, new):
    module = importlib.import_module(old)
    new, _, new_name = new.partition(":")
    with pytest.warns(DeprecationWarning, match=rf"`{old}\.{name}` moved to `{new}"):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), new_name or name)
    # The old name is no longer in the old module's public list.
    assert name not in getattr(module, "__all__", ())


def test_from_import_of_an_old_spelling_warns():
    with pytest.warns(
        DeprecationWarning, match="keras_attn.layers.token_ids.TokenMask"
    ):
        from keras_attn.layers.text import TokenMask  # noqa: F401


def test_an_unknown_name_is_still_an_attribute_error():
    module = importlib.import_module("keras_attn.layers.text")
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        module.Nothing  # noqa: B018


def test_every_declared_old_spelling_is_tested_and_resolves():
    # Each module's table of moved names, read off its `__getattr__` closure.
    declared = set()
    for old in {o for o, _, _ in MOVED}:
        getter = importlib.import_module(old).__getattr__
        names = inspect.getclosurevars(getter).nonlocals["names"]
        for name, target in names.items():
            declared.add((old, name))
            assert _deprecation.resolve(target) is not None
    assert declared == {(o, n) for o, n, _ in MOVED}


def test_ngram_linear_hasher_warns():
    from keras_attn.layers import NgramLinear
    from keras_attn.text import HashedNgrams

    linear = NgramLinear(2, num_buckets=10, ngram_widths=[1, 3], max_ngrams=5)
    with pytest.warns(DeprecationWarning, match="HashedNgrams.matching"):
        hasher = linear.hasher()
    assert isinstance(hasher, HashedNgrams)
    assert hasher.get_config()["ngram_widths"] == [1, 3]
    assert hasher.max_ngrams == 5 and hasher.num_buckets == 10
