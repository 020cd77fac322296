"""The text classifiers' preprocessors (raw strings -> a classifier's inputs, one
class per model kind, the same ids the kind's tokenizer and the wide part's hasher
give on their own) and fit_text_classifier's table of kinds and its stages, each
alone."""

import inspect
import re

import numpy as np
import pytest

from keras_attn import training
from keras_attn.backend import tf
from keras_attn.models import (
    BertTextPreprocessor,
    HANTextPreprocessor,
    TextClassifier,
    TextPreprocessor,
    TransformerTextPreprocessor,
    build_han_classifier,
    build_transformer_classifier,
    text_preprocessor,
)
from keras_attn.models import text_classifier as tc
from keras_attn.models.bert import BertBackbone, BertClassifier
from keras_attn.models.bert_preprocessor import BertPreprocessor
from keras_attn.models.hf_checkpoint import HFCheckpoint
from keras_attn.models.text_classifier import _model_inputs
from keras_attn.text import HashedNgrams, SentenceTokenizer, Tokenizer
from keras_attn.text.bert_tokenizer import BertTokenizer
from tests import hf_folders

pytestmark = pytest.mark.generation_neutral

VOCABULARY = ["[PAD]", "[UNK]", "good", "bad", "film", ".", "!"]
TEXTS = ["Good film. Bad!", "bad bad film", "", "Un film, très bon."]


def _han(wide=False):
    tokenizer = SentenceTokenizer(VOCABULARY, max_sentences=2, max_words=3)
    model = build_han_classifier(
        len(VOCABULARY),
        2,
        2,
        3,
        embedding_dim=4,
        units=2,
        attention_units=4,
        wide=wide and {"num_buckets": 32, "max_ngrams": 6},
    )
    return model, tokenizer


def _transformer(wide=False):
    tokenizer = Tokenizer(VOCABULARY, sequence_length=4, method="word")
    model = build_transformer_classifier(
        len(VOCABULARY),
        2,
        4,
        hidden_dim=4,
        num_heads=1,
        wide=wide and {"num_buckets": 32, "max_ngrams": 6},
    )
    return model, tokenizer


def _bert(wide=False, checkpoint=False):
    if checkpoint:
        tokenizer = BertPreprocessor(BertTokenizer("bert-base-uncased"), 6)
    else:
        tokenizer = Tokenizer("bert-base-uncased", sequence_length=6)
    backbone = BertBackbone(
        30522, sequence_length=6, hidden_dim=4, num_layers=1, num_heads=1
    )
    wide = wide and {"num_buckets": 32, "max_ngrams": 6}
    return BertClassifier(backbone, 2, wide=wide), tokenizer


def _expected(model, tokenizer, texts):
    """The inputs written out from the parts: the tokenizer's ids, segment ids
    (a BertPreprocessor's, or zeros), the wide part's hashed n-grams."""
    batch = tf.constant(texts)
    if isinstance(tokenizer, BertPreprocessor):
        expected = {k: v.numpy() for k, v in tokenizer(batch).items()}
    else:
        expected = {"token_ids": tokenizer.tokenize(batch).numpy()}
        if isinstance(model, BertClassifier):
            expected["segment_ids"] = np.zeros_like(expected["token_ids"])
    if getattr(model, "wide", None) is not None:
        expected["ngram_ids"] = HashedNgrams.matching(model.wide).tokenize(batch)
        expected["ngram_ids"] = expected["ngram_ids"].numpy()
    return expected


KINDS = {
    "han": (_han, HANTextPreprocessor),
    "transformer": (_transformer, TransformerTextPreprocessor),
    "bert": (_bert, BertTextPreprocessor),
}


