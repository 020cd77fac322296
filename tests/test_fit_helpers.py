"""The keywords every `fit_*` helper takes (`keras_attn.training.fit_options`):
`strategy`, `tpu`, `backup_dir`, `checkpoint_dir`, `mixed_precision`, `jit_compile`,
`callbacks`, `verbose`, `seed`, each doing what it says in each helper, and the
helpers' results (a `History`, or an object with `.history` and `.model`).

Unmarked: backups, checkpoint files, strategies and seeded dropout differ between
the Keras generations."""

import inspect
import os

import numpy as np
import pytest

from keras_attn import training
from keras_attn.backend import KERAS_3, keras, tf
from keras_attn.models import (
    Seq2Seq,
    build_bert,
    build_bert_pretrainer,
    build_character_vocabulary,
    build_sequential_retrieval,
    fit_aoa_reader,
    fit_bert_pretrainer,
    fit_ctr_model,
    fit_retrieval_model,
    fit_seq2seq,
    fit_text_classifier,
)
from keras_attn.precision import policy_scope
from keras_attn.text.cloze import (
    build_cloze_vocabulary,
    make_cloze_questions,
    tokenize_documents,
)
from keras_attn.text.datasets import load_review_sample

COMMON = (
    "strategy",
    "tpu",
    "backup_dir",
    "checkpoint_dir",
    "mixed_precision",
    "jit_compile",
    "callbacks",
    "verbose",
    "seed",
)
HELPERS = [
    fit_aoa_reader,
    fit_bert_pretrainer,
    fit_ctr_model,
    fit_retrieval_model,
    fit_seq2seq,
    fit_text_classifier,
]


class _Interrupted(Exception):
    pass


