"""`fit_text_classifier(..., model="bert", checkpoint=folder)`: fine-tuning a
pretrained Hugging Face folder (a tiny one written by tests/hf_folders.py) with the
wide part's ensemble, its raw-string export reloaded by TensorFlow +
tensorflow-text alone, `keras-attn train text --checkpoint`, and the errors."""

import numpy as np
import pytest

from keras_attn import models
from keras_attn.backend import tf
from keras_attn.cli.main import main
from keras_attn.models import BertBackbone, BertClassifier
from keras_attn.models import text_classifier as tc
from keras_attn.models.bert_preprocessor import BertPreprocessor
from keras_attn.models.hf_checkpoint import HFCheckpoint
from keras_attn.optimizers import LinearWarmUpDecay
from keras_attn.serving import export, load_serving_fn
from tests import hf_folders
from tests.tf_only import call_in_tensorflow_only_process

# The fit goes through generation-specific code (FusedAdamW, the export): the
# module runs under both generations; the tests of arguments alone do not need to.


def _corpus(n=48, seed=0):
    """Documents of the tiny vocabulary's words: class "a" leans on w0-w9, "b" on
    w10-w19, both draw w20-w29 as noise; 3-6 words each, some upper-cased."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        label = "ab"[i % 2]
        base = 0 if label == "a" else 10
        words = [f"w{base + rng.integers(10)}" for _ in range(rng.integers(2, 5))]
        words += [f"w{20 + rng.integers(10)}" for _ in range(rng.integers(1, 3))]
        rng.shuffle(words)
        texts.append(" ".join(words).upper() if i % 5 == 0 else " ".join(words))
        labels.append(label)
    return texts, labels


TEXTS, LABELS = _corpus()
QUERIES = ["w1 w2 w3", "W12 w15 w27", "w25", "", "w7 w8 w14 w29 w3 w2 w9 w1 w0"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("hf") / "bert"
    weights = hf_folders.write_folder(path, "bert")
    return path, weights


@pytest.fixture(scope="module")
def fitted(folder):
    """One fine-tuning run (1 epoch) with the encoder's outputs recorded right
    after `from_pretrained` built it, before any training step."""
    path, _ = folder
    ids = np.array([[2, 10, 11, 12, 3, 0, 0], [2, 30, 3, 0, 0, 0, 0]], "int32")
    loaded = {}
    original = BertBackbone.from_pretrained.__func__

    def spy(cls, *args, **kwargs):
        backbone = original(cls, *args, **kwargs)
        length = backbone.sequence_length
        padded = np.pad(ids, ((0, 0), (0, length - ids.shape[1])))
        out = backbone(
            {"token_ids": padded, "segment_ids": np.zeros_like(padded)},
            training=False,
        )
        loaded.update(backbone=backbone, ids=padded)
        loaded.update({k: v.numpy() for k, v in out.items()})
        return backbone

    with pytest.MonkeyPatch.context() as m:
        m.setattr(BertBackbone, "from_pretrained", classmethod(spy))
        clf = models.fit_text_classifier(
            TEXTS, LABELS, model="bert", checkpoint=path, epochs=1, batch_size=8
        )
    return clf, loaded


def test_the_checkpoints_weights_are_what_fine_tuning_starts_from(folder, fitted):
    _, weights = folder
    clf, loaded = fitted
    assert clf.model.backbone is loaded["backbone"]
    # Hugging Face's forward pass (NumPy, float64) with the folder's weights.
    expected = hf_folders.forward(
        weights, "bert", loaded["ids"], np.zeros_like(loaded["ids"])
    )
    real = loaded["ids"] != 0
    np.testing.assert_allclose(
        loaded["sequence_output"][real], expected["sequence_output"][real], atol=1e-5
    )
    np.testing.assert_allclose(
        loaded["pooled_output"], expected["pooled_output"], atol=1e-5
    )
    # Training moved the encoder away from the checkpoint.
    after = clf.model.backbone(
        {"token_ids": loaded["ids"], "segment_ids": np.zeros_like(loaded["ids"])},
        training=False,
    )["pooled_output"].numpy()
    assert np.abs(after - loaded["pooled_output"]).max() > 1e-6


def test_fine_tuning_settings_and_the_wide_ensemble(folder, fitted):
    path, _ = folder
    clf, _ = fitted
    assert isinstance(clf.model, BertClassifier)
    assert isinstance(clf.tokenizer, BertPreprocessor)
    s = clf.settings
    assert s["checkpoint"] == str(path) and s["pretraining"] is None
    assert s["truncate"] == tc.FINE_TUNING["truncate"] == clf.tokenizer.truncate
    # One epoch of the training part (the carved documents left out), batches of 8.
    steps = -(-(len(TEXTS) - len(clf.validation_indices)) // 8)
    assert 0 < len(clf.validation_indices) < len(TEXTS) // 5
    assert s["fine_tuning"] == {
        "learning_rate": tc.FINE_TUNING["learning_rate"],
        "weight_decay": tc.FINE_TUNING["weight_decay"],
        "warmup_steps": int(tc.FINE_TUNING["warmup_fraction"] * steps),
        "total_steps": steps,
    }
    assert s["epochs_run"] == 1 and s["vocabulary_size"] == len(hf_folders.VOCAB)
    # The wide part's ensemble, as for the other kinds.
    assert clf.model.wide is not None and s["wide_training"] == "ensemble"
    assert 0.0 <= s["wide_weight"] <= 1.0 and s["wide_refit_documents"] == 48
    assert s["deep_val_accuracy"] is not None and clf.val_accuracy is not None


@pytest.mark.generation_neutral
def test_sequence_length_is_read_off_the_corpus_in_pieces(folder):
    checkpoint = HFCheckpoint(folder[0])
    # Word counts 3..6 (one piece each): the 95th percentile + [CLS] and [SEP].
    counts = [len(t.split()) for t in TEXTS]
    expected = int(np.ceil(np.percentile(counts, 95))) + 2
    assert tc._checkpoint_preprocessor(checkpoint, TEXTS, None, 95).sequence_length == (
        expected
    )
    # At most the checkpoint's 12 positions.
    long = [" ".join(["w1"] * 30)] * 4
    assert tc._checkpoint_preprocessor(checkpoint, long, None, 95).sequence_length == (
        hf_folders.POSITIONS
    )
    assert tc._checkpoint_preprocessor(checkpoint, long, 6, 95).sequence_length == 6
    with pytest.raises(ValueError, match="at most the checkpoint's 12 positions"):
        tc._checkpoint_preprocessor(checkpoint, long, 13, 95)
    # What a long document loses travels to the preprocessor, read off or given.
    for length in (None, 6):
        cut = tc._checkpoint_preprocessor(checkpoint, long, length, 95, "middle")
        assert cut.truncate == "middle"


@pytest.mark.generation_neutral
def test_the_schedule_warms_up_and_decays_linearly():
    schedule = LinearWarmUpDecay(1e-3, warmup_steps=2, total_steps=6)
    rates = [float(schedule(t)) for t in range(8)]
    expected = [0.0, 5e-4, 1e-3, 7.5e-4, 5e-4, 2.5e-4, 0.0, 0.0]
    np.testing.assert_allclose(rates, expected, atol=1e-9)
    again = LinearWarmUpDecay.from_config(schedule.get_config())
    assert float(again(3)) == pytest.approx(7.5e-4)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_export_reloads_in_tensorflow_text_only_with_the_same_probabilities(
    fitted, tmp_path
):
    clf, _ = fitted
    expected = clf.serving_model()({"text": tf.constant(QUERIES)})
    # The serving model is the classifier behind the checkpoint's tokenizer and
    # the n-gram hasher.
    np.testing.assert_allclose(
        expected["probabilities"],
        clf.model(clf.model_inputs(QUERIES))["probabilities"],
        atol=1e-6,
    )
    path = export(clf, tmp_path / "finetuned", version=1, explain=True)
    served = call_in_tensorflow_only_process(
        str(path), {"text": np.array(QUERIES)}, tf_text=True
    )
    np.testing.assert_allclose(
        served["probabilities"], expected["probabilities"].numpy(), atol=1e-5
    )
    assert [v.decode() for v in served["label"]] == clf.predict(QUERIES)
    explained = call_in_tensorflow_only_process(
        str(path), {"text": np.array(QUERIES)}, signature="explain", tf_text=True
    )
    np.testing.assert_allclose(
        explained["probabilities"], expected["probabilities"].numpy(), atol=1e-5
    )
    assert explained["cls_attention"].shape == (
        len(QUERIES),
        hf_folders.HEADS,
        clf.settings["sequence_length"],
    )


def test_a_wide_classifier_refuses_to_save_as_a_hugging_face_folder(fitted, tmp_path):
    clf, _ = fitted
    with pytest.raises(ValueError, match="has a wide part"):
        clf.model.save_pretrained(tmp_path / "out")


@pytest.mark.generation_neutral
@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"model": "han"}, "`checkpoint` needs model='bert'"),
        ({"model": "transformer"}, "`checkpoint` needs model='bert'"),
        ({"pretrain_epochs": 1}, "`pretrain_epochs` cannot be used"),
        ({"vocabulary": "bert-base-uncased"}, "`vocabulary` cannot be used"),
        ({"sequence_length": 40}, "at most the checkpoint's 12 positions"),
        ({"truncate": "start"}, "`truncate` must be one of .'end', 'middle'."),
        ({"model": "han", "checkpoint": None, "truncate": "end"}, "`truncate` needs"),
    ],
)
def test_checkpoint_arguments_are_checked(folder, change, match):
    kwargs = {"model": "bert", "checkpoint": folder[0], **change}
    with pytest.raises(ValueError, match=match):
        models.fit_text_classifier(TEXTS, LABELS, **kwargs)


@pytest.mark.generation_neutral
def test_a_missing_or_unsupported_checkpoint_is_named(tmp_path):
    with pytest.raises(ValueError, match="must be a Hugging Face model folder"):
        models.fit_text_classifier(
            TEXTS, LABELS, model="bert", checkpoint=tmp_path / "absent"
        )
    roberta = tmp_path / "roberta"
    hf_folders.write_folder(roberta, "bert", config_changes={"model_type": "roberta"})
    with pytest.raises(ValueError, match="`model_type` must be one of"):
        models.fit_text_classifier(TEXTS, LABELS, model="bert", checkpoint=roberta)


@pytest.mark.generation_neutral
def test_cli_checkpoint_reaches_the_fit(folder, tmp_path, text_fit_spy, capsys):
    csv = tmp_path / "docs.csv"
    rows = "\n".join(f"{t},{y}" for t, y in zip(TEXTS, LABELS))
    csv.write_text("doc,label\n" + rows, encoding="utf-8")
    received = text_fit_spy
    args = ["train", "text", "--data", str(csv), "--text-column", "doc"]
    args += ["--label-column", "label", "--checkpoint", str(folder[0])]
    assert main(args) == 0
    assert received["model"] == "bert" and received["checkpoint"] == str(folder[0])
    assert received["texts"] == TEXTS
    # Epochs and the rate are the fit's own defaults (FINE_TUNING's).
    assert received["epochs"] is None and received["learning_rate"] is None
    assert received["truncate"] is None
    again = [*args, "--model", "bert", "--epochs", "2", "--truncate", "middle"]
    assert main(again) == 0
    assert received["epochs"] == 2 and received["truncate"] == "middle"
    capsys.readouterr()
    # A usage error: one line on stderr, exit status 2, no fit.
    received.clear()
    assert main([*args, "--model", "han"]) == 2
    assert "--checkpoint needs --model bert" in capsys.readouterr().err
    assert main([*args, "--num-layers", "2", "--vocab", "bert-base-uncased"]) == 2
    err = capsys.readouterr().err
    assert "--vocab, --num-layers cannot be used with --checkpoint" in err
    assert main([*args[:-2], "--truncate", "middle"]) == 2
    assert "--truncate needs --checkpoint" in capsys.readouterr().err
    assert received == {}
    # Without --checkpoint the model is still HAN by default.
    main(args[:-2])
    assert received["model"] == "han" and received["checkpoint"] is None


@pytest.mark.generation_specific
@pytest.mark.slow
def test_cli_fine_tunes_and_exports_raw_strings_in(folder, tmp_path, capsys):
    csv = tmp_path / "docs.csv"
    rows = "\n".join(f"{t},{y}" for t, y in zip(TEXTS, LABELS))
    csv.write_text("doc,label\n" + rows, encoding="utf-8")
    args = ["train", "text", "--data", str(csv), "--text-column", "doc"]
    args += ["--label-column", "label", "--checkpoint", str(folder[0]), "--no-wide"]
    args += ["--epochs", "1", "--batch-size", "8", "--export", str(tmp_path / "exp")]
    assert main([*args, "--version", "1"]) == 0
    out = capsys.readouterr().out
    assert "fine-tuning" in out and "'checkpoint'" in out and "'wide': False" in out
    serve = load_serving_fn(tmp_path / "exp" / "1")
    assert set(serve.structured_input_signature[1]) == {"text"}
    result = serve(text=tf.constant(QUERIES))
    probabilities = result["probabilities"].numpy()
    assert probabilities.shape == (len(QUERIES), 2)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    # The label is the most probable class's name.
    names = np.array(["a", "b"])[probabilities.argmax(-1)]
    assert [v.decode() for v in result["label"].numpy()] == names.tolist()
    graph = (tmp_path / "exp" / "1" / "saved_model.pb").read_bytes()
    assert b"FastWordpieceTokenizeWithOffsets" in graph  # the tokenizer is inside


@pytest.mark.generation_specific
@pytest.mark.slow
def test_a_fine_tuned_classifier_goes_back_to_a_folder_whose_head_is_kept(
    folder, tmp_path
):
    clf = models.fit_text_classifier(
        TEXTS,
        LABELS,
        model="bert",
        checkpoint=folder[0],
        wide=False,
        epochs=1,
        batch_size=8,
    )
    assert clf.model.wide is None
    expected = clf.model(clf.model_inputs(QUERIES))["probabilities"].numpy()
    # The class names become the folder's id2label.
    clf.model.save_pretrained(tmp_path / "tuned", preprocessor=clf.tokenizer)
    checkpoint = HFCheckpoint(tmp_path / "tuned")
    assert checkpoint.head_settings()["class_names"] == ["a", "b"]
    # Fine-tuning that folder again on the same classes starts from its head.
    again = tc._pretrained_classifier(
        checkpoint, ["a", "b"], clf.settings["sequence_length"], False, {}
    )
    inputs = clf.model_inputs(QUERIES)
    np.testing.assert_allclose(
        again(inputs)["probabilities"].numpy(), expected, atol=1e-5
    )
    # Other classes: a new head on the same encoder.
    other = tc._pretrained_classifier(
        HFCheckpoint(tmp_path / "tuned"),
        ["x", "y", "z"],
        clf.settings["sequence_length"],
        False,
        {},
    )
    assert other.num_classes == 3
    np.testing.assert_allclose(
        other.backbone(inputs)["pooled_output"].numpy(),
        clf.model.backbone(inputs)["pooled_output"].numpy(),
        atol=1e-5,
    )
