"""Bad input is a named error (or a documented result), never silently wrong: the
shared checks of `keras_attn._validation`, and each finding they fixed."""

import numpy as np
import pandas as pd
import pytest

from keras_attn import _validation
from keras_attn.backend import tf
from keras_attn.features import CategoricalFeature, NumericFeature, to_dataset
from keras_attn.layers import (
    Attention,
    AttentionOverAttention,
    AttentionScore,
    AttentionSequencePooling,
    ContextAttentionPooling,
    Dice,
    FactorizedEmbedding,
    FeatureCross,
    FieldEmbedding,
    InteractingLayer,
    LocalActivationUnit,
    MMoE,
    MultiHeadAttention,
    MultiHeadSelfAttention,
    PositionEmbedding,
    RelativeMultiHeadAttention,
    SharedTransformerEncoder,
    SinusoidalPositionEncoding,
    TokenMask,
    TransformerEncoderBlock,
)
from keras_attn.models import Task, TextClassifier, build_ctr_model, fit_text_classifier
from keras_attn.models.ctr import fit_ctr_model

pytestmark = pytest.mark.generation_neutral


def _ones(*shape):
    return np.ones(shape, "float32")


# ------------------------------------------------------------- the shared checks


def test_one_message_form():
    cases = [
        (_validation.check_bool, ("flag", "no"), "`flag` must be a bool"),
        (_validation.check_positive_int, ("n", True), "`n` must be a positive int"),
        (_validation.check_int, ("n", 2, 3), "`n` must be an integer >= 3"),
        (_validation.check_rate, ("rate", float("nan")), r"`rate` must be a float"),
        (_validation.check_finite, ("x", float("inf")), "`x` must be a finite"),
        (_validation.check_choice, ("kind", "c", ("a", "b")), "`kind` must be one"),
        (_validation.check_positive_int_list, ("u", []), "`u` must be a non-empty"),
    ]
    for check, args, message in cases:
        with pytest.raises(ValueError, match=message) as info:
            check(*args)
        assert f"Received: {args[0]}={args[1]!r}" in str(info.value)
    assert _validation.check_bool("flag", np.bool_(True)) is True
    assert _validation.check_finite("x", 2, minimum=0, exclusive_minimum=True) == 2
    with pytest.raises(ValueError, match="`x` of numeric feature 'a' must be"):
        _validation.check_finite("x", float("nan"), where="numeric feature 'a'")


def test_min_count_is_one_check_everywhere():
    from keras_attn.text.cloze import build_cloze_vocabulary
    from keras_attn.text.tokenizers import build_vocabulary

    for build in (build_vocabulary, build_cloze_vocabulary):
        with pytest.raises(ValueError, match="`min_count` must be a positive integer"):
            build(["a b"], min_count=True)


@pytest.mark.parametrize(
    "module, function, kwargs, message",
    [
        (
            "keras_attn.serving",
            "predict_file",
            dict(model="m", data="d.csv", batch_size=0),
            "`batch_size` must be a positive integer. Received: batch_size=0",
        ),
        (
            "keras_attn.cluster",
            "fit_with_coordinator",
            dict(
                model=None, loss_fn=None, dataset_fn=None, coordinator=None, steps=True
            ),
            "`steps` must be a positive integer. Received: steps=True",
        ),
        (
            "keras_attn._publish",
            "check_export_target",
            dict(base_dir="x", version=1.0),
            r"`version` must be a non-negative integer or None. Received: version=1\.0",
        ),
    ],
)
def test_int_arguments_go_through_the_shared_check(module, function, kwargs, message):
    # Each was a hand-written check in its module; now _validation's, one message form.
    import importlib

    with pytest.raises(ValueError, match=message):
        getattr(importlib.import_module(module), function)(**kwargs)


# An unknown name is Keras 3's ValueError, a value of the wrong type tf_keras'
# TypeError: under either generation the one message comes.
@pytest.mark.generation_specific
@pytest.mark.parametrize("bad", ["no_such", 5, [1], "dice"])
def test_an_activation_that_keras_cannot_read_is_named(bad):
    with pytest.raises(ValueError) as info:
        _validation.check_activation("g", bad)
    assert str(info.value) == (
        f"`g` must be a Keras activation (a name or a callable). Received: g={bad!r}"
    )
    assert info.value.__cause__ is not None  # Keras' own error stays readable
    if bad != "dice":
        with pytest.raises(ValueError, match='`g` must be "dice" or a Keras'):
            _validation.check_activation("g", bad, extra=("dice",))


