"""The cloze readers' dot-product head (the Attention Sum Reader, Kadlec et al. 2016)
and the BERT encoder (`BertClozeReader`): golden values against NumPy, masks, the
word-level BERT vocabulary that masked-LM pretraining and the reader share, and
`fit_aoa_reader` on a pretrained backbone."""

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.models import (
    AoAReader,
    BertBackbone,
    BertClozeReader,
    build_bert_pretrainer,
    fit_aoa_reader,
    fit_bert_pretrainer,
)
from keras_attn.text import Tokenizer, pretraining_dataset
from keras_attn.text.cloze import (
    PLACEHOLDER,
    ClozeQuestion,
    build_cloze_vocabulary,
    cloze_bert_vocabulary,
    encode_cloze,
    make_cloze_questions,
    tokenize_documents,
)
from keras_attn.text.datasets import load_review_sample
from tests.test_aoa import _aoa

pytestmark = pytest.mark.generation_neutral

PLACEHOLDER_ID = 2
# Two questions of 6 positions: padding in the second; the placeholder twice in the
# first query; candidate 9 occurs in neither document, candidate 0 pads.
DOCUMENTS = np.array([[3, 4, 5, 3, 6, 7], [8, 5, 4, 8, 0, 0]], "int32")
QUERIES = np.array([[2, 5, 2, 11, 0, 0], [12, 2, 0, 0, 0, 0]], "int32")
CANDIDATES = np.array([[3, 5, 9, 0], [8, 4, 9, 5]], "int32")


def _feeds(documents=DOCUMENTS, queries=QUERIES, candidates=CANDIDATES):
    return {
        "document_ids": documents,
        "query_ids": queries,
        "candidate_ids": candidates,
    }


def _bert(length=6, seed=0):
    keras.utils.set_random_seed(seed)
    return BertBackbone(
        20, sequence_length=length, hidden_dim=8, num_layers=2, num_heads=2
    )


def _sequence(bert, ids):
    segments = np.zeros_like(ids)
    return bert({"token_ids": ids, "segment_ids": segments})["sequence_output"]


def _dot_scores(d, q, documents, queries):
    """s = softmax(D q) over the real document words, q the mean of the query's
    vectors at the placeholder."""
    s = np.zeros(documents.shape)
    for b in range(len(documents)):
        vector = q[b][queries[b] == PLACEHOLDER_ID].mean(0)
        logits = d[b] @ vector
        real = documents[b] != 0
        e = np.where(real, np.exp(logits - logits[real].max()), 0.0)
        s[b] = e / e.sum()
    return s


def _candidate_sum(s, documents, candidates):
    return np.array(
        [
            [s[b][documents[b] == c].sum() if c else 0.0 for c in candidates[b]]
            for b in range(len(documents))
        ]
    )


