"""keras_attn layers inside a TensorFlow Recommenders ranking model (Keras 2 only)."""

from pathlib import Path

import numpy as np
import pytest

from keras_attn.backend import KERAS_3, keras, tf
from keras_attn.layers import FieldEmbedding, InteractingLayer, MMoE

pytestmark = pytest.mark.skipif(
    KERAS_3,
    reason="tensorflow-recommenders needs Keras 2: run with TF_USE_LEGACY_KERAS=1",
)

FIXTURE = Path(__file__).parent / "fixtures" / "criteo_sample.txt"
NUMERIC = [f"I{i}" for i in range(1, 14)]
CATEGORICAL = [f"C{i}" for i in range(1, 27)]


def _criteo():
    """The fixture's 200 real rows: ids per categorical column (0 = missing), and
    signed log1p of the integer features (0 when missing)."""
    import pandas as pd

    frame = pd.read_csv(FIXTURE)
    ids, vocab = [], []
    for col in CATEGORICAL:
        codes, uniques = pd.factorize(frame[col])
        ids.append(codes + 1)  # factorize gives -1 for NaN
        vocab.append(len(uniques) + 1)
    values = frame[NUMERIC].fillna(0.0).to_numpy("float32")
    features = {
        "categorical": np.stack(ids, axis=1).astype("int64"),
        "numeric": (np.sign(values) * np.log1p(np.abs(values))).astype("float32"),
    }
    labels = frame["label"].to_numpy("float32")[:, None]
    return features, labels, vocab


def _ranking_model(tfrs, vocab):
    categorical = keras.Input((len(CATEGORICAL),), dtype="int64", name="categorical")
    numeric = keras.Input((len(NUMERIC),), name="numeric")
    fields = FieldEmbedding(vocab, embedding_dim=8, num_numeric=len(NUMERIC))(
        categorical, numeric=numeric
    )  # (batch, 39, 8)
    interactions = InteractingLayer(num_heads=2, key_dim=4)(fields)
    flat = keras.layers.Flatten()(interactions)
    crossed = tfrs.layers.dcn.Cross()(flat)
    experts = MMoE(["ctr"], num_experts=2, expert_units=(16,))(crossed)
    logit = keras.layers.Dense(1, name="ctr")(experts["ctr"])
    return keras.Model({"categorical": categorical, "numeric": numeric}, {"ctr": logit})


@pytest.mark.slow
def test_tfrs_ranking_model_trains_saves_and_reloads(tmp_path):
    tfrs = pytest.importorskip("tensorflow_recommenders")

    class CTRModel(tfrs.Model):
        def __init__(self, ranking):
            super().__init__()
            self.ranking = ranking
            self.task = tfrs.tasks.Ranking(
                loss=keras.losses.BinaryCrossentropy(from_logits=True),
                metrics=[keras.metrics.AUC(from_logits=True, name="auc")],
            )

        def call(self, features):
            return self.ranking(features)["ctr"]

        def compute_loss(self, inputs, training=False):
            features, labels = inputs
            logits = self.ranking(features, training=training)["ctr"]
            return self.task(labels=labels, predictions=logits)

    features, labels, vocab = _criteo()
    assert features["categorical"].shape == (200, 26)
    assert 0 < labels.mean() < 1
    ranking = _ranking_model(tfrs, vocab)
    model = CTRModel(ranking)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    data = tf.data.Dataset.from_tensor_slices((features, labels)).batch(50)
    before = [w.numpy().copy() for w in ranking.trainable_weights]
    start = model.evaluate(data, return_dict=True, verbose=0)["loss"]
    history = model.fit(data, epochs=4, verbose=0)  # 16 steps
    assert np.all(np.isfinite(history.history["loss"])), history.history
    metrics = model.evaluate(data, return_dict=True, verbose=0)
    assert metrics["loss"] < start, (start, metrics)
    changed = [
        not np.allclose(b, w.numpy()) for b, w in zip(before, ranking.trainable_weights)
    ]
    assert all(changed), [w.name for w, c in zip(ranking.weights, changed) if not c]
    assert 0.5 < metrics["auc"] <= 1.0  # on its training rows

    expected = model(features).numpy()
    # The ranking model (FieldEmbedding, InteractingLayer, Cross, MMoE) as .keras.
    path = str(tmp_path / "ranking.keras")
    ranking.save(path)
    reloaded = keras.models.load_model(
        path, custom_objects={"Cross": tfrs.layers.dcn.Cross}
    )
    np.testing.assert_allclose(reloaded(features)["ctr"].numpy(), expected, atol=1e-5)
    # The whole tfrs.Model through its weights checkpoint.
    model.save_weights(str(tmp_path / "ckpt"))
    fresh = CTRModel(_ranking_model(tfrs, vocab))
    fresh(features)
    fresh.load_weights(str(tmp_path / "ckpt"))
    np.testing.assert_allclose(fresh(features).numpy(), expected, atol=1e-5)