def test_the_activation_check_returns_the_function_or_the_extra_name():
    assert _validation.check_activation("g", "dice", extra=("dice",)) == "dice"
    relu = _validation.check_activation("g", "relu")
    np.testing.assert_allclose(relu(tf.constant([-1.0, 2.0])), [0.0, 2.0])
    assert _validation.check_activation("g", tf.tanh) is tf.tanh
    with pytest.raises(ValueError, match="`g` of layer 'x' must be"):
        _validation.check_activation("g", "no_such", where="layer 'x'")


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: MMoE(["a"], num_experts=2, expert_activation="no_such"),
            "`expert_activation` must be a Keras activation (a name or a callable). "
            "Received: expert_activation='no_such'",
        ),
        (
            lambda: FeatureCross(projection_dim=2, activation="no_such"),
            "`activation` must be a Keras activation (a name or a callable). "
            "Received: activation='no_such'",
        ),
        (
            lambda: LocalActivationUnit(activation="no_such"),
            '`activation` must be "dice" or a Keras activation (a name or a '
            "callable). Received: activation='no_such'",
        ),
    ],
)
def test_activation_arguments_go_through_the_shared_check(make, message):
    # MMoE/PLE, FeatureCross and DIN each had a hand-written check (issue 29).
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value) == message


# --------------------------------------------------------- ranks and batch sizes


def test_rank_checks_at_build_name_both_shapes():
    with pytest.raises(ValueError, match=r"`query` must have rank 3.*\(2, 8\)"):
        Attention()(_ones(2, 8), _ones(2, 5, 8))
    with pytest.raises(
        ValueError, match=r"query.shape=\(2, 8\), key.shape=\(2, 5, 8\)"
    ):
        AttentionScore()(_ones(2, 8), _ones(2, 5, 8))


@pytest.mark.parametrize(
    "call",
    [
        lambda: Attention()(_ones(2, 3, 8), _ones(3, 5, 8)),
        lambda: AttentionScore()(_ones(2, 3, 8), _ones(3, 5, 8)),
        lambda: AttentionSequencePooling(hidden_units=[4])(_ones(2, 8), _ones(3, 5, 8)),
        lambda: AttentionOverAttention()(_ones(2, 7, 8), _ones(3, 4, 8)),
        lambda: MultiHeadAttention(2, 4)(_ones(2, 3, 8), _ones(3, 5, 8)),
        lambda: RelativeMultiHeadAttention(2, 4)(_ones(2, 3, 8), memory=_ones(3, 2, 8)),
    ],
    ids=["attention", "score", "din_pooling", "aoa", "multi_head", "relative_memory"],
)
def test_batch_sizes_that_disagree_are_a_named_error(call):
    with pytest.raises(
        ValueError, match=r"must have the same batch size.*\(2, .*\(3, "
    ):
        call()


def test_batch_sizes_known_only_when_run_fail_with_the_message():
    layer = Attention()
    layer(_ones(2, 3, 8), _ones(2, 5, 8))
    spec = tf.TensorSpec([None, None, 8], tf.float32)
    fn = tf.function(layer.call, input_signature=[spec, spec])
    with pytest.raises(tf.errors.InvalidArgumentError, match="same batch size"):
        fn(_ones(2, 3, 8), _ones(3, 5, 8))
    assert fn(_ones(2, 3, 8), _ones(2, 5, 8)).shape == (2, 3, 8)


# ---------------------------------------------------------- bools and floats


@pytest.mark.parametrize(
    "make, arg",
    [
        (lambda v: TransformerEncoderBlock(2, 8, normalize_first=v), "normalize_first"),
        (
            lambda v: SharedTransformerEncoder(2, 2, 8, normalize_first=v),
            "normalize_first",
        ),
        (
            lambda v: AttentionSequencePooling(weight_normalization=v),
            "weight_normalization",
        ),
        (lambda v: InteractingLayer(use_residual=v), "use_residual"),
        (lambda v: InteractingLayer(scaling=v), "scaling"),
        (lambda v: AttentionScore(use_bias=v), "use_bias"),
        (lambda v: Attention(use_bias=v), "use_bias"),
        (lambda v: ContextAttentionPooling(8, use_bias=v), "use_bias"),
        (lambda v: MultiHeadAttention(2, 4, use_bias=v), "use_bias"),
        (lambda v: MultiHeadSelfAttention(2, 4, use_bias=v), "use_bias"),
        (lambda v: RelativeMultiHeadAttention(2, 4, use_bias=v), "use_bias"),
        (lambda v: FactorizedEmbedding(10, 2, 4, use_bias=v), "use_bias"),
        (lambda v: FactorizedEmbedding(10, 2, 4, mask_zero=v), "mask_zero"),
        (lambda v: FieldEmbedding([3], 4, shared_table=v), "shared_table"),
        (lambda v: FieldEmbedding([3], 4, validate_ids=v), "validate_ids"),
        (lambda v: TokenMask(reduce_last=v), "reduce_last"),
    ],
)
@pytest.mark.parametrize("value", ["no", 1, None])
def test_every_boolean_argument_is_checked_as_a_bool(make, arg, value):
    with pytest.raises(ValueError, match=rf"`{arg}` must be a bool.*{arg}="):
        make(value)
    make(False)  # and a real bool is taken


