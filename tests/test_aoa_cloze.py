"""keras_attn.text.cloze: cloze questions from documents, the most-frequent-candidate
baseline, and the AoA reader (keras_attn.models.aoa) trained on real reviews."""

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.models import candidate_crossentropy, fit_aoa_reader
from keras_attn.text.cloze import (
    PLACEHOLDER,
    STOP_WORDS,
    ClozeQuestion,
    build_cloze_vocabulary,
    cloze_accuracy,
    encode_cloze,
    make_cloze_questions,
    most_frequent_candidate,
    tokenize_documents,
)
from keras_attn.text.datasets import load_review_sample

pytestmark = pytest.mark.generation_neutral

STORY = [
    "Alice walked with her dog Rex to the river near the old mill.",
    "The river was cold, so Rex stayed on the bank and barked at ducks.",
    "Alice threw a stick into the river and Rex finally jumped after it.",
    "An old miller watched them from the mill and laughed at the dog.",
    "Later Alice dried Rex with a towel from her basket.",
    "They walked home past the mill as the sun went down over the river.",
]


# Small enough for CI (one epoch of ~40 batches); on held-out reviews the reader
# overfits after a first epoch at this size.
SLOW = dict(
    context_sentences=6, max_document_tokens=100, questions=4, epochs=1, units=32
)


@pytest.fixture(scope="module")
def reviews():
    texts, _ = load_review_sample()
    return tokenize_documents(texts[:40])


def test_tokenize_documents_splits_strings_and_sentence_lists():
    docs = tokenize_documents(["One cat. Two dogs!", ["Already split .", "  "]])
    assert docs == [
        [["one", "cat", "."], ["two", "dogs", "!"]],
        [["already", "split", "."]],
    ]


def test_questions_are_well_formed(reviews):
    vocab = build_cloze_vocabulary(reviews, min_count=2)
    questions = make_cloze_questions(reviews, num_candidates=6, vocabulary=vocab)
    assert len(questions) > 100
    for q in questions:
        sentences = reviews[q.source[0]]
        query_sentence = sentences[q.source[1]]
        answer = q.answer_word
        assert 0 <= q.answer < len(q.candidates) == 6
        assert len(set(q.candidates)) == 6
        assert answer in q.document and answer in query_sentence
        assert all(c in q.document for c in q.candidates)
        assert PLACEHOLDER in q.query and answer not in q.query
        assert q.query == [PLACEHOLDER if w == answer else w for w in query_sentence]
        # Distractors never show in the query (they would be ruled out for free).
        assert not set(q.candidates) & set(q.query)
        for c in q.candidates:
            assert c.isalpha() and len(c) >= 3 and c not in STOP_WORDS and c in vocab
        # The document is other sentences of the review: never the query sentence.
        assert q.source[1] not in q.context
        assert q.document == [w for j in q.context for w in sentences[j]]
        assert len(q.document) <= 400


def test_answer_positions_are_spread(reviews):
    questions = make_cloze_questions(reviews, num_candidates=5)
    counts = np.bincount([q.answer for q in questions], minlength=5)
    # Shuffled: each slot holds the answer about a fifth of the time.
    assert counts.min() > 0.5 * len(questions) / 5


def test_questions_are_deterministic_per_seed(reviews):
    a = make_cloze_questions(reviews, seed=3)
    b = make_cloze_questions(reviews, seed=3)
    c = make_cloze_questions(reviews, seed=4)
    assert a == b
    assert a != c


def test_story_question_by_hand():
    docs = tokenize_documents([" ".join(STORY)])
    questions = make_cloze_questions(
        docs, num_candidates=3, questions_per_document=6, min_query_tokens=3
    )
    assert questions
    for q in questions:
        assert PLACEHOLDER in q.query
        assert q.answer_word in q.document


def test_skips_documents_without_enough_distractors():
    docs = tokenize_documents(["Rex barked loudly today. Rex slept."])
    # "rex" is the only answer, with 3 distractors (barked, loudly, today).
    assert len(make_cloze_questions(docs, num_candidates=4, min_query_tokens=2)) == 1
    assert make_cloze_questions(docs, num_candidates=5, min_query_tokens=2) == []


def test_most_frequent_baseline_by_hand():
    questions = [
        # counts: river 3, mill 2, dog 1 -> "river" (index 1): right.
        ClozeQuestion(
            "river mill dog river mill river".split(),
            [PLACEHOLDER],
            ["mill", "river", "dog"],
            1,
        ),
        # counts: cat 1, hat 2 -> "hat" (index 0): wrong, the answer is "cat".
        ClozeQuestion("cat hat hat".split(), [PLACEHOLDER], ["hat", "cat"], 1),
        # a tie (1, 1): the first candidate, "sun": right.
        ClozeQuestion("sun moon".split(), [PLACEHOLDER], ["sun", "moon"], 0),
    ]
    predictions = most_frequent_candidate(questions)
    assert predictions.tolist() == [1, 0, 0]
    assert cloze_accuracy(predictions, questions) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="predictions"):
        cloze_accuracy([0], questions)