@pytest.mark.parametrize("wide", [False, True], ids=["deep", "wide"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_gives_the_ids_of_its_tokenizer_and_hasher(kind, wide):
    build, cls = KINDS[kind]
    model, tokenizer = build(wide=wide)
    preprocessor = text_preprocessor(model, tokenizer)
    assert type(preprocessor) is cls and preprocessor.tokenizer is tokenizer
    assert (preprocessor.ngrams is not None) == wide
    expected = _expected(model, tokenizer, TEXTS)
    # On the host, in batches (what fit_text_classifier feeds), and as a layer
    # (what the serving model, predict and explain call).
    host = preprocessor.inputs(TEXTS, batch_size=3)
    assert sorted(host) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(host[key], value)
        assert host[key].dtype == np.int32
    layer = preprocessor(tf.constant(TEXTS))
    if len(expected) == 1:  # the token ids alone, as the model takes them
        np.testing.assert_array_equal(layer, expected["token_ids"])
    else:
        assert sorted(layer) == sorted(expected)
        for key, value in expected.items():
            np.testing.assert_array_equal(layer[key], value)
    for key, value in _model_inputs(model, tokenizer, TEXTS).items():
        np.testing.assert_array_equal(value, expected[key])
    # The model takes what the preprocessor gives.
    assert model(layer)["probabilities"].shape == (len(TEXTS), 2)


def test_han_ids_written_out():
    model, tokenizer = _han()
    ids = text_preprocessor(model, tokenizer).inputs(TEXTS[:2])["token_ids"]
    # good film . | bad ! ; bad bad film (one sentence).
    assert ids.tolist() == [
        [[2, 4, 5], [3, 6, 0]],
        [[3, 3, 4], [0, 0, 0]],
    ]


def test_bert_checkpoint_preprocessor_gives_its_token_and_segment_ids():
    model, tokenizer = _bert(wide=True, checkpoint=True)
    preprocessor = text_preprocessor(model, tokenizer)
    assert type(preprocessor) is BertTextPreprocessor
    out = preprocessor.inputs(["Good film."])
    assert out["token_ids"].tolist() == [[101, 2204, 2143, 1012, 102, 0]]
    assert out["segment_ids"].tolist() == [[0] * 6]
    assert out["ngram_ids"].shape == (1, 6)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_config_round_trip_gives_the_same_inputs(kind):
    build, cls = KINDS[kind]
    model, tokenizer = build(wide=True)
    preprocessor = text_preprocessor(model, tokenizer)
    restored = cls.from_config(preprocessor.get_config())
    assert type(restored.tokenizer) is type(tokenizer)
    assert restored.ngrams.get_config() == preprocessor.ngrams.get_config()
    before, after = preprocessor.inputs(TEXTS), restored.inputs(TEXTS)
    for key in before:
        np.testing.assert_array_equal(after[key], before[key])


def test_a_preprocessor_is_kept_and_a_wrong_tokenizer_is_refused():
    model, tokenizer = _transformer()
    preprocessor = text_preprocessor(model, tokenizer)
    assert text_preprocessor(model, preprocessor) is preprocessor
    with pytest.raises(ValueError, match="`tokenizer` of a HANTextPreprocessor"):
        HANTextPreprocessor(tokenizer)
    with pytest.raises(ValueError, match="`ngrams` must be a HashedNgrams"):
        TransformerTextPreprocessor(tokenizer, ngrams=tokenizer)
    assert isinstance(preprocessor, TextPreprocessor)


def test_text_classifier_holds_its_preprocessor():
    model, tokenizer = _han(wide=True)
    classifier = TextClassifier(model, tokenizer, ["neg", "pos"])
    assert type(classifier.preprocessor) is HANTextPreprocessor
    assert classifier.preprocessor.tokenizer is tokenizer
    given = text_preprocessor(model, tokenizer)
    assert (
        TextClassifier(model, tokenizer, ["a", "b"], preprocessor=given).preprocessor
        is given
    )
    inputs = classifier.model_inputs(TEXTS)
    expected = _expected(model, tokenizer, TEXTS)
    for key, value in expected.items():
        np.testing.assert_array_equal(inputs[key], value)
    # Nothing to preprocess with: a classifier of class names alone (CLI spies).
    assert TextClassifier(None, None, ["a", "b"]).preprocessor is None


# The table of model kinds and fit_text_classifier's stages, each alone.


def _fit(**changes):
    texts = ["Good film. Bad!", "bad bad film", "good good", "a film"] * 3
    fit = tc.TextFit(
        texts=texts,
        class_names=["neg", "pos"],
        sizes={
            "max_sentences": 2,
            "max_words": 3,
            "sequence_length": 4,
            "max_tokens": None,
            "min_count": None,
        },
    )
    for key, value in changes.items():
        setattr(fit, key, value)
    return fit


STAGE_KINDS = {
    "han": (HANTextPreprocessor, SentenceTokenizer, {}),
    "transformer": (TransformerTextPreprocessor, Tokenizer, {}),
    "bert": (
        BertTextPreprocessor,
        Tokenizer,
        {"hidden_dim": 4, "num_layers": 1, "num_heads": 1},
    ),
}
SMALL = {
    "han": {"embedding_dim": 4, "units": 2, "attention_units": 4},
    "transformer": {"hidden_dim": 4, "num_layers": 1, "num_heads": 1},
    "bert": {"hidden_dim": 4, "num_layers": 1, "num_heads": 1},
}


def test_the_table_covers_every_kind_fit_text_classifier_accepts():
    assert tc.MODELS == ("han", "transformer", "bert") == tuple(tc.TEXT_MODELS)
    assert sorted(tc.PRETRAINED_MODELS) == ["bert"]
    for name in tc.MODELS:
        kind = tc.text_model_kind(name)
        assert kind is tc.TEXT_MODELS[name]
        assert kind.model_defaults == tc.MODEL_DEFAULTS[name]
        assert not kind.fine_tune
    assert tc.text_model_kind("bert", checkpoint="x").fine_tune
    # The recipe walks the table: no branch on the kind's name is left in it.
    source = inspect.getsource(tc.fit_text_classifier)
    assert not re.search(r"model\s*[!=]=|model\s+(not\s+)?in\s", source)


@pytest.mark.parametrize("name", sorted(STAGE_KINDS))
def test_each_kind_s_preprocessor_and_model_stages_alone(name):
    cls, tokenizer_type, _ = STAGE_KINDS[name]
    kind = tc.TEXT_MODELS[name]
    fit = _fit(wide=kind.wide and {"num_buckets": 32, "max_ngrams": 6})
    fit.model_kwargs = SMALL[name]
    preprocessor = kind.preprocessor(fit)
    assert type(preprocessor) is cls and preprocessor.ngrams is None
    assert type(preprocessor.tokenizer) is tokenizer_type
    net = kind.model(fit, preprocessor)
    preprocessor = preprocessor.for_classifier(net)
    assert (preprocessor.ngrams is not None) == kind.wide
    inputs = preprocessor(tf.constant(fit.texts[:3]))
    assert net(inputs)["probabilities"].shape == (3, 2)
    if name == "han":  # a word vocabulary read off the texts, with its limits
        assert (fit.sizes["max_tokens"], fit.sizes["min_count"]) == (50000, 2)
        assert preprocessor.tokenizer.max_sentences == 2
    else:
        assert preprocessor.tokenizer.sequence_length == fit.sizes["sequence_length"]


def test_wordpiece_lengths_make_room_for_cls_and_sep():
    fit = _fit(vocabulary="bert-base-uncased")
    assert tc.TEXT_MODELS["transformer"].preprocessor(fit).tokenizer.method == (
        "wordpiece"
    )
    assert fit.sizes["sequence_length"] == 6 and fit.sizes["max_tokens"] is None
    # "bert" defaults to the shipped vocabulary, at most `bert_tokens` pieces
    # unless the length was given.
    fit = _fit()
    fit.sizes["sequence_length"] = 400
    assert (
        tc.TEXT_MODELS["bert"].preprocessor(fit).sequence_length
        == (tc.LIMIT_CAPS["bert_tokens"])
    )
    fit = _fit(length_given=True)
    fit.sizes["sequence_length"] = 400
    assert tc.TEXT_MODELS["bert"].preprocessor(fit).sequence_length == 402


def test_the_wide_part_s_arguments_are_resolved_per_kind():
    limits = {"max_ngrams": 7}
    han, bert = tc.TEXT_MODELS["han"], tc.TEXT_MODELS["bert"]
    assert tc._resolve_wide(bert, None, "ensemble", limits, 10) is False
    wide = tc._resolve_wide(han, None, "ensemble", limits, 10)
    assert wide["max_ngrams"] == 7 and wide["nb_ratio"] is True
    l2 = wide["kernel_regularizer"]["config"]["l2"]
    assert l2 == pytest.approx(1 / (2 * tc.WIDE_FIT["C"] * 10))
    joint = tc._resolve_wide(han, {"num_buckets": 8}, "joint", limits, 10)
    assert joint["scale"] == tc.WIDE_JOINT["scale"] and joint["num_buckets"] == 8
    assert "kernel_regularizer" not in joint


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model": "lstm"}, r"`model` must be one of \['han', 'transformer', 'bert'\]"),
        ({"model": ["han"]}, "`model` must be one of"),
        ({"model": "han", "checkpoint": "x"}, "`checkpoint` needs model='bert'"),
        ({"model": "han", "pretrain_epochs": 1}, "`pretrain_epochs` needs model="),
        (
            {"model": "bert", "checkpoint": "x", "pretrain_epochs": 1},
            "`pretrain_epochs` cannot be used with `checkpoint`",
        ),
    ],
)
def test_an_unknown_kind_is_a_clear_error_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tc.text_model_kind(**kwargs)
    if kwargs == {"model": "lstm"}:
        with pytest.raises(ValueError, match="Received: model='lstm'"):
            tc.fit_text_classifier(["a b", "c d"], ["x", "y"], model="lstm")