def test_bert_dot_head_golden():
    bert = _bert()
    reader = BertClozeReader(bert, head="dot")
    out = reader(_feeds())
    d = np.asarray(_sequence(bert, DOCUMENTS), "float64")
    q = np.asarray(_sequence(bert, QUERIES), "float64")
    s = _dot_scores(d, q, DOCUMENTS, QUERIES)
    expected = _candidate_sum(s, DOCUMENTS, CANDIDATES)
    np.testing.assert_allclose(out["probabilities"].numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(reader.scores_model()(_feeds()).numpy(), s, atol=1e-5)
    np.testing.assert_array_equal(out["label"].numpy(), expected.argmax(-1))
    # A candidate absent from the document, and a padding candidate, get 0.
    assert np.all(out["probabilities"].numpy()[:, 2] == 0)
    assert out["probabilities"].numpy()[0, 3] == 0


def test_bert_aoa_head_golden():
    bert = _bert(seed=1)
    reader = BertClozeReader(bert, head="aoa")
    out = reader(_feeds())
    d = np.asarray(_sequence(bert, DOCUMENTS), "float64")
    q = np.asarray(_sequence(bert, QUERIES), "float64")
    s, _, _ = _aoa(d, q, DOCUMENTS != 0, QUERIES != 0)
    expected = _candidate_sum(s, DOCUMENTS, CANDIDATES)
    np.testing.assert_allclose(out["probabilities"].numpy(), expected, atol=1e-5)
    assert np.all(out["probabilities"].numpy()[:, 2] == 0)


def test_gru_dot_head_golden_and_padding():
    reader = AoAReader(20, embedding_dim=8, units=4, head="dot")
    encodings = keras.Model(
        reader.inputs, [reader.document_encoder.output, reader.query_encoder.output]
    )
    d, q = (np.asarray(t, "float64") for t in encodings(_feeds()))
    expected = _candidate_sum(
        _dot_scores(d, q, DOCUMENTS, QUERIES), DOCUMENTS, CANDIDATES
    )
    probabilities = reader(_feeds())["probabilities"].numpy()
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)
    # More padding after the documents and queries changes nothing.
    padded = reader(
        _feeds(np.pad(DOCUMENTS, ((0, 0), (0, 3))), np.pad(QUERIES, ((0, 0), (0, 2))))
    )
    np.testing.assert_allclose(padded["probabilities"], probabilities, atol=1e-6)


@pytest.mark.parametrize("head", ["aoa", "dot"])
def test_bert_padding_changes_nothing(head):
    # The same encoder with 9 positions (its first 6 position vectors copied):
    # the questions padded to 9 get the same probabilities.
    short, long = _bert(6), _bert(9, seed=5)
    for a, b in zip(short.weights, long.weights):
        value = a.numpy()
        if value.shape != tuple(b.shape):  # the position table
            value = np.concatenate([value, b.numpy()[value.shape[0] :]])
        b.assign(value)
    pad = ((0, 0), (0, 3))
    expected = BertClozeReader(short, head=head)(_feeds())["probabilities"]
    got = BertClozeReader(long, head=head)(
        _feeds(np.pad(DOCUMENTS, pad), np.pad(QUERIES, pad))
    )["probabilities"]
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_bert_reader_shares_one_backbone_and_masks_padding():
    bert = _bert()
    reader = BertClozeReader(bert, head="dot")
    assert reader.backbone is bert
    assert reader.head == "dot" and reader.placeholder_id == PLACEHOLDER_ID
    # One encoder for both texts: its weights once, nothing else is trained.
    assert len(reader.trainable_weights) == len(bert.trainable_weights)
    s = reader.scores_model()(_feeds()).numpy()
    assert np.all(s[1, 4:] == 0)  # the padded document positions
    np.testing.assert_allclose(s.sum(-1), 1.0, atol=1e-5)
    # A query without the placeholder points nowhere: all zeros, not NaN.
    blank = reader(_feeds(queries=np.where(QUERIES == 2, 13, QUERIES)))
    assert np.all(blank["probabilities"].numpy() == 0)


def test_readers_validate_their_arguments():
    bert = _bert()
    with pytest.raises(ValueError, match=r"`head` must be one of.*head='dotty'"):
        BertClozeReader(bert, head="dotty")
    with pytest.raises(ValueError, match=r"`head`.*Received: head='sum'"):
        AoAReader(20, head="sum")
    with pytest.raises(ValueError, match=r"`placeholder_id`.*placeholder_id=0"):
        BertClozeReader(bert, placeholder_id=0)
    with pytest.raises(ValueError, match=r"20 ids\). Received: placeholder_id=20"):
        BertClozeReader(bert, placeholder_id=20)
    with pytest.raises(ValueError, match="`backbone` must be a BertBackbone"):
        BertClozeReader(AoAReader(20, embedding_dim=4, units=2))
    with pytest.raises(ValueError, match="`model` must be an AoAReader or a Bert"):
        fit_aoa_reader([], [], ["[PAD]", "[UNK]"], model=bert)