def test_model_builders_check_booleans():
    from keras_attn.models import build_bert, build_transformer_classifier

    specs = [CategoricalFeature("c", ["a", "b"])]
    with pytest.raises(ValueError, match="`shared_table` must be a bool"):
        build_ctr_model(specs, ["y"], shared_table="no")
    with pytest.raises(ValueError, match="`use_residual` must be a bool"):
        build_ctr_model(specs, ["y"], use_residual="no")
    with pytest.raises(ValueError, match="`share_layers` must be a bool"):
        build_transformer_classifier(20, 2, 8, share_layers="yes")
    with pytest.raises(ValueError, match="`share_layers` must be a bool"):
        build_bert(20, sequence_length=8, share_layers="yes")


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize(
    "make, arg",
    [
        (lambda v: SinusoidalPositionEncoding(max_wavelength=v), "max_wavelength"),
        (
            lambda v: RelativeMultiHeadAttention(2, 4, max_wavelength=v),
            "max_wavelength",
        ),
        (lambda v: Dice(epsilon=v), "epsilon"),
        (lambda v: Dice(momentum=v), "momentum"),
        (
            lambda v: MultiHeadAttention(2, 4, disagreement_weight=v),
            "disagreement_weight",
        ),
        (
            lambda v: TransformerEncoderBlock(2, 8, layer_norm_epsilon=v),
            "layer_norm_epsilon",
        ),
        (lambda v: Attention(dropout=v), "dropout"),
        (lambda v: Task("y", loss_weight=v), "loss_weight"),
    ],
)
def test_every_float_argument_is_checked_finite(make, arg, bad):
    with pytest.raises(ValueError, match=rf"`{arg}`.* must be .*Received: {arg}="):
        make(bad)


# ------------------------------------------------------------------- labels