def test_the_pretrained_kind_s_stages_alone(tmp_path):
    path = tmp_path / "bert"
    hf_folders.write_folder(path, "bert")
    kind = tc.text_model_kind("bert", checkpoint=path)
    texts = ["w1 w2 w3", "w4 w5", "w6 w7 w8 w9"] * 2
    fit = _fit(
        texts=texts,
        checkpoint=HFCheckpoint(path),
        wide={"num_buckets": 32, "max_ngrams": 6},
    )
    preprocessor = kind.preprocessor(fit)
    assert isinstance(preprocessor.tokenizer, BertPreprocessor)
    # A stage built without `truncate` cuts as fit_text_classifier's default does.
    assert preprocessor.tokenizer.truncate == tc.FINE_TUNING["truncate"] == "middle"
    # The corpus's 95th percentile of pieces, [CLS] and [SEP] included.
    assert fit.sizes["sequence_length"] == preprocessor.sequence_length == 6
    net = kind.model(fit, preprocessor)
    assert isinstance(net, BertClassifier) and net.wide is not None
    preprocessor = preprocessor.for_classifier(net)
    inputs = preprocessor(tf.constant(texts[:2]))
    assert inputs["token_ids"].numpy()[:, 0].tolist() == [2, 2]  # [CLS]
    assert net(inputs)["probabilities"].shape == (2, 2)