def test_cloze_bert_vocabulary_keeps_the_cloze_ids():
    docs = tokenize_documents(["The cat sat on the mat. The dog sat by the door."])
    vocab = build_cloze_vocabulary(docs)
    bert_vocab = cloze_bert_vocabulary(vocab)
    assert bert_vocab[:3] == ["[PAD]", "[UNK]", "[MASK]"]
    assert bert_vocab[3:-2] == vocab[3:] and bert_vocab[-2:] == ["[CLS]", "[SEP]"]
    # The word tokenizer that feeds pretraining gives encode_cloze's ids.
    tokenizer = Tokenizer(bert_vocab, sequence_length=8, method="word")
    words = docs[0][0]
    question = ClozeQuestion(list(words), [PLACEHOLDER], words[1:3], 0)
    x, _ = encode_cloze([question], vocab, document_length=8, query_length=8)
    ids = tokenizer(tf.constant([" ".join(words)])).numpy()
    np.testing.assert_array_equal(ids, x["document_ids"])
    assert tokenizer.token_id("[MASK]") == PLACEHOLDER_ID
    with pytest.raises(ValueError, match=f"without {PLACEHOLDER}"):
        cloze_bert_vocabulary(["[PAD]", "[UNK]", "cat"])
    with pytest.raises(ValueError, match=r"holding \['\[MASK\]'\]"):
        cloze_bert_vocabulary([*vocab, "[MASK]"])


@pytest.mark.slow
def test_fit_a_bert_reader_after_masked_lm_pretraining():
    texts, _ = load_review_sample()
    docs = tokenize_documents(texts[:24])
    train_docs, test_docs = docs[:18], docs[18:]
    vocab = build_cloze_vocabulary(train_docs, max_tokens=400)
    settings = dict(
        num_candidates=4, context_sentences=3, max_document_tokens=40, vocabulary=vocab
    )
    train = make_cloze_questions(train_docs, questions_per_document=2, **settings)
    test = make_cloze_questions(test_docs, questions_per_document=2, seed=1, **settings)
    assert len(train) > 10 and len(test) > 3
    length = 50
    keras.utils.set_random_seed(0)
    bert = BertBackbone(
        len(cloze_bert_vocabulary(vocab)),
        sequence_length=length,
        hidden_dim=8,
        num_layers=1,
        num_heads=2,
    )
    # Masked LM on the training documents, through the word tokenizer.
    tokenizer = Tokenizer(
        cloze_bert_vocabulary(vocab), sequence_length=length, method="word"
    )
    data = pretraining_dataset(
        [" ".join(" ".join(s) for s in doc) for doc in train_docs],
        tokenizer,
        sequence_length=length,
        batch_size=8,
        max_predictions=8,
    )
    x, _ = next(iter(data))
    assert set(np.unique(x["token_ids"])) <= set(range(len(tokenizer.vocabulary)))
    before = bert.token_embedding.embeddings.numpy().copy()
    history = fit_bert_pretrainer(build_bert_pretrainer(bert), data.take(2))
    assert np.isfinite(history.history["loss"]).all()
    assert not np.allclose(bert.token_embedding.embeddings.numpy(), before)
    for head in ("aoa", "dot"):
        result = fit_aoa_reader(
            train,
            test,
            vocab,
            epochs=1,
            batch_size=8,
            learning_rate=1e-3,
            model=BertClozeReader(bert, head=head),
        )
        assert result.test_predictions.shape == (len(test),)
        assert 0 <= result.test_accuracy <= 1
        assert np.isfinite(result.history.history["loss"]).all()
    # A backbone too short for the questions is refused, not truncated silently.
    short = BertBackbone(len(tokenizer.vocabulary), sequence_length=8, hidden_dim=8)
    with pytest.raises(ValueError, match=r"sequence_length \(8 tokens\)"):
        fit_aoa_reader(train, test, vocab, model=BertClozeReader(short))
