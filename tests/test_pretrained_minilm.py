"""The shipped all-MiniLM-L6-v2 through `BertBackbone.from_pretrained` and
`BertPreprocessor.from_pretrained` against Hugging Face transformers' own results on
16 awkward texts (../shared/data/pretrained/minilm_reference.npz), and its export
reloaded by TensorFlow + tensorflow-text alone."""

import numpy as np
import pytest

from keras_attn.backend import export_saved_model, keras, tf
from keras_attn.models import BertBackbone, BertPreprocessor
from tests.conftest import shared_data
from tests.tf_only import call_in_tensorflow_only_process

LENGTH = 128


@pytest.fixture(scope="module")
def minilm():
    """One backbone and preprocessor for the module (a 22.7M-parameter build)."""
    folder = shared_data("pretrained/all-MiniLM-L6-v2")
    reference = dict(np.load(shared_data("pretrained/minilm_reference.npz")))
    backbone = BertBackbone.from_pretrained(folder, sequence_length=LENGTH)
    preprocessor = BertPreprocessor.from_pretrained(folder, sequence_length=LENGTH)
    texts = [str(t) for t in reference["texts"]]
    inputs = preprocessor(tf.constant(texts))
    outputs = backbone(inputs, training=False)
    return backbone, preprocessor, reference, inputs, outputs


def test_token_ids_are_the_checkpoints_own(minilm):
    _, _, reference, inputs, _ = minilm
    assert reference["token_ids"].shape == (16, LENGTH)
    np.testing.assert_array_equal(inputs["token_ids"], reference["token_ids"])
    np.testing.assert_array_equal(inputs["segment_ids"], reference["segment_ids"])
    np.testing.assert_array_equal(
        inputs["token_ids"].numpy() != 0, reference["attention_mask"].astype(bool)
    )


def test_outputs_match_transformers(minilm):
    _, _, reference, _, outputs = minilm
    real = reference["attention_mask"].astype(bool)
    sequence = outputs["sequence_output"].numpy()
    assert np.abs(sequence - reference["sequence_output"])[real].max() < 1e-4
    pooled = outputs["pooled_output"].numpy()
    assert np.abs(pooled - reference["pooled_output"]).max() < 1e-5
    # sentence-transformers' embedding: the mean over real tokens, L2-normalized.
    mean = (sequence * real[..., None]).sum(1) / real.sum(1, keepdims=True)
    embedding = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    assert np.abs(embedding - reference["sentence_embedding"]).max() < 1e-5


@pytest.mark.slow
def test_export_with_the_preprocessor_reloads_in_tensorflow_text_only(minilm, tmp_path):
    backbone, preprocessor, reference, _, outputs = minilm
    text = keras.Input(shape=(), dtype="string", name="text")
    encoded = backbone(preprocessor(text))
    model = keras.Model(
        text,
        {
            "sequence_output": encoded["sequence_output"],
            "pooled_output": encoded["pooled_output"],
        },
    )
    export_saved_model(model, str(tmp_path / "minilm"))
    texts = np.array([str(t) for t in reference["texts"]])
    served = call_in_tensorflow_only_process(
        str(tmp_path / "minilm"), {"text": texts}, tf_text=True
    )
    np.testing.assert_allclose(
        served["pooled_output"], outputs["pooled_output"], atol=1e-5
    )
    real = reference["attention_mask"].astype(bool)
    np.testing.assert_allclose(
        served["sequence_output"][real],
        outputs["sequence_output"].numpy()[real],
        atol=1e-5,
    )