def _staged_parts(wide):
    kind = tc.TEXT_MODELS["transformer"]
    fit = _fit(wide=wide, batch_size=4)
    fit.model_kwargs = SMALL["transformer"]
    preprocessor, _ = tc._ngram_stage(fit, kind.preprocessor(fit))
    net = kind.model(fit, preprocessor)
    preprocessor = preprocessor.for_classifier(net)
    y = np.array([0, 1, 0, 1] * 3, "int32")
    train = (preprocessor.inputs(fit.texts), y)
    validation = (preprocessor.inputs(fit.texts[:4]), y[:4])
    return fit, kind, net, train, validation


def test_the_deep_stage_alone_with_a_backup_counts_its_epochs(tmp_path):
    fit, kind, net, train, _ = _staged_parts(wide=False)
    timer = training.EpochTimer()
    fitted, history, settings = tc._deep_stage(
        fit,
        kind,
        net,
        train,
        None,
        ensemble=False,
        epochs=2,
        patience=None,
        backup_dir=tmp_path / "backup",
        timer=timer,
    )
    # The token ids alone (the model's input structure) from an endless stream
    # of which `fit` counts 2 epochs of 3 batches.
    assert fitted is net and settings == {} and len(timer.times) == 2
    assert len(history.history["loss"]) == 2
    assert np.isfinite(history.history["loss"]).all()