def _frame(labels):
    return pd.DataFrame({"c": ["a", "b"] * (len(labels) // 2), "y": labels})


def test_a_label_without_its_positive_value_names_column_and_values():
    specs = [CategoricalFeature("c", ["a", "b"])]
    task = Task("income", label="y", positive="50000+.")
    df = _frame(["- 50000.", "50000"] * 3)
    with pytest.raises(
        ValueError,
        match=r"Label column 'y' holds no value equal to .*'50000\+\.'.*"
        r"'- 50000\.' \(3\), '50000' \(3\)",
    ):
        to_dataset(df, specs, [task])


def test_a_label_with_one_class_is_an_error_unless_asked():
    specs = [CategoricalFeature("c", ["a", "b"])]
    df = _frame([0, 0, 0, 0])
    with pytest.raises(ValueError, match=r"Label column 'y' holds only one class.*'0'"):
        to_dataset(df, specs, ["y"])
    positive_everywhere = _frame(["yes"] * 4)
    with pytest.raises(ValueError, match="only one class"):
        to_dataset(positive_everywhere, specs, [Task("y", positive="yes")])
    # Evaluating a slice of one class is allowed when asked.
    x, y = next(iter(to_dataset(df, specs, ["y"], check_labels=False)))
    assert y["y"].numpy().tolist() == [[0.0]] * 4


# ------------------------------------------------------------- obscure errors


def test_ctr_batch_size_and_empty_frames_are_named_errors():
    specs = [CategoricalFeature("c", ["a", "b"]), NumericFeature("x", 0.0, 1.0)]
    df = pd.DataFrame({"c": ["a", "b"] * 4, "x": np.arange(8.0), "y": [0, 1] * 4})
    model = build_ctr_model(specs, ["y"], embedding_dim=2, tower_units=(2,))
    with pytest.raises(ValueError, match="`batch_size` must be a positive integer"):
        fit_ctr_model(model, df, batch_size=0)
    with pytest.raises(ValueError, match="`data` must have at least one row"):
        to_dataset(df.iloc[:0], specs)


def test_dice_needs_a_batch_axis():
    with pytest.raises(ValueError, match=r"`inputs` must have rank >= 2.*\(4,\)"):
        Dice()(_ones(4))


def test_dice_with_a_tensor_training_uses_and_updates_batch_statistics():
    x = np.random.default_rng(0).normal(3.0, 2.0, size=(64, 4)).astype("float32")
    layer = Dice(momentum=0.5)
    layer(x)  # built, moving statistics 0 and 1
    reference = Dice(momentum=0.5)
    reference(x)
    expected = reference(x, training=True).numpy()

    @tf.function
    def step(inputs, training):
        return layer(inputs, training=training)

    out = step(tf.constant(x), tf.constant(True)).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    # Moving mean: 0.5 * 0 + 0.5 * batch mean.
    np.testing.assert_allclose(
        layer.moving_mean.numpy(), 0.5 * x.mean(axis=0), rtol=1e-5
    )
    frozen = layer.moving_mean.numpy()
    step(tf.constant(x), tf.constant(False))
    np.testing.assert_array_equal(layer.moving_mean.numpy(), frozen)


def test_text_classifier_inputs():
    classifier = TextClassifier(model=None, tokenizer=None, class_names=["a", "b"])
    assert classifier.predict([]) == []  # documented: empty in, empty out
    with pytest.raises(ValueError, match="`texts` must be a list of strings"):
        classifier.predict("one text")
    with pytest.raises(
        ValueError,
        match="`texts` and `labels` must have the same length.*20 texts and 10 labels",
    ):
        fit_text_classifier(["a b"] * 20, ["x", "y"] * 5)


def test_position_embedding_start_index():
    layer = PositionEmbedding(8)
    with pytest.raises(ValueError, match="`start_index` must be a non-negative"):
        layer(_ones(2, 3, 4), start_index=-1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="`start_index` must be"):
        layer(_ones(2, 3, 4), start_index=tf.constant(-1))
    np.testing.assert_array_equal(
        layer(_ones(1, 2, 4), start_index=tf.constant(3)).numpy()[0],
        layer.position_embeddings.numpy()[3:5],
    )


def test_out_of_range_ids():
    layer = FactorizedEmbedding(10, 2, 4)
    with pytest.raises(ValueError, match=r"`inputs` must hold ids in \[0, 10\).*12"):
        layer(np.array([[1, 12]]))
    fn = tf.function(layer.call)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"ids in \[0, 10\)"):
        fn(tf.constant([[1, -1]]))
    # Without validation a FieldEmbedding gives a zero vector for a bad id.
    fields = FieldEmbedding([3, 5], 4, validate_ids=False)
    out = fields(np.array([[1, 7], [-2, 4]])).numpy()
    table0, table1 = (t.numpy() for t in fields.tables)
    np.testing.assert_array_equal(out[0, 1], np.zeros(4))
    np.testing.assert_array_equal(out[1, 0], np.zeros(4))
    np.testing.assert_array_equal(out[0, 0], table0[1])
    np.testing.assert_array_equal(out[1, 1], table1[4])
    shared = FieldEmbedding([3, 5], 4, validate_ids=False, shared_table=True)
    out = shared(np.array([[3, 0]])).numpy()
    np.testing.assert_array_equal(out[0, 0], np.zeros(4))  # not field 1's row 0


def test_the_mask_helper_is_public_in_backend():
    from keras_attn.backend import as_bool_mask

    assert as_bool_mask(None) is None
    out = as_bool_mask(np.array([[1, 0, 2]], "int32"))
    assert out.dtype == tf.bool and out.numpy().tolist() == [[True, False, True]]
    mask = tf.constant([[True, False]])
    assert as_bool_mask(mask) is mask


def test_a_folder_written_after_training_is_checked_before_it(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(ValueError, match=r"`backup_dir` must be a folder.*is a file"):
        _validation.check_folder("backup_dir", file)
    with pytest.raises(ValueError, match=r"which is under the file '.*file'"):
        _validation.check_folder("x", file / "sub" / "deeper")
    assert _validation.check_folder("x", tmp_path / "new" / "deeper") == tmp_path
    # The text fit pretrains (BERT) and fits its wide part before the deep part's
    # callbacks were made: the folder failed after that work.
    texts, labels = ["a b", "c d"] * 10, ["x", "y"] * 10
    with pytest.raises(ValueError, match=r"`checkpoint_dir` must be a folder"):
        fit_text_classifier(texts, labels, checkpoint_dir=file, epochs=1)
