"""build_bert and load_bert_checkpoint on a checkpoint in Google's BERT layout."""

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.models import bert_checkpoint_map, build_bert, load_bert_checkpoint
from tests.test_transformer import _torch_encoder_layer

pytestmark = pytest.mark.generation_neutral

V, P, H, INTER, LAYERS, HEADS = 23, 10, 8, 16, 2, 2


def _google_shapes():
    """The variable shapes of the original BERT release (modeling.py)."""
    e = "bert/embeddings"
    shapes = {
        f"{e}/word_embeddings": (V, H),
        f"{e}/token_type_embeddings": (2, H),
        f"{e}/position_embeddings": (P, H),
        f"{e}/LayerNorm/gamma": (H,),
        f"{e}/LayerNorm/beta": (H,),
        "bert/pooler/dense/kernel": (H, H),
        "bert/pooler/dense/bias": (H,),
        # The pretraining heads: in the file, not part of the encoder.
        "cls/predictions/output_bias": (V,),
        "cls/seq_relationship/output_weights": (2, H),
    }
    for i in range(LAYERS):
        layer = f"bert/encoder/layer_{i}"
        for part in ("query", "key", "value"):
            shapes[f"{layer}/attention/self/{part}/kernel"] = (H, H)
            shapes[f"{layer}/attention/self/{part}/bias"] = (H,)
        for sub, inp, out in (
            ("attention/output/dense", H, H),
            ("intermediate/dense", H, INTER),
            ("output/dense", INTER, H),
        ):
            shapes[f"{layer}/{sub}/kernel"] = (inp, out)
            shapes[f"{layer}/{sub}/bias"] = (out,)
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[f"{layer}/{norm}/gamma"] = (H,)
            shapes[f"{layer}/{norm}/beta"] = (H,)
    return shapes


def _write_v1_checkpoint(path):
    """Writes random values with a TF1 Saver, as Google's release was written."""
    rng = np.random.default_rng(0)
    values = {
        n: rng.normal(size=s).astype("float32") for n, s in _google_shapes().items()
    }
    graph = tf.Graph()
    with graph.as_default():
        variables = [
            tf.compat.v1.Variable(v, name=n, dtype=tf.float32)
            for n, v in values.items()
        ]
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            prefix = saver.save(sess, str(path))
    return prefix, values


def _bert(**kwargs):
    return build_bert(
        V,
        sequence_length=P,
        hidden_dim=H,
        num_layers=LAYERS,
        num_heads=HEADS,
        intermediate_dim=INTER,
        **kwargs,
    )


def test_every_checkpoint_weight_lands_where_it_should(tmp_path):
    prefix, values = _write_v1_checkpoint(tmp_path / "bert_model.ckpt")
    assert "bert/encoder/layer_0/attention/self/query/kernel" in dict(
        tf.train.list_variables(prefix)
    )
    model = _bert()
    loaded = load_bert_checkpoint(model, prefix)
    encoder_names = {n for n in values if n.startswith("bert/")}
    assert set(loaded) == encoder_names
    # Every model weight got exactly one checkpoint variable.
    mapping = bert_checkpoint_map(model)
    assert len({id(v) for v in mapping.values()}) == len(model.weights)
    block = model.transformer_layers[1]
    # The per-head layout (hidden, heads, head_dim) is the (hidden, hidden) kernel.
    np.testing.assert_array_equal(
        block.attention.query_dense.kernel.numpy().reshape(H, H),
        values["bert/encoder/layer_1/attention/self/query/kernel"],
    )
    np.testing.assert_array_equal(
        block.attention.output_dense.kernel.numpy().reshape(H, H),
        values["bert/encoder/layer_1/attention/output/dense/kernel"],
    )
    np.testing.assert_array_equal(
        block.feedforward.output_dense.kernel.numpy(),
        values["bert/encoder/layer_1/output/dense/kernel"],
    )
    np.testing.assert_array_equal(
        model.position_embedding.position_embeddings.numpy(),
        values["bert/embeddings/position_embeddings"],
    )
    # The embeddings output is LayerNorm(word + segment + position), checked in NumPy.
    ids = np.array([[5, 7, 0]], "int32")
    emb = (
        values["bert/embeddings/word_embeddings"][ids[0]]
        + values["bert/embeddings/token_type_embeddings"][0]
        + values["bert/embeddings/position_embeddings"][:3]
    )
    mean, var = emb.mean(-1, keepdims=True), emb.var(-1, keepdims=True)
    expected = (emb - mean) / np.sqrt(var + 1e-12) * values[
        "bert/embeddings/LayerNorm/gamma"
    ] + values["bert/embeddings/LayerNorm/beta"]
    probe = keras.Model(model.inputs, model.embeddings_norm.output)
    padded = np.zeros((1, P), "int32")
    padded[0, :3] = ids
    got = probe({"token_ids": padded, "segment_ids": np.zeros_like(padded)})
    np.testing.assert_allclose(np.asarray(got)[0, :3], expected, atol=1e-5)


def test_loaded_layer_matches_google_bert_layer_in_numpy(tmp_path):
    """A layer of the loaded model against BERT's layer written out in NumPy, with
    the tanh GELU of Google's modeling.py and its LayerNorm epsilon 1e-12."""
    prefix, _ = _write_v1_checkpoint(tmp_path / "bert_model.ckpt")
    model = _bert(dropout=0.0)
    load_bert_checkpoint(model, prefix)
    block = model.transformer_layers[0]
    assert block.activation == "gelu_approximate"
    probe = keras.Model(
        model.inputs,
        [model.embeddings_norm.output, block.output],
    )
    ids = np.zeros((2, P), "int32")
    ids[0, :6], ids[1, :3] = [1, 5, 7, 2, 9, 3], [4, 8, 2]
    embeddings, got = probe({"token_ids": ids, "segment_ids": np.zeros_like(ids)})
    expected = _torch_encoder_layer(
        block, np.asarray(embeddings, "float64"), key_padding=ids == 0, eps=1e-12
    )
    np.testing.assert_allclose(np.asarray(got), expected, atol=1e-4, rtol=1e-4)


def test_missing_variable_and_factorized_model_raise(tmp_path):
    prefix, _ = _write_v1_checkpoint(tmp_path / "bert_model.ckpt")
    with pytest.raises(ValueError, match="lacks"):
        load_bert_checkpoint(_bert(), prefix, prefix="albert")
    with pytest.raises(ValueError, match="FactorizedEmbedding"):
        load_bert_checkpoint(_bert(embedding_dim=4), prefix)


def test_bert_sharing_has_one_block_of_weights():
    unshared, shared = _bert(), _bert(share_layers=True)
    block = unshared.transformer_layers[0].count_params()
    assert unshared.count_params() - shared.count_params() == (LAYERS - 1) * block
    ids = np.ones((2, P), "int32")
    out = shared({"token_ids": ids, "segment_ids": np.zeros_like(ids)})
    assert out["pooled_output"].shape == (2, H)