def test_vocabulary_and_encoding():
    docs = [[["b", "a", "b"]], [["c", "b"]]]
    vocab = build_cloze_vocabulary(docs)
    assert vocab == ["[PAD]", "[UNK]", PLACEHOLDER, "b", "a", "c"]
    assert build_cloze_vocabulary(docs, min_count=2) == vocab[:4]
    q = ClozeQuestion(["a", "zzz", "b"], [PLACEHOLDER, "c"], ["b", "a"], 1)
    x, y = encode_cloze([q, q], vocab, document_length=5)
    assert x["document_ids"].tolist() == [[4, 1, 3, 0, 0]] * 2
    assert x["query_ids"].tolist() == [[2, 5]] * 2
    assert x["candidate_ids"].tolist() == [[3, 4]] * 2
    assert y.tolist() == [1, 1]
    with pytest.raises(ValueError, match="vocabulary"):
        encode_cloze([q], ["a", "[UNK]"])
    with pytest.raises(ValueError, match="num_candidates"):
        make_cloze_questions(docs, num_candidates=1)
    with pytest.raises(ValueError, match="max_tokens"):
        build_cloze_vocabulary(docs, max_tokens=2)


def test_candidate_crossentropy_matches_numpy_and_keras():
    rng = np.random.default_rng(0)
    p = rng.random((5, 4)).astype("float32") * 0.2
    y = np.array([0, 3, 1, 2, 2])
    expected = -np.log(p[np.arange(5), y] / p.sum(axis=1))
    got = candidate_crossentropy(tf.constant(y), tf.constant(p)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    keras_loss = keras.losses.sparse_categorical_crossentropy(y, p).numpy()
    np.testing.assert_allclose(got, keras_loss, rtol=1e-4)
    # A padding candidate (mass 0) changes nothing.
    padded = np.concatenate([p, np.zeros((5, 1), "float32")], axis=1)
    np.testing.assert_allclose(
        candidate_crossentropy(tf.constant(y), tf.constant(padded)).numpy(),
        expected,
        rtol=1e-5,
    )
    assert np.isfinite(candidate_crossentropy(tf.constant([0]), tf.zeros((1, 3))))


def _sign_test_z(result_predictions, baseline_predictions, answers):
    """McNemar's z: questions only the reader gets right vs only the baseline."""
    reader_right = result_predictions == answers
    baseline_right = baseline_predictions == answers
    b = int(np.sum(reader_right & ~baseline_right))
    c = int(np.sum(~reader_right & baseline_right))
    return (b - c) / max(1, b + c) ** 0.5, b, c


@pytest.mark.slow
def test_reader_beats_most_frequent_on_held_out_reviews():
    # The shipped reviews, split by document: no test question shares a review
    # with a training question. 320 reviews train; all the others test.
    texts, _ = load_review_sample()
    docs = tokenize_documents(texts)
    order = np.random.default_rng(0).permutation(len(docs))
    train_docs = [docs[i] for i in order[:320]]
    test_docs = [docs[i] for i in order[320:]]
    assert len(test_docs) >= 80
    vocab = build_cloze_vocabulary(train_docs, max_tokens=3000)
    settings = dict(
        num_candidates=10,
        context_sentences=SLOW["context_sentences"],
        max_document_tokens=SLOW["max_document_tokens"],
        vocabulary=vocab,
    )
    train = make_cloze_questions(
        train_docs, questions_per_document=SLOW["questions"], **settings
    )
    test = make_cloze_questions(test_docs, questions_per_document=1, seed=1, **settings)
    result = fit_aoa_reader(
        train,
        test,
        vocab,
        epochs=SLOW["epochs"],
        learning_rate=3e-3,
        embedding_dim=SLOW["units"],
        units=SLOW["units"],
        dropout=0.2,
    )
    answers = np.array([q.answer for q in test])
    baseline = most_frequent_candidate(test)
    assert result.random_accuracy == pytest.approx(0.1)
    assert result.most_frequent_accuracy == cloze_accuracy(baseline, test)
    # The baseline is a real one: well above chance on these questions.
    assert result.most_frequent_accuracy > 0.15
    # Meaningful for the number of questions: McNemar's z of the reader against the
    # baseline over the questions only one of them gets right is above 2 (one-sided
    # p < 0.025), whatever the number of test questions.
    z, only_reader, only_baseline = _sign_test_z(
        result.test_predictions, baseline, answers
    )
    assert result.test_accuracy > result.most_frequent_accuracy
    assert z > 2, (result.summary(), only_reader, only_baseline, len(test))
