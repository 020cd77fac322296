"""`fit_text_classifier(model="bert")`: a BertClassifier on a BertBackbone, masked-LM
pretraining on the training documents only (`pretrain_epochs`), the raw-string
export, and `keras-attn train text --pretrain-epochs`."""

import json

import numpy as np
import pytest

import keras_attn.models.text_deep as text_deep
from keras_attn.backend import tf
from keras_attn.cli import main
from keras_attn.layers import SegmentIds
from keras_attn.models import BertClassifier, fit_text_classifier
from keras_attn.serving import export
from keras_attn.text import Tokenizer
from tests.harness import run_isolated
from tests.test_text_serving import _RELOAD, QUERIES, TF_TEXT_OPS, _graph_ops

pytestmark = pytest.mark.generation_neutral

#: One word a document, each a whole WordPiece of bert-base-uncased: a word of a
#: document carved off for early stopping is in no other document.
MARKERS = (
    "apple river mountain window garden piano castle forest island bridge "
    "tiger violin candle desert rocket pencil harbor jacket lemon engine "
    "monkey helmet carpet wallet ladder mirror pillow turtle saddle blanket "
    "kettle lantern hammer magnet bottle feather orchard glacier canyon meadow"
).split()
GOOD = "a good , fine and lovely film ."
BAD = "a bad , dull and awful film ."
TEXTS = [f"{GOOD if i % 2 else BAD} the {w} scene ." for i, w in enumerate(MARKERS)]
LABELS = ["pos" if i % 2 else "neg" for i in range(len(MARKERS))]
TINY = {
    "model": "bert",
    "epochs": 1,
    "batch_size": 8,
    "sequence_length": 8,  # + [CLS] and [SEP]: 10 pieces, two windows a document
    "hidden_dim": 8,
    "num_layers": 1,
    "num_heads": 2,
}


def _ids(words):
    tokenizer = Tokenizer("bert-base-uncased")
    return [tokenizer.token_id(w) for w in words]


def _weights(model):
    return [w.numpy().copy() for w in model.weights]


def _same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


class _Spies:
    """What `fit_text_classifier` hands to pretraining and to fine-tuning."""

    def __init__(self, monkeypatch):
        self.corpora, self.datasets, self.encoders = [], [], []
        self.before = self.after = self.at_fine_tuning = self.fine_tuned = None
        real_data = text_deep.pretraining_dataset
        real_fit = text_deep.fit_bert_pretrainer
        real_compile = text_deep.compile_text_classifier

        def data(corpus, tokenizer, **kwargs):
            ds = real_data(corpus, tokenizer, **kwargs)
            self.corpora.append(list(corpus))
            self.datasets.append((ds, kwargs))
            return ds

        def fit(model, ds, **kwargs):
            self.before = _weights(model.encoder)
            history = real_fit(model, ds, **kwargs)
            self.after = _weights(model.encoder)
            self.encoders.append(model.encoder)
            self.steps = kwargs["epochs"] * kwargs["steps_per_epoch"]
            return history

        def compile_(model, **kwargs):
            self.fine_tuned = model
            self.at_fine_tuning = _weights(model.backbone)
            return real_compile(model, **kwargs)

        # Patched where the stages look them up (`_pretrain` and `_deep_stage`);
        # the tests assert every spy was called, so a patch elsewhere fails them.
        monkeypatch.setattr(text_deep, "pretraining_dataset", data)
        monkeypatch.setattr(text_deep, "fit_bert_pretrainer", fit)
        monkeypatch.setattr(text_deep, "compile_text_classifier", compile_)

    def assert_called(self, classifier):
        assert self.corpora and self.datasets  # pretraining_dataset
        assert self.encoders == [classifier.model.backbone]  # fit_bert_pretrainer
        assert self.fine_tuned is classifier.model  # compile_text_classifier