def test_the_wide_and_mix_stages_alone():
    fit, kind, net, train, validation = _staged_parts(
        wide=tc._resolve_wide(
            tc.TEXT_MODELS["transformer"], None, "ensemble", {"max_ngrams": 6}, 12
        )
    )
    # The n-grams of two training documents or more feed the wide part.
    assert net.wide.lookup == "vocabulary" and "min_df" not in fit.wide
    settings = tc._wide_stage(fit, net, train, validation, staged=True)
    assert set(settings) == {"wide_val_accuracy"} and not net.wide.trainable
    fitted, _, _ = tc._deep_stage(
        fit, kind, net, train, validation, ensemble=True, epochs=1, patience=None
    )
    assert fitted is not net  # the deep part alone
    kernel = net.wide.kernel.numpy().copy()
    mix = tc._mix_stage(fit, net, fitted, train, validation, refit=True)
    assert {"wide_weight", "temperature", "mix_val_accuracy"} <= set(mix)
    assert mix["wide_refit_documents"] == 16
    # The mix is folded into the weights: the wide kernel is refitted and scaled.
    assert not np.allclose(net.wide.kernel.numpy(), kernel)


@pytest.mark.generation_specific
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["han", "bert"])
def test_a_text_classifier_saves_and_loads_with_its_preprocessor(kind, tmp_path):
    if kind == "han":
        model, tokenizer = _han(wide=True)
    else:
        model, tokenizer = _bert(wide=True, checkpoint=True)
    classifier = TextClassifier(model, tokenizer, ["neg", "pos"])
    path = tmp_path / "classifier.keras"
    classifier.save(path)
    loaded = TextClassifier.load(path)
    assert type(loaded.preprocessor) is type(classifier.preprocessor)
    assert loaded.tokenizer is loaded.preprocessor.tokenizer
    assert loaded.preprocessor.get_config() == classifier.preprocessor.get_config()
    assert loaded.class_names == ["neg", "pos"]
    assert type(loaded.model) is type(model)
    expected = classifier.serving_model()({"text": tf.constant(TEXTS)})
    got = loaded.serving_model()({"text": tf.constant(TEXTS)})
    np.testing.assert_allclose(
        got["probabilities"], expected["probabilities"], atol=1e-6
    )
    assert loaded.predict(TEXTS) == classifier.predict(TEXTS)
    # Any other file is refused with what it holds.
    other = tmp_path / "other.keras"
    model.save(other)
    with pytest.raises(ValueError, match="written by `TextClassifier.save`"):
        TextClassifier.load(other)


def test_evaluate_scores_raw_strings_through_the_preprocessor():
    model, tokenizer = _han(wide=True)
    classifier = TextClassifier(model, tokenizer, ["0", "1"])
    texts, labels = TEXTS, [0, "1", 1.0, "0"]
    probabilities = model(classifier.model_inputs(texts))["probabilities"].numpy()
    y = np.array([0, 1, 1, 0])
    got = classifier.evaluate(texts, labels)
    assert got["accuracy"] == pytest.approx(np.mean(probabilities.argmax(-1) == y))
    expected_loss = -np.mean(np.log(probabilities[np.arange(4), y]))
    assert got["loss"] == pytest.approx(expected_loss, rel=1e-5)
    with pytest.raises(ValueError, match=r"classes \['2'\] not among them"):
        classifier.evaluate(texts, [0, 1, 2, 0])
    with pytest.raises(ValueError, match="must have the same length"):
        classifier.evaluate(texts, [0])