class _StopAt(keras.callbacks.Callback):
    """Stops a fit at the start of epoch `epoch` (after the earlier epochs' backups),
    as a killed process would."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise _Interrupted


def _assert_same_weights(a, b, atol=1e-6):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, atol=atol)


def _created_under(strategy, model):
    variables = list(model.variables) + list(model.optimizer.variables)
    # Keras 3 wraps each TensorFlow variable.
    variables = [v.value if KERAS_3 else v for v in variables]
    return all(strategy.extended.variable_created_in_scope(v) for v in variables)


@pytest.mark.generation_neutral
@pytest.mark.parametrize("helper", HELPERS, ids=lambda f: f.__name__)
def test_every_fit_helper_takes_the_common_keywords(helper):
    parameters = inspect.signature(helper).parameters
    assert [k for k in COMMON if k not in parameters] == []


@pytest.mark.generation_neutral
def test_fit_options_name_the_bad_argument(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    cases = [
        ({"callbacks": keras.callbacks.History()}, r"`callbacks` must be a list"),
        ({"callbacks": ["early"]}, r"`callbacks` must be a list"),
        ({"seed": "0"}, r"`seed` must be a non-negative integer"),
        ({"seed": -1}, r"`seed` must be a non-negative integer"),
        ({"strategy": 3}, r"`strategy` must be a tf.distribute"),
        ({"tpu": "x", "strategy": tf.distribute.get_strategy()}, r"`tpu` is only"),
        ({"mixed_precision": "float64"}, r"`mixed_precision` must be one of"),
        ({"mixed_precision": "mixed_bfloat16"}, r"`mixed_precision` must be the"),
        ({"jit_compile": "yes"}, r"`jit_compile` must be True, False"),
        ({"backup_dir": 3}, r"`backup_dir` must be a folder"),
        ({"checkpoint_dir": tmp_path / "f.txt"}, r"`checkpoint_dir` must be a folder"),
        (
            {"strategy": tf.distribute.OneDeviceStrategy("/cpu:0")},
            r"`strategy` must be the strategy the model was built under",
        ),
    ]
    (tmp_path / "f.txt").write_text("a file in the way")
    for kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            training.fit_options(model, "fit_x", **kwargs)
    options = training.fit_options(
        model, "fit_x", jit_compile="auto", jit_default=True, callbacks=()
    )
    assert options.strategy is tf.distribute.get_strategy()
    assert (options.mixed_precision, options.jit_compile) == ("float32", True)
    assert (options.start_epoch, options.callbacks) == (0, [])


# --- fit_seq2seq ---------------------------------------------------------------

WORDS = ["abcd", "dcb", "bad", "cab", "acdc", "dab", "bcd", "cd", "ab", "dcba"]
VOCABULARY = build_character_vocabulary(WORDS)


def _seq2seq(**kwargs):
    keras.utils.set_random_seed(0)
    return Seq2Seq(
        source_vocabulary=VOCABULARY,
        target_vocabulary=VOCABULARY,
        units=4,
        embedding_dim=4,
        **kwargs,
    )


def _fit_seq2seq(model, **kwargs):
    kwargs.setdefault("epochs", 1)
    return fit_seq2seq(
        model,
        WORDS,
        [w[::-1] for w in WORDS],
        batch_size=4,
        learning_rate=1e-2,
        **kwargs,
    )


@pytest.mark.slow
def test_fit_seq2seq_resumes_from_backup_dir_and_writes_checkpoints(tmp_path):
    whole = _seq2seq()
    history = _fit_seq2seq(whole, epochs=3, checkpoint_dir=tmp_path / "checkpoints")
    assert history.model is whole and history.epoch == [0, 1, 2]
    written = sorted(os.listdir(tmp_path / "checkpoints"))
    assert written == [f"epoch_00{e}.weights.h5" for e in (1, 2, 3)]
    reloaded = _seq2seq()
    reloaded.load_weights(str(tmp_path / "checkpoints" / "epoch_003.weights.h5"))
    _assert_same_weights(reloaded.get_weights(), whole.get_weights())

    backup = tmp_path / "backup"
    broken = _seq2seq()
    with pytest.raises(_Interrupted):
        _fit_seq2seq(broken, epochs=3, backup_dir=backup, callbacks=[_StopAt(2)])
    assert training.completed_epochs(backup) == 2
    resumed = _seq2seq()
    history = _fit_seq2seq(resumed, epochs=3, backup_dir=backup)
    # Epoch 2 only, on the uninterrupted run's batches: the same weights.
    assert history.epoch == [2]
    _assert_same_weights(resumed.get_weights(), whole.get_weights())


@pytest.mark.slow
def test_fit_seq2seq_under_a_strategy_and_mixed_precision():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope(), policy_scope("mixed_bfloat16"):
        model = _seq2seq()
    with pytest.raises(ValueError, match=r"`mixed_precision` must be the policy"):
        _fit_seq2seq(model, mixed_precision="float32")
    with pytest.raises(ValueError, match=r"`strategy` must be the strategy"):
        _fit_seq2seq(model, strategy=tf.distribute.OneDeviceStrategy("/cpu:0"))
    history = _fit_seq2seq(model, strategy=strategy, mixed_precision="mixed_bfloat16")
    assert np.isfinite(history.history["loss"]).all()
    assert model.decoder.compute_dtype == "bfloat16"
    # The optimizer was made under the model's strategy, beside the weights.
    assert _created_under(strategy, model)


@pytest.mark.slow
def test_fit_seq2seq_seed_repeats_the_run():
    runs = []
    for disturb in (False, True):
        model = _seq2seq(dropout=0.5)
        if disturb:
            # Draws of the random state between building and fitting.
            model(
                {"source_ids": np.ones((2, 3)), "decoder_input_ids": np.ones((2, 3))},
                training=True,
            )
            tf.random.uniform([3])
        _fit_seq2seq(model, seed=5)
        runs.append(model.get_weights())
    _assert_same_weights(*runs, atol=0)


@pytest.mark.slow
def test_fit_seq2seq_and_export_take_the_vocabularies_from_the_model(tmp_path):
    model = _seq2seq()
    assert model.source_vocabulary == VOCABULARY
    assert model.get_config()["target_vocabulary"] == VOCABULARY
    # The old spelling: the vocabularies again, with a warning; others raise.
    with pytest.warns(DeprecationWarning, match="Passing the vocabularies"):
        history = fit_seq2seq(
            model, WORDS[:4], WORDS[:4], VOCABULARY, VOCABULARY, epochs=1
        )
    assert history.epoch == [0]
    other = build_character_vocabulary(["xyz"])
    with pytest.raises(ValueError, match="`source_vocabulary` must be the model's"):
        fit_seq2seq(model, WORDS, WORDS, other, VOCABULARY)
    bare = Seq2Seq(len(VOCABULARY), len(VOCABULARY), units=4, embedding_dim=4)
    with pytest.raises(ValueError, match="reads the vocabularies from the model"):
        fit_seq2seq(bare, WORDS, WORDS)
    with pytest.raises(ValueError, match="`target_vocabulary` must be a list of str"):
        Seq2Seq(source_vocabulary=VOCABULARY, target_vocabulary=["a", "b"])
    with pytest.raises(ValueError, match="`source_vocabulary_size` must be the len"):
        Seq2Seq(3, source_vocabulary=VOCABULARY, target_vocabulary=VOCABULARY)


# --- fit_bert_pretrainer ---------------------------------------------------------


def _pretraining_data(vocabulary=30, length=8, rows=8):
    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocabulary, size=(rows, length)).astype("int32")
    x = {
        "token_ids": ids,
        "segment_ids": np.zeros_like(ids),
        "masked_positions": np.tile(np.array([[1, 3]], "int32"), (rows, 1)),
    }
    y = {"mlm": ids[:, [1, 3]], "nsp": rng.integers(0, 2, size=rows)}
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(4)


@pytest.mark.slow
def test_fit_bert_pretrainer_seed_repeats_the_run():
    runs = []
    for disturb in (False, True):
        keras.utils.set_random_seed(0)
        bert = build_bert(
            30, sequence_length=8, hidden_dim=8, num_layers=1, num_heads=2, dropout=0.5
        )
        model = build_bert_pretrainer(bert)
        if disturb:
            # Draws of the random state between building and fitting.
            x, _ = next(iter(_pretraining_data()))
            model(x, training=True)
            tf.random.uniform([3])
        history = fit_bert_pretrainer(
            model, _pretraining_data(), epochs=2, jit_compile=False, seed=7
        )
        assert history.model is model
        runs.append(model.get_weights())
    _assert_same_weights(*runs, atol=0)
    with pytest.raises(ValueError, match=r"`seed` must be a non-negative integer"):
        fit_bert_pretrainer(model, _pretraining_data(), seed=1.5)


# --- fit_retrieval_model -------------------------------------------------------


def _retrieval(**kwargs):
    keras.utils.set_random_seed(0)
    model = build_sequential_retrieval(
        12, num_genres=2, history_length=4, embedding_dim=8, num_layers=1, **kwargs
    )
    model.candidate_embeddings()  # builds both towers
    return model


def _examples(n=32):
    rng = np.random.default_rng(0)
    history = rng.integers(0, 13, size=(n, 4)).astype("int32")
    return {"history": history, "item": rng.integers(1, 13, n).astype("int32")}


def _fit_retrieval(model, **kwargs):
    kwargs.setdefault("epochs", 1)
    return fit_retrieval_model(
        model, _examples(), batch_size=8, verbose=0, jit_compile=False, **kwargs
    )


@pytest.mark.slow
def test_fit_retrieval_model_resumes_from_backup_dir_and_writes_checkpoints(
    tmp_path,
):
    # Dropout restarts from (seed, epoch) in each epoch under Keras 3; tf_keras'
    # draws from its graph's seeds, which start over in a resumed process.
    dropout = 0.2 if KERAS_3 else 0.0
    whole = _retrieval(dropout=dropout)
    history = _fit_retrieval(whole, epochs=3, checkpoint_dir=tmp_path / "c")
    assert history.model is whole
    assert sorted(os.listdir(tmp_path / "c"))[-1] == "epoch_003.weights.h5"
    reloaded = _retrieval(dropout=dropout)
    reloaded.load_weights(str(tmp_path / "c" / "epoch_003.weights.h5"))
    _assert_same_weights(reloaded.get_weights(), whole.get_weights())

    backup = tmp_path / "backup"
    with pytest.raises(_Interrupted):
        _fit_retrieval(
            _retrieval(dropout=dropout),
            epochs=3,
            backup_dir=backup,
            callbacks=[_StopAt(2)],
        )
    assert training.completed_epochs(backup) == 2
    resumed = _retrieval(dropout=dropout)
    assert _fit_retrieval(resumed, epochs=3, backup_dir=backup).epoch == [2]
    _assert_same_weights(resumed.get_weights(), whole.get_weights())


@pytest.mark.slow
def test_fit_retrieval_model_under_a_strategy_mixed_precision_and_xla():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope(), policy_scope("mixed_bfloat16"):
        model = _retrieval()
    with pytest.raises(ValueError, match=r"`mixed_precision` must be the policy"):
        _fit_retrieval(model, mixed_precision="float32")
    with pytest.raises(ValueError, match=r"`strategy` must be the strategy"):
        _fit_retrieval(model, strategy="mirrored")
    history = fit_retrieval_model(
        model,
        _examples(),
        epochs=1,
        batch_size=8,
        verbose=0,
        strategy=strategy,
        mixed_precision="mixed_bfloat16",
        jit_compile=True,
    )
    assert np.isfinite(history.history["loss"]).all()
    assert model.query_tower.compute_dtype == "bfloat16"
    assert model.jit_compile is True
    assert _created_under(strategy, model)


# --- fit_aoa_reader --------------------------------------------------------------


@pytest.fixture(scope="module")
def cloze():
    texts, _ = load_review_sample()
    docs = tokenize_documents(texts[:12])
    vocabulary = build_cloze_vocabulary(docs, max_tokens=300)
    settings = dict(
        num_candidates=4,
        context_sentences=3,
        max_document_tokens=40,
        questions_per_document=1,
        vocabulary=vocabulary,
    )
    questions = make_cloze_questions(docs, **settings)
    return questions[:8], questions[8:12], vocabulary


def _fit_aoa(cloze, **kwargs):
    train, test, vocabulary = cloze
    kwargs.setdefault("epochs", 1)
    return fit_aoa_reader(
        train, test, vocabulary, batch_size=4, embedding_dim=4, units=4, **kwargs
    )


@pytest.mark.slow
def test_fit_aoa_reader_result_backup_dir_checkpoints_and_callbacks(cloze, tmp_path):
    seen = []
    record = keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.append(e))
    whole = _fit_aoa(cloze, epochs=2, checkpoint_dir=tmp_path / "c", callbacks=[record])
    # One result contract: the History as `.history` (its `.model` the reader).
    assert isinstance(whole.history, keras.callbacks.History)
    assert whole.history.model is whole.model and seen == [0, 1]
    assert len(whole.history.history["loss"]) == 2
    with pytest.warns(DeprecationWarning, match=r"AoAReaderResult\.history\.history"):
        assert whole.history["loss"] == whole.history.history["loss"]
    assert sorted(os.listdir(tmp_path / "c"))[-1] == "epoch_002.weights.h5"

    backup = tmp_path / "backup"
    with pytest.raises(_Interrupted):
        _fit_aoa(cloze, epochs=2, backup_dir=backup, callbacks=[_StopAt(1)])
    assert training.completed_epochs(backup) == 1
    resumed = _fit_aoa(cloze, epochs=2, backup_dir=backup)
    assert resumed.history.epoch == [1]
    if KERAS_3:
        # The uninterrupted run's batches and dropout masks (from (seed, epoch)):
        # its weights. tf_keras' dropout draws from its graph's seeds, which start
        # over in the resumed run.
        _assert_same_weights(resumed.model.get_weights(), whole.model.get_weights())
    with pytest.raises(ValueError, match=r"`callbacks` must be a list"):
        _fit_aoa(cloze, callbacks=record)


@pytest.mark.slow
def test_fit_aoa_reader_builds_under_the_strategy_and_policy(cloze):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with pytest.raises(ValueError, match=r"`mixed_precision` must be one of"):
        _fit_aoa(cloze, mixed_precision="float64")
    result = _fit_aoa(
        cloze, strategy=strategy, mixed_precision="mixed_bfloat16", jit_compile=False
    )
    model = result.model
    assert model.distribute_strategy is strategy and _created_under(strategy, model)
    assert model.token_embedding.compute_dtype == "bfloat16"
    assert model.jit_compile is False
    assert keras.mixed_precision.global_policy().name == "float32"
    assert np.isfinite(result.history.history["loss"]).all()
    # A given reader must have been built under them.
    with pytest.raises(ValueError, match=r"`strategy` must be the strategy"):
        _fit_aoa(cloze, model=model, strategy=tf.distribute.get_strategy())
    with pytest.raises(ValueError, match=r"`mixed_precision` must be the policy"):
        _fit_aoa(cloze, model=model, mixed_precision="float32")


# --- fit_ctr_model ---------------------------------------------------------------


@pytest.mark.slow
def test_fit_ctr_model_history_names_the_model_trained():
    import pandas as pd

    from keras_attn.features import infer_features
    from keras_attn.models import build_ctr_model

    df = pd.DataFrame({"city": ["a", "b"] * 16, "click": [1, 0] * 16})
    model = build_ctr_model(infer_features(df, labels=["click"]), ["click"])
    history = fit_ctr_model(model, df, batch_size=16, jit_compile=False, verbose=0)
    # Not the numeric core the helper cut out to train: the model passed in.
    assert history.model is model and len(history.history["loss"]) == 1
