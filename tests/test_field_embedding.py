"""FieldEmbedding: per-field lookups, shared table offsets, numeric fields, checks."""

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.layers import FieldEmbedding
from tests.harness import run_layer_test

pytestmark = pytest.mark.generation_neutral

VOCAB = [5, 7, 3]


def _ids(batch=8, seed=0):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, v, size=batch) for v in VOCAB], axis=1)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_harness_separate_tables_with_numeric():
    rng = np.random.default_rng(1)
    run_layer_test(
        FieldEmbedding,
        {"vocabulary_sizes": VOCAB, "embedding_dim": 4, "num_numeric": 2},
        {
            "categorical": _ids(),
            "numeric": rng.normal(size=(8, 2)).astype("float32"),
        },
        expected_output_shape=(8, 5, 4),
        expected_num_trainable_weights=4,
    )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_harness_shared_table_categorical_only():
    run_layer_test(
        FieldEmbedding,
        {
            "vocabulary_sizes": VOCAB,
            "embedding_dim": 6,
            "shared_table": True,
            "embeddings_regularizer": "l2",
        },
        {"categorical": _ids().astype("int32")},
        expected_output_shape=(8, 3, 6),
        expected_num_trainable_weights=1,
        expected_num_losses=1,
    )


def test_golden_separate_tables_and_numeric():
    layer = FieldEmbedding(VOCAB, embedding_dim=3, num_numeric=2)
    ids = _ids(batch=4)
    numeric = np.array([[0.5, -2.0], [0.0, 1.0], [3.0, 0.25], [1.0, 1.0]], "float32")
    layer(ids, numeric=numeric)
    rng = np.random.default_rng(2)
    tables = [rng.normal(size=(v, 3)).astype("float32") for v in VOCAB]
    vectors = rng.normal(size=(2, 3)).astype("float32")
    for var, value in zip(layer.tables, tables):
        var.assign(value)
    layer.numeric_embeddings.assign(vectors)
    got = np.asarray(layer(ids, numeric=numeric))
    # AutoInt: e_i = E_i[x_i] for categorical fields, e_j = x_j v_j for numeric ones.
    expected = np.concatenate(
        [
            np.stack([tables[i][ids[:, i]] for i in range(3)], axis=1),
            numeric[:, :, None] * vectors[None],
        ],
        axis=1,
    )
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_golden_shared_table_offsets():
    layer = FieldEmbedding(VOCAB, embedding_dim=2, shared_table=True)
    ids = np.array([[4, 0, 2], [0, 6, 0]])
    layer(ids)
    table = np.arange(sum(VOCAB) * 2, dtype="float32").reshape(-1, 2)
    layer.tables[0].assign(table)
    got = np.asarray(layer(ids))
    offsets = np.array([0, 5, 12])
    np.testing.assert_array_equal(got, table[ids + offsets])
    # Same id in different fields reads different rows.
    assert not np.array_equal(got[1, 0], got[1, 2])


def test_million_row_vocabulary_uses_gather():
    layer = FieldEmbedding([3_000_000, 10], embedding_dim=2, num_numeric=1)
    ids = np.array([[2_999_999, 9], [0, 0]], "int64")
    out = layer(ids, numeric=np.ones((2, 1), "float32"))
    assert out.shape == (2, 3, 2)
    np.testing.assert_allclose(
        np.asarray(out)[0, 0], np.asarray(layer.tables[0])[2_999_999]
    )


def test_out_of_range_id_raises_naming_the_field():
    layer = FieldEmbedding(VOCAB, embedding_dim=2, shared_table=True)
    with pytest.raises(ValueError, match=r"field 1 takes ids in \[0, 7\)"):
        layer(np.array([[0, 7, 0]]))
    with pytest.raises(ValueError, match=r"categorical\[0, 2\]=-1"):
        layer(np.array([[0, 0, -1]]))

    @tf.function
    def graph_call(ids):
        return layer(ids)

    with pytest.raises(tf.errors.InvalidArgumentError, match="vocabulary_sizes"):
        graph_call(tf.constant([[0, 7, 0]]))


def test_numeric_argument_checks():
    layer = FieldEmbedding(VOCAB, embedding_dim=2, num_numeric=2)
    with pytest.raises(ValueError, match="pass `numeric`"):
        layer(_ids())
    with pytest.raises(ValueError, match=r"numeric.shape=\(8, 2\)"):
        FieldEmbedding(VOCAB, embedding_dim=2)(_ids(), numeric=np.ones((8, 2)))
    with pytest.raises(ValueError, match=r"`categorical` must have shape \(batch, 3\)"):
        FieldEmbedding(VOCAB, embedding_dim=2)(np.zeros((2, 4), "int32"))


@pytest.mark.generation_specific
def test_numeric_fields_only_build_without_categorical():
    # Keras builds from the tensor arguments: `categorical=None` has no shape (a
    # CTR model whose only categorical feature is a history's item calls it so).
    numeric = np.array([[0.5, -2.0], [3.0, 0.25]], "float32")
    eager = FieldEmbedding([], embedding_dim=3, num_numeric=2)
    out = np.asarray(eager(None, numeric))
    vectors = eager.numeric_embeddings.numpy()
    np.testing.assert_allclose(out, numeric[:, :, None] * vectors[None], rtol=1e-6)
    inputs = keras.Input((2,))
    layer = FieldEmbedding([], embedding_dim=3, num_numeric=2)
    model = keras.Model(inputs, layer(None, inputs))
    assert tuple(model.output.shape) == (None, 2, 3)
    assert [tuple(w.shape) for w in layer.weights] == [(2, 3)]
    assert model(numeric).shape == (2, 2, 3)
    with pytest.raises(ValueError, match=r"\(batch, 3\).*Received: categorical=None"):
        FieldEmbedding(VOCAB, embedding_dim=2, num_numeric=2)(None, numeric)


@pytest.mark.generation_specific
def test_mixed_precision_output_dtype():
    keras.mixed_precision.set_global_policy("mixed_float16")
    layer = FieldEmbedding(VOCAB, embedding_dim=2, num_numeric=1)
    out = layer(_ids(), numeric=np.ones((8, 1), "float32"))
    assert out.dtype == tf.float16
    assert layer.tables[0].dtype == tf.float32


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"vocabulary_sizes": [5, 0], "embedding_dim": 2}, "vocabulary_sizes"),
        ({"vocabulary_sizes": 5, "embedding_dim": 2}, "vocabulary_sizes=5"),
        ({"vocabulary_sizes": [5], "embedding_dim": 0}, "embedding_dim=0"),
        (
            {"vocabulary_sizes": [5], "embedding_dim": 2, "num_numeric": -1},
            "num_numeric=-1",
        ),
        ({"vocabulary_sizes": [], "embedding_dim": 2}, "at least one field"),
    ],
)
def test_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FieldEmbedding(**kwargs)