@pytest.fixture(scope="module")
def carved():
    """A pretrained and fine-tuned classifier, its early-stopping part carved."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        spies = _Spies(monkeypatch)
        clf = fit_text_classifier(
            TEXTS, LABELS, pretrain_epochs=2, validation_fraction=0.25, **TINY
        )
    return clf, spies


@pytest.mark.slow
def test_pretraining_reads_only_the_training_documents(carved):
    clf, spies = carved
    spies.assert_called(clf)
    carved_off = set(clf.validation_indices.tolist())
    training = [t for i, t in enumerate(TEXTS) if i not in carved_off]
    assert len(carved_off) == 10
    # Every pipeline built (the pass that counts the batches, the stream trained
    # on) reads the training part, and nothing else.
    assert spies.corpora and all(c == training for c in spies.corpora)
    # In the stream itself: the carved documents' words are never a target and
    # never an input outside the masked slots (a random replacement may be any id).
    ds, kwargs = spies.datasets[-1]
    assert kwargs["num_epochs"] is None and kwargs["sentence_pairs"] is False
    targets, inputs = set(), set()
    for x, y in ds.take(spies.steps):
        labels, ids = y["mlm"].numpy(), x["token_ids"].numpy().copy()
        positions = x["masked_positions"].numpy()
        targets |= set(labels[labels != 0].tolist())
        for row in range(len(ids)):
            ids[row, positions[row][labels[row] != 0]] = 0
        inputs |= set(ids[ids != 0].tolist())
    pieces = Tokenizer("bert-base-uncased", sequence_length=64)
    read = set(pieces(tf.constant(training)).numpy().ravel().tolist()) - {0}
    # Targets and inputs are pieces of the training part ([CLS] and [SEP] too).
    assert targets <= read and inputs <= read
    left_out = set(_ids(MARKERS[i] for i in carved_off))
    assert not left_out & read  # so the carved documents' words never come
    # Not vacuous: most training documents' words came in these batches.
    kept = set(_ids(m for i, m in enumerate(MARKERS) if i not in carved_off))
    assert len(kept & (inputs | targets)) >= 20
    p = clf.settings["pretraining"]
    assert p["documents"] == len(training) and p["epochs"] == 2
    # Two windows a document in batches of 8: one pass is 8 batches.
    assert p["steps_per_epoch"] == p["batches_per_pass"] == 8
    assert np.isfinite(p["mlm_loss"]) and 0 <= p["mlm_accuracy"] <= 1
    assert p["seconds"] > 0


@pytest.mark.slow
def test_fine_tuning_starts_from_the_pretrained_encoder(carved):
    clf, spies = carved
    assert isinstance(clf.model, BertClassifier) and spies.fine_tuned is clf.model
    # One encoder object: the pretrainer's is the classifier's backbone.
    assert spies.encoders == [clf.model.backbone]
    assert not _same(spies.before, spies.after)  # pretraining trained it
    assert _same(spies.after, spies.at_fine_tuning)  # and fine-tuning starts there
    assert not _same(spies.at_fine_tuning, _weights(clf.model.backbone))
    assert clf.model.backbone.sequence_length == clf.tokenizer.sequence_length == 10


@pytest.mark.slow
def test_given_validation_texts_are_never_pretrained_on(monkeypatch):
    spies = _Spies(monkeypatch)
    clf = fit_text_classifier(
        TEXTS[:30],
        LABELS[:30],
        validation_texts=TEXTS[30:],
        validation_labels=LABELS[30:],
        pretrain_epochs=1,
        pretrain_steps=1,
        **TINY,
    )
    assert clf.validation_indices is None
    spies.assert_called(clf)
    assert spies.corpora == [TEXTS[:30]]  # no counting pass with pretrain_steps
    assert clf.settings["pretraining"]["steps_per_epoch"] == 1
    assert clf.settings["pretraining"]["batches_per_pass"] is None


@pytest.mark.generation_specific
@pytest.mark.slow
def test_bert_export_takes_raw_strings_and_reloads_with_tf_text_only(carved, tmp_path):
    clf = carved[0]
    expected = clf.serving_model()({"text": tf.constant(QUERIES)})
    # The serving model is the classifier behind the tokenizer and zero segments.
    np.testing.assert_allclose(
        expected["probabilities"],
        clf.model(clf.model_inputs(QUERIES))["probabilities"],
        atol=1e-6,
    )
    assert clf.predict(QUERIES) == [v.decode() for v in expected["label"].numpy()]
    path = export(clf, tmp_path / "bert", version=1, explain=True)
    assert {op for op in _graph_ops(str(path)) if op.startswith("Fast")} <= (
        TF_TEXT_OPS
    )
    texts_path = tmp_path / "texts.json"
    texts_path.write_text(json.dumps(QUERIES, ensure_ascii=False), encoding="utf-8")
    report = json.loads(
        run_isolated(_RELOAD, str(path), str(texts_path), cwd=tmp_path)
        .stdout.strip()
        .splitlines()[-1]
    )
    assert report["forbidden"] == [] and report["inputs"] == ["text"]
    np.testing.assert_allclose(
        report["probabilities"], expected["probabilities"].numpy(), atol=1e-5
    )
    assert report["label"] == clf.predict(QUERIES)
    # The explain signature: the same probabilities, and the [CLS] token's
    # attention in the last layer over the real pieces only.
    out = tf.saved_model.load(str(path)).signatures["explain"](
        text=tf.constant(QUERIES)
    )
    np.testing.assert_allclose(
        out["probabilities"], expected["probabilities"], atol=1e-6
    )
    attention = out["cls_attention"].numpy()  # (batch, heads, sequence_length)
    assert attention.shape == (len(QUERIES), 2, 10)
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
    padded = np.broadcast_to(
        (clf.tokenizer(tf.constant(QUERIES)).numpy() == 0)[:, None], attention.shape
    )
    assert padded.any() and np.all(attention[padded] < 1e-6)


def test_segment_ids_are_zeros_like_the_token_ids():
    ids = np.array([[101, 7592, 102, 0], [101, 102, 0, 0]], "int32")
    out = SegmentIds()(ids)
    assert out.dtype == tf.int32 and out.numpy().tolist() == [[0] * 4] * 2
    assert SegmentIds.from_config(SegmentIds().get_config()).trainable is False


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"pretrain_epochs": -1}, "pretrain_epochs"),
        ({"pretrain_epochs": 1.5}, "pretrain_epochs"),
        ({"pretrain_epochs": True}, "pretrain_epochs"),
        ({"pretrain_epochs": 1, "model": "han"}, "pretrain_epochs"),
        ({"pretrain_epochs": 1, "model": "transformer"}, "pretrain_epochs"),
        ({"pretrain_epochs": 1, "pretrain_steps": 0}, "pretrain_steps"),
        ({"pretrain_steps": 3}, "pretrain_steps"),
        ({"wide": True}, "wide"),
    ],
)
def test_pretraining_arguments_are_checked(kwargs, match):
    kwargs = {"model": "bert", **kwargs}
    with pytest.raises(ValueError, match=match):
        fit_text_classifier(TEXTS, LABELS, **kwargs)


def test_cli_pretrain_epochs_reaches_the_fit(tmp_path, text_fit_spy, capsys):
    csv = tmp_path / "reviews.csv"
    rows = "\n".join(f'"{t}",{y}' for t, y in zip(TEXTS, LABELS))
    csv.write_text("review,label\n" + rows, encoding="utf-8")
    received = text_fit_spy
    args = ["train", "text", "--data", str(csv), "--text-column", "review"]
    args += ["--label-column", "label", "--model", "bert"]
    assert main([*args, "--pretrain-epochs", "3", "--pretrain-steps", "5"]) == 0
    assert received["model"] == "bert" and received["texts"] == TEXTS
    assert (received["pretrain_epochs"], received["pretrain_steps"]) == (3, 5)
    assert main(args) == 0
    assert (received["pretrain_epochs"], received["pretrain_steps"]) == (0, None)
    # A usage error: one line on stderr and exit status 2 (issue 28).
    capsys.readouterr()
    assert main([*args, "--pretrain-steps", "5"]) == 2
    assert "--pretrain-steps needs --pretrain-epochs" in capsys.readouterr().err
    args[args.index("bert")] = "han"
    assert main([*args, "--pretrain-epochs", "1"]) == 2
    assert "--pretrain-epochs needs --model bert" in capsys.readouterr().err
