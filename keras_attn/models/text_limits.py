"""The length limits `fit_text_classifier` reads off its training documents:
`corpus_limits` (sentences, words, the flat sequence and the wide part's n-grams:
a high percentile of each, capped by `LIMIT_CAPS`) and the size of a word
vocabulary built from them."""

from __future__ import annotations

import numpy as np

from keras_attn.backend import tf
from keras_attn.text.ngrams import HashedNgrams
from keras_attn.text.tokenizers import split_sentences, split_words

__all__ = ["LIMIT_CAPS", "corpus_limits"]

#: Upper bounds of the limits `corpus_limits` reads off a corpus (memory and time
#: on a CPU): HAN reads at most `han_tokens` = sentences x words per document.
LIMIT_CAPS = {
    "max_sentences": 48,
    "max_words": 40,
    "han_tokens": 1024,
    "sequence_length": 512,
    "max_ngrams": 4096,
    # "bert" (WordPiece, [CLS] and [SEP] included): a training step of MODEL_DEFAULTS
    # ["bert"] at 512 tokens took 5-7x one at 256 on 2 CPU cores (3.8 s vs 0.55-0.76
    # s, batches of 32).
    "bert_tokens": 256,
}


def corpus_limits(
    texts, percentile: float = 95.0, caps: dict | None = None, batch_size: int = 512
) -> dict:
    """Length limits that fit a corpus: a high percentile of its documents, capped.

    Sentences and words are split as `SentenceTokenizer` and the word tokenizers
    split them (`split_sentences`, `split_words`), n-grams as `HashedNgrams`
    (unigrams and bigrams inside sentences). Each limit is the `percentile` of its
    count over `texts` (per document; words per sentence over all sentences),
    rounded up, at least 1, at most its cap in `caps` (`LIMIT_CAPS` by default). If
    `max_sentences · max_words` exceeds `caps["han_tokens"]`, `max_sentences` is
    lowered to fit (the words of a sentence are kept, later sentences dropped).

    Args:
        texts: list of str, the training documents.
        percentile: float in (0, 100]. Defaults to 95.
        caps: optional dict overriding entries of `LIMIT_CAPS`.
        batch_size: int. Documents split per TensorFlow call. Defaults to 512.

    Returns:
        dict with `max_sentences`, `max_words` (HAN), `sequence_length` (the
        Transformer, words of the flat document) and `max_ngrams` (the wide part).

    Example:

    >>> corpus_limits(["One two. Three.", "Four five six."], percentile=100)
    {'max_sentences': 2, 'max_words': 4, 'sequence_length': 5, 'max_ngrams': 8}
    """
    if (
        isinstance(percentile, bool)
        or not isinstance(percentile, (int, float))
        or not 0 < percentile <= 100
    ):
        raise ValueError(
            f"`percentile` must be a number in (0, 100]. Received: "
            f"percentile={percentile!r}"
        )
    texts = list(texts)
    if not texts:
        raise ValueError("`texts` must not be empty. Received: texts=[]")
    caps = {**LIMIT_CAPS, **(caps or {})}
    sentences, words, flat, ngrams = [], [], [], []
    hasher = HashedNgrams()
    for start in range(0, len(texts), batch_size):
        batch = tf.constant(texts[start : start + batch_size])
        split = split_words(split_sentences(batch))  # (batch, sentences, words)
        sentences.append(split.row_lengths().numpy())
        words.append(split.values.row_lengths().numpy())
        flat.append(split.merge_dims(1, 2).row_lengths().numpy())
        ngrams.append(hasher.ngrams(batch).row_lengths().numpy())

    def pick(counts, cap):
        counts = np.concatenate(counts)
        value = np.percentile(counts, percentile) if counts.size else 1
        return int(min(max(np.ceil(value), 1), cap))

    limits = {
        "max_sentences": pick(sentences, caps["max_sentences"]),
        "max_words": pick(words, caps["max_words"]),
        "sequence_length": pick(flat, caps["sequence_length"]),
        "max_ngrams": pick(ngrams, caps["max_ngrams"]),
    }
    budget = max(caps["han_tokens"] // limits["max_words"], 1)
    limits["max_sentences"] = min(limits["max_sentences"], budget)
    return limits


def _vocabulary_limits(texts) -> tuple[int, int]:
    """`(max_tokens, min_count)` for a corpus: min count 3 from 500k words on.

    ../shared/FINDINGS.md: min count 3 beat 2 for HAN on 1,280 reviews (~1M words);
    a smaller corpus keeps words seen twice.
    """
    total = 0
    for start in range(0, len(texts), 512):
        total += int(
            split_words(tf.constant(texts[start : start + 512])).values.shape[0]
        )
    return 50000, (3 if total >= 500_000 else 2)
