"""Raw-text export for TF Serving, reloaded with TensorFlow + tensorflow-text only."""

import json
import os

import numpy as np
import pytest

from keras_attn.backend import tf
from keras_attn.models.text import (
    build_han_classifier,
    build_text_serving_model,
    build_transformer_classifier,
    compile_text_classifier,
)
from keras_attn.serving import export_text_classifier
from keras_attn.text import SentenceTokenizer, Tokenizer, build_vocabulary
from tests.harness import run_isolated

# Runs in a fresh interpreter that imports TensorFlow and tensorflow-text alone.
_RELOAD = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops
# `import tensorflow` and `import tensorflow_text` themselves pull in parts of keras
# (tf-text's own Keras layers, through tf.keras; under TF_USE_LEGACY_KERAS=1 that is
# tf_keras): what counts is that loading and serving imports nothing more of them.
def _keras():
    return {m for m in sys.modules if m.split(".")[0] in ("keras", "tf_keras")}
baseline = _keras()
export_dir, texts_path = sys.argv[1:3]
texts = json.load(open(texts_path, encoding="utf-8"))
serve = tf.saved_model.load(export_dir).signatures["serving_default"]
out = serve(text=tf.constant(texts))
forbidden = sorted(_keras() - baseline) + sorted(
    m for m in sys.modules if m.split(".")[0] == "keras_attn"
)
print(json.dumps({
    "probabilities": out["probabilities"].numpy().tolist(),
    "label": [v.decode() for v in out["label"].numpy()],
    "inputs": sorted(serve.structured_input_signature[1]),
    "forbidden": forbidden[:5],
}))
"""

TRAIN = [
    "A wonderful, moving film. I loved every minute!",
    "Dull and far too long. I hated it.",
    "这家酒店很好。服务热情！",
    "房间太脏了。不会再来；",
] * 4
LABELS = [1, 0, 1, 0] * 4
LONG = " ".join(["This sentence goes on and on and on and on and on."] * 60)
QUERIES = [
    "A wonderful film!",
    "房间很脏。服务不好！",
    "",
    LONG,
    "Héllo, naïve café? 我们。",
]

# Ops the exports may use from tensorflow-text (both linked into TF Serving 2.20).
TF_TEXT_OPS = {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets"}


def _graph_ops(export_dir):
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    graph = proto.meta_graphs[0].graph_def
    ops = {n.op for n in graph.node}
    for fn in graph.library.function:
        ops |= {n.op for n in fn.node_def}
    return ops


def _train(model, tokenizer):
    compile_text_classifier(model, learning_rate=5e-3)
    y = np.array(LABELS, "int32")
    ds = tf.data.Dataset.from_tensor_slices((TRAIN, y)).batch(8)
    ds = ds.map(lambda t, y: (tokenizer(t), {"probabilities": y, "label": y}))
    model.fit(ds, epochs=2, verbose=0)
    return model


def _models(kind):
    if kind == "han_words":
        tokenizer = SentenceTokenizer(
            build_vocabulary(TRAIN), max_sentences=3, max_words=6
        )
        model = build_han_classifier(
            tokenizer.vocabulary_size,
            2,
            3,
            6,
            embedding_dim=8,
            units=4,
            attention_units=8,
        )
    elif kind == "han_wordpiece":
        tokenizer = SentenceTokenizer(
            "bert-base-chinese", max_sentences=3, max_words=8, method="wordpiece"
        )
        model = build_han_classifier(
            tokenizer.vocabulary_size,
            2,
            3,
            8,
            embedding_dim=8,
            units=4,
            attention_units=8,
            word_encoder="transformer",
        )
    else:
        tokenizer = Tokenizer("bert-base-uncased", sequence_length=16)
        model = build_transformer_classifier(
            tokenizer.vocabulary_size,
            2,
            16,
            hidden_dim=8,
            num_heads=2,
            intermediate_dim=16,
            pooling="cls",
        )
    # One kind is trained first (an export after `fit`, optimizer state and all);
    # for the others the weights as built are as good a test of the export.
    return (_train(model, tokenizer) if kind == "transformer" else model), tokenizer


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["han_words", "han_wordpiece", "transformer"])
def test_raw_text_export_reloads_in_tensorflow_text_only_process(kind, tmp_path):
    model, tokenizer = _models(kind)
    names = ["neg", "pos"]
    serving = build_text_serving_model(model, tokenizer, names)
    expected = serving({"text": tf.constant(QUERIES)})
    # The serving model is the training model behind the tokenizer.
    np.testing.assert_allclose(
        expected["probabilities"],
        model(tokenizer(tf.constant(QUERIES)))["probabilities"],
        atol=1e-6,
    )
    path = export_text_classifier(
        model, tokenizer, tmp_path / "model", version=1, class_names=names
    )
    assert path.name == "1" and (path / "saved_model.pb").exists()
    ops = _graph_ops(str(path))
    assert "RoundRobinTrim" not in ops
    assert {op for op in ops if op.startswith("Fast")} <= TF_TEXT_OPS

    texts_path = tmp_path / "texts.json"
    texts_path.write_text(json.dumps(QUERIES, ensure_ascii=False), encoding="utf-8")
    proc = run_isolated(_RELOAD, str(path), str(texts_path), cwd=tmp_path)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["forbidden"] == [], report
    assert report["inputs"] == ["text"]
    np.testing.assert_allclose(
        report["probabilities"], expected["probabilities"].numpy(), atol=1e-5
    )
    assert report["label"] == [v.decode() for v in expected["label"].numpy()]
    assert len(report["label"]) == len(QUERIES)
