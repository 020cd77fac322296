"""Cloze questions from real documents, and training the Attention-over-Attention
reader on them against the most-frequent-candidate baseline.

The questions are made the way the Children's Book Test (Hill et al. 2016) and the
CNN/Daily Mail sets (Hermann et al. 2015) are made: a sentence of a document is the
query, one content word of it is blanked (every occurrence in the sentence becomes
`PLACEHOLDER`), the document is the sentences around it (never the query sentence
itself), and the candidates are the answer plus `num_candidates - 1` other content
words of that document, shuffled.

- A *content word* is alphabetic, at least `min_word_length` characters long, not an
  English stop word (`STOP_WORDS`) and, when a vocabulary is given, in it (so no
  two candidates collapse into `[UNK]`).
- The answer is a content word of the query sentence that also occurs in the
  document. The distractors are content words of the document that do not occur in
  the query sentence: a candidate still visible in the query could never be the
  answer (all its occurrences are blanked), and the reader would learn that
  artefact instead of reading.
- A question is kept only with exactly `num_candidates` candidates, so chance is
  `1 / num_candidates`.

`most_frequent_candidate` is the baseline (the candidate that occurs most often in
the document), and `encode_cloze` gives the padded arrays of the AoA reader
(`keras_attn.models.AoAReader`; `keras_attn.models.fit_aoa_reader` trains it and
reports test accuracy beside both baselines). `cloze_bert_vocabulary` makes the
cloze vocabulary a word-level BERT vocabulary, so that a `BertBackbone` reads the
same ids (`keras_attn.models.BertClozeReader`) after masked-LM pretraining on the
training documents (`keras_attn.text.pretraining_dataset` with a word `Tokenizer`).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from keras_attn._validation import check_int, check_positive_int
from keras_attn.backend import tf
from keras_attn.text.tokenizers import (
    CLS,
    MASK,
    PAD,
    SEP,
    UNK,
    split_sentences,
    split_words,
)

__all__ = [
    "PLACEHOLDER",
    "STOP_WORDS",
    "ClozeQuestion",
    "build_cloze_vocabulary",
    "cloze_accuracy",
    "cloze_bert_vocabulary",
    "encode_cloze",
    "make_cloze_questions",
    "most_frequent_candidate",
    "tokenize_documents",
]

#: The token that stands for the blanked word in a query (as in the CNN set).
PLACEHOLDER = "@placeholder"

#: English function words never used as answers or candidates.
STOP_WORDS = frozenset(
    """
    a about above after again against all also although am an and any are aren as at
    be because been before being below between both but by can cannot could couldn
    did didn do does doesn doing don down during each either even ever every few for
    from further get gets got had hadn has hasn have haven having he her here hers
    herself him himself his how however i if in into is isn it its itself just let
    like may me might more most much must my myself neither no nor not now of off on
    once one only or other others our ours ourselves out over own same shall she
    should shouldn since so some still such than that the their theirs them
    themselves then there these they this those though through thus to too under
    until up upon us very was wasn we were weren what when where whether which while
    who whom whose why will with within without won would wouldn yet you your yours
    yourself yourselves
    """.split()
)


@dataclass
class ClozeQuestion:
    """One cloze question: tokens of the document and the query, the candidates.

    Attributes:
        document: list of str, the context tokens (the query sentence left out).
        query: list of str, the query sentence with `PLACEHOLDER` for the answer.
        candidates: list of str, shuffled; `candidates[answer]` is the answer.
        answer: int, the index of the answer in `candidates`.
        source: `(document index, sentence index)` the question came from.
        context: the indices of the document's sentences that make `document`.
    """

    document: list[str]
    query: list[str]
    candidates: list[str]
    answer: int
    source: tuple[int, int] = (0, 0)
    context: tuple[int, ...] = ()

    @property
    def answer_word(self) -> str:
        return self.candidates[self.answer]


def tokenize_documents(
    documents: Iterable[str | Sequence[str]], lowercase: bool = True
) -> list[list[list[str]]]:
    """Documents as lists of sentences of words, split as `build_vocabulary` splits.

    Args:
        documents: iterable; each item a str (split into sentences with
            `split_sentences`) or a list of sentence strings (already split, as in
            review_polarity).
        lowercase: bool. As in `split_words`. Defaults to True.

    Returns:
        list (documents) of lists (sentences) of lists of str (words); empty
        sentences are dropped.

    Example:

    >>> tokenize_documents(["The cat sat. The dog ran!"])
    [[['the', 'cat', 'sat', '.'], ['the', 'dog', 'ran', '!']]]
    """
    documents = list(documents)
    sentences, owners = [], []
    raw = [d for d in documents if isinstance(d, str)]
    split = iter(split_sentences(tf.constant(raw, tf.string)).to_list() if raw else [])
    for i, doc in enumerate(documents):
        parts = (
            [s.decode("utf-8") for s in next(split)]
            if isinstance(doc, str)
            else [str(s) for s in doc]
        )
        sentences.extend(parts)
        owners.extend([i] * len(parts))
    result = [[] for _ in documents]
    batch = 4096
    for start in range(0, len(sentences), batch):
        words = split_words(tf.constant(sentences[start : start + batch]), lowercase)
        for owner, sentence in zip(owners[start : start + batch], words.to_list()):
            if sentence:
                result[owner].append([w.decode("utf-8") for w in sentence])
    return result


def build_cloze_vocabulary(
    documents: Iterable[Sequence[Sequence[str]]],
    max_tokens: int | None = None,
    min_count: int = 1,
) -> list[str]:
    """`[PAD]`, `[UNK]`, `PLACEHOLDER`, then the words of tokenized documents by
    frequency (ties alphabetical), as `build_vocabulary` orders them.

    Args:
        documents: the output of `tokenize_documents` for the training documents.
        max_tokens: int. Size including the three special tokens. Defaults to all.
        min_count: int. Minimum count of a kept word. Defaults to 1.

    Returns:
        list of str.

    Example:

    >>> build_cloze_vocabulary([[["b", "a", "b"]], [["c"]]])
    ['[PAD]', '[UNK]', '@placeholder', 'b', 'a', 'c']
    """
    # At least 4: [PAD], [UNK], the placeholder and one word.
    check_int("max_tokens", max_tokens, minimum=4, allow_none=True)
    check_positive_int("min_count", min_count)
    counts = collections.Counter(
        w for doc in documents for sentence in doc for w in sentence
    )
    for special in (PAD, UNK, PLACEHOLDER):
        counts.pop(special, None)
    ranked = sorted(
        (w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w)
    )
    if max_tokens is not None:
        ranked = ranked[: max_tokens - 3]
    return [PAD, UNK, PLACEHOLDER, *ranked]


def cloze_bert_vocabulary(vocabulary: Sequence[str]) -> list[str]:
    """A cloze vocabulary as a word-level BERT vocabulary with the same ids.

    `PLACEHOLDER` becomes `[MASK]` at its id, and `[CLS]` and `[SEP]` come after the
    words, so `encode_cloze` ids are unchanged: a `Tokenizer(method="word")` on
    this vocabulary feeds `pretraining_dataset` (masked LM on the training
    documents), and the blank of a query is then the token that masked-LM
    pretraining taught the encoder to fill in. (No text holds either name:
    `split_words` splits "@" and brackets off as punctuation.)

    Args:
        vocabulary: list of str from `build_cloze_vocabulary`.

    Returns:
        list of str, two longer.

    Example:

    >>> cloze_bert_vocabulary(["[PAD]", "[UNK]", PLACEHOLDER, "cat"])
    ['[PAD]', '[UNK]', '[MASK]', 'cat', '[CLS]', '[SEP]']
    """
    vocabulary = list(vocabulary)
    clashes = sorted({CLS, SEP, MASK} & set(vocabulary))
    if PLACEHOLDER not in vocabulary or clashes:
        raise ValueError(
            f"`vocabulary` must hold {PLACEHOLDER} and none of {CLS}, {SEP}, "
            f"{MASK} (a `build_cloze_vocabulary` list). Received: a vocabulary "
            + (f"holding {clashes}" if clashes else f"without {PLACEHOLDER}")
        )
    return [MASK if w == PLACEHOLDER else w for w in vocabulary] + [CLS, SEP]


def _context(sentences, index, max_sentences, max_tokens):
    """Indices of the sentences nearest to `index` (alternately before and after)
    that fit in `max_tokens`, in document order."""
    chosen, total = [], 0
    for step in range(1, len(sentences)):
        for j in (index - step, index + step):
            if 0 <= j < len(sentences) and len(chosen) < max_sentences:
                if total + len(sentences[j]) <= max_tokens:
                    chosen.append(j)
                    total += len(sentences[j])
    return sorted(chosen)


def make_cloze_questions(
    documents: Sequence[Sequence[Sequence[str]]],
    num_candidates: int = 10,
    questions_per_document: int = 5,
    context_sentences: int = 20,
    max_document_tokens: int = 400,
    min_query_tokens: int = 5,
    max_query_tokens: int = 50,
    min_word_length: int = 3,
    vocabulary: Iterable[str] | None = None,
    stop_words: Iterable[str] = STOP_WORDS,
    seed: int = 0,
) -> list[ClozeQuestion]:
    """Cloze questions from tokenized documents (see the module docstring).

    For each document, up to `questions_per_document` distinct query sentences are
    drawn at random (among those of `min_query_tokens` to `max_query_tokens`
    tokens); the document of a question is up to `context_sentences` sentences
    nearest to the query sentence, at most `max_document_tokens` tokens, in their
    original order. Query sentences with no usable answer, or documents with too
    few distractors, are skipped, so a document may give fewer questions.

    Args:
        documents: the output of `tokenize_documents`.
        num_candidates: int. Candidates per question, the answer included.
            Defaults to 10 (as in CBT).
        questions_per_document: int. Defaults to 5.
        context_sentences: int. Sentences in a question's document. Defaults to 20.
        max_document_tokens: int. Defaults to 400.
        min_query_tokens, max_query_tokens: int. Query sentence lengths kept.
            Default to 5 and 50.
        min_word_length: int. Shortest answer or candidate. Defaults to 3.
        vocabulary: optional iterable of str; answers and candidates must be in it
            (pass the training vocabulary when making test questions).
        stop_words: iterable of str never used as answers or candidates.
            Defaults to `STOP_WORDS`.
        seed: int. The same seed and documents give the same questions.

    Returns:
        list of `ClozeQuestion`.

    Example:

    >>> docs = tokenize_documents(
    ...     ["Alice met Bob in Paris. Bob liked Paris. Alice flew home from Paris."]
    ... )
    >>> q = make_cloze_questions(docs, num_candidates=2, min_query_tokens=3)[0]
    >>> q.answer_word in q.document, PLACEHOLDER in q.query, len(q.candidates)
    (True, True, 2)
    """
    for name in (
        "num_candidates",
        "questions_per_document",
        "context_sentences",
        "max_document_tokens",
        "min_query_tokens",
        "max_query_tokens",
        "min_word_length",
    ):
        check_positive_int(name, locals()[name])
    if num_candidates < 2:
        raise ValueError(
            "`num_candidates` must be at least 2 (the answer and a distractor). "
            f"Received: num_candidates={num_candidates}"
        )
    if max_query_tokens < min_query_tokens:
        raise ValueError(
            "`max_query_tokens` must be at least `min_query_tokens`. Received: "
            f"max_query_tokens={max_query_tokens}, min_query_tokens={min_query_tokens}"
        )
    stop = frozenset(stop_words)
    known = None if vocabulary is None else frozenset(vocabulary)

    def content(word):
        return (
            len(word) >= min_word_length
            and word.isalpha()
            and word not in stop
            and (known is None or word in known)
        )

    rng = np.random.default_rng(seed)
    questions = []
    for doc_index, sentences in enumerate(documents):
        usable = [
            i
            for i, s in enumerate(sentences)
            if min_query_tokens <= len(s) <= max_query_tokens
        ]
        made = 0
        for index in rng.permutation(usable).tolist():
            if made == questions_per_document:
                break
            chosen = _context(sentences, index, context_sentences, max_document_tokens)
            document = [w for j in chosen for w in sentences[j]]
            query_sentence = sentences[index]
            in_document = set(document)
            answers = sorted(
                {w for w in query_sentence if content(w) and w in in_document}
            )
            distractors = sorted(
                {w for w in in_document if content(w)} - set(query_sentence)
            )
            if not answers or len(distractors) < num_candidates - 1:
                continue
            answer = answers[rng.integers(len(answers))]
            picked = rng.choice(len(distractors), num_candidates - 1, replace=False)
            candidates = [answer, *(distractors[k] for k in sorted(picked))]
            order = rng.permutation(num_candidates)
            candidates = [candidates[k] for k in order]
            query = [PLACEHOLDER if w == answer else w for w in query_sentence]
            questions.append(
                ClozeQuestion(
                    document,
                    query,
                    candidates,
                    int(np.flatnonzero(order == 0)[0]),
                    (doc_index, index),
                    tuple(chosen),
                )
            )
            made += 1
    return questions


def most_frequent_candidate(questions: Sequence[ClozeQuestion]) -> np.ndarray:
    """The baseline: for each question, the index of the candidate that occurs most
    often in the document (ties: the first in the shuffled candidate order).

    Returns:
        int array `(questions,)`.

    Example:

    >>> q = ClozeQuestion(["a", "b", "b", "c"], [PLACEHOLDER], ["c", "b", "a"], 0)
    >>> most_frequent_candidate([q]).tolist()
    [1]
    """
    predictions = []
    for q in questions:
        counts = collections.Counter(q.document)
        predictions.append(int(np.argmax([counts[c] for c in q.candidates])))
    return np.array(predictions, "int64")


def cloze_accuracy(predictions, questions: Sequence[ClozeQuestion]) -> float:
    """Fraction of questions whose predicted candidate index is the answer."""
    answers = np.array([q.answer for q in questions])
    predictions = np.asarray(predictions)
    if predictions.shape != answers.shape:
        raise ValueError(
            "`predictions` must hold one index per question. Received: "
            f"predictions.shape={predictions.shape}, questions={len(answers)}"
        )
    return float(np.mean(predictions == answers))


def encode_cloze(
    questions: Sequence[ClozeQuestion],
    vocabulary: Sequence[str],
    document_length: int | None = None,
    query_length: int | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Integer-encodes questions into the padded inputs of `build_aoa_reader`.

    Words missing from `vocabulary` become `[UNK]`; id 0 (`[PAD]`) pads. Documents
    and queries longer than the lengths are truncated at the end (a question's
    answer may then be cut out of its document: pass lengths at least those used in
    `make_cloze_questions`, or leave them None for the longest one).

    Args:
        questions: list of `ClozeQuestion`.
        vocabulary: list of str from `build_cloze_vocabulary` (`[PAD]` at 0).
        document_length, query_length: int. Padded lengths. Default to the longest.

    Returns:
        `(features, answers)`: features `{"document_ids": (n, document_length),
        "query_ids": (n, query_length), "candidate_ids": (n, candidates)}` int32,
        answers int32 `(n,)`.

    Example:

    >>> vocab = ["[PAD]", "[UNK]", "@placeholder", "a", "b"]
    >>> q = ClozeQuestion(["a", "b", "z"], ["@placeholder", "a"], ["b", "a"], 0)
    >>> x, y = encode_cloze([q], vocab, document_length=4)
    >>> x["document_ids"].tolist(), x["query_ids"].tolist(), y.tolist()
    ([[3, 4, 1, 0]], [[2, 3]], [0])
    """
    vocabulary = list(vocabulary)
    if not vocabulary or vocabulary[0] != PAD or UNK not in vocabulary:
        raise ValueError(
            f"`vocabulary` must have {PAD} at id 0 and hold {UNK}. "
            f"Received: vocabulary[:3]={vocabulary[:3]!r}"
        )
    if not questions:
        raise ValueError("`questions` must not be empty. Received: questions=[]")
    ids = {w: i for i, w in enumerate(vocabulary)}
    unk = ids[UNK]

    def pad(rows, length):
        length = length or max(len(r) for r in rows)
        out = np.zeros((len(rows), length), "int32")
        for i, row in enumerate(rows):
            row = [ids.get(w, unk) for w in row[:length]]
            out[i, : len(row)] = row
        return out

    features = {
        "document_ids": pad([q.document for q in questions], document_length),
        "query_ids": pad([q.query for q in questions], query_length),
        "candidate_ids": pad([q.candidates for q in questions], None),
    }
    return features, np.array([q.answer for q in questions], "int32")
