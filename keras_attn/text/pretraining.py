"""BERT pretraining examples in `tf.data`: sentence pairs for NSP, dynamic masking.

`pretraining_dataset` turns a plain-text corpus (a list of documents, or a dataset
of strings) into batches for `build_bert_pretrainer`:

1. documents are read in chunks of `documents_per_chunk`; each is split into
   sentences (`split_sentences`) and tokenized (WordPiece or words, as the given
   `Tokenizer`);
2. every run of `2 · sentences_per_segment` consecutive sentences of a document
   gives one pair: segment A is the first `sentences_per_segment` sentences, and
   with probability `next_sentence_rate` segment B is the sentences that follow
   (`is_next = 1`); otherwise B is as many sentences from a random place of another
   document of the chunk (`is_next = 0`);
3. each pair is packed as `[CLS] A [SEP] B [SEP]`, padded to `sequence_length`;
   when too long, the longer segment loses tokens from its end first (BERT's
   `truncate_seq_pair`, without its random choice of end); segment ids are 0 for
   `[CLS] A [SEP]` and 1 for `B [SEP]`;
4. pairs are shuffled and batched, then masked (`mask_tokens`): 15% of the real,
   non-special tokens of each sequence (rounded, at least one, at most
   `max_predictions`) are selected; 80% of those become `[MASK]`, 10% a random
   non-special token, 10% stay. Masking happens in the pipeline, so each of
   `num_epochs` passes masks (and pairs) afresh ("dynamic masking", RoBERTa).

With `sentence_pairs=False` there is no NSP: step 2 cuts each document's tokens
into consecutive windows of `sequence_length - 2` (`pack_document_windows`), packed
`[CLS] window [SEP]` with segment ids 0, and only the masking of step 4 follows
(masked LM alone on single-segment inputs, as RoBERTa pretrains; the input a
document classifier reads).

Layout of an element (`P = max_predictions`, `L = sequence_length`):
`({"token_ids": (B, L), "segment_ids": (B, L), "masked_positions": (B, P)},
{"mlm": (B, P), "nsp": (B,)})`, all int32. `mlm` holds the original ids of the
selected tokens, and 0 (`[PAD]`) in unused slots, whose `masked_positions` are 0:
the MLM weight is `mlm != 0`. Google's BERT uses the same gathered layout.

Everything is core TensorFlow and tensorflow-text ops (stateless random ops, ragged
and string ops, the tokenizer's ops); with the same `seed` the output is the same.
"""

from __future__ import annotations

from collections.abc import Iterable

from keras_attn._validation import (
    check_bool,
    check_int,
    check_positive_int,
    check_rate,
)
from keras_attn.backend import tf
from keras_attn.text.tokenizers import (
    CLS,
    MASK,
    PAD,
    SEP,
    Tokenizer,
    split_sentences,
)

__all__ = [
    "SPECIAL_TOKENS",
    "mask_tokens",
    "pack_document_windows",
    "pack_sentence_pairs",
    "pretraining_dataset",
]

#: The tokens that are never selected for masking (and never drawn as random tokens).
SPECIAL_TOKENS = (PAD, CLS, SEP, MASK)


def _check_masking(mask_rate, mask_token_rate, random_token_rate):
    check_rate("mask_rate", mask_rate, closed=True)
    check_rate("mask_token_rate", mask_token_rate, closed=True)
    check_rate("random_token_rate", random_token_rate, closed=True)
    if mask_token_rate + random_token_rate > 1.0 + 1e-9:
        raise ValueError(
            "`mask_token_rate + random_token_rate` must be at most 1. Received: "
            f"mask_token_rate={mask_token_rate!r}, "
            f"random_token_rate={random_token_rate!r}"
        )


def _as_tokenizer(tokenizer):
    if not isinstance(tokenizer, Tokenizer):
        tokenizer = Tokenizer(tokenizer, method="wordpiece")
    missing = [t for t in SPECIAL_TOKENS if t not in tokenizer.vocabulary]
    if missing:
        raise ValueError(
            f"`tokenizer` must have a vocabulary with {list(SPECIAL_TOKENS)}. "
            f"Received: a vocabulary without {missing}"
        )
    return tokenizer


def _seed(seed, index, salt):
    """A stateless seed `(2,)` for one element and one purpose."""
    index = tf.cast(index, tf.int64)
    return tf.stack([tf.constant(seed, tf.int64), index * 2 + salt])


def pack_sentence_pairs(
    documents,
    tokenizer: Tokenizer,
    sequence_length: int = 128,
    next_sentence_rate: float = 0.5,
    sentences_per_segment: int = 1,
    seed=(0, 0),
):
    """NSP sentence pairs of a batch of documents, packed `[CLS] A [SEP] B [SEP]`.

    One pair per run of `2 · sentences_per_segment` consecutive sentences of a
    document (see the module docstring); a negative B comes from another document
    of the same batch. A batch where no other document has enough sentences gives
    only positives.

    Args:
        documents: string tensor `(documents,)`.
        tokenizer: a `keras_attn.text.Tokenizer` whose vocabulary holds `[CLS]`,
            `[SEP]` and `[MASK]`.
        sequence_length: int. Length of the packed sequences. Defaults to 128.
        next_sentence_rate: float. Probability that B is the true continuation.
            Defaults to 0.5.
        sentences_per_segment: int. Sentences in A and in B. Defaults to 1.
        seed: int tensor `(2,)`, the stateless seed. Defaults to `(0, 0)`.

    Returns:
        dict of int32 tensors: `token_ids` and `segment_ids` `(pairs,
        sequence_length)`, `is_next` `(pairs,)`.
    """
    n = sentences_per_segment
    documents = tf.convert_to_tensor(documents, tf.string)
    ids = tokenizer._ragged_ids(split_sentences(documents))  # (docs, sents, tokens)
    flat = tf.cast(ids.flat_values, tf.int32)
    token_splits = tf.cast(ids.values.row_splits, tf.int32)  # (sents + 1,)
    doc_splits = tf.cast(ids.row_splits, tf.int32)  # (docs + 1,)
    doc_sizes = doc_splits[1:] - doc_splits[:-1]  # (docs,)
    sentence_doc = tf.cast(ids.value_rowids(), tf.int32)  # (sents,)
    local = tf.range(tf.size(sentence_doc)) - tf.gather(doc_splits, sentence_doc)

    # Pair starts: sentences followed by at least 2n - 1 more of their document.
    usable = local + 2 * n <= tf.gather(doc_sizes, sentence_doc)
    starts = tf.boolean_mask(tf.range(tf.size(sentence_doc)), usable)  # (pairs,)
    pair_doc = tf.boolean_mask(sentence_doc, usable)
    pairs = tf.size(starts)

    seeds = tf.random.experimental.stateless_split(seed, 4)
    # Documents a negative B can come from: n sentences or more.
    eligible = doc_sizes >= n
    eligible_docs = tf.cast(tf.where(eligible)[:, 0], tf.int32)
    num_eligible = tf.size(eligible_docs)
    is_next = tf.random.stateless_uniform([pairs], seeds[0]) < next_sentence_rate
    is_next = is_next | (num_eligible < 2)
    # A uniform draw among the other eligible documents: skip the pair's own one.
    own = tf.gather(tf.cumsum(tf.cast(eligible, tf.int32)) - 1, pair_doc)
    draw = tf.random.stateless_uniform(
        [pairs], seeds[1], 0, tf.maximum(num_eligible - 1, 1), dtype=tf.int32
    )
    draw = draw + tf.cast(draw >= own, tf.int32)
    other = tf.gather(eligible_docs, tf.minimum(draw, tf.maximum(num_eligible - 1, 0)))
    other_starts = tf.gather(doc_sizes, other) - n + 1  # choices of start
    offset = tf.cast(
        tf.random.stateless_uniform([pairs], seeds[2])
        * tf.cast(other_starts, tf.float32),
        tf.int32,
    )
    offset = tf.minimum(offset, other_starts - 1)
    random_b = tf.gather(doc_splits, other) + offset
    b_starts = tf.where(is_next, starts + n, random_b)

    a_begin = tf.gather(token_splits, starts)
    a_length = tf.gather(token_splits, starts + n) - a_begin
    b_begin = tf.gather(token_splits, b_starts)
    b_length = tf.gather(token_splits, b_starts + n) - b_begin

    # BERT's truncate_seq_pair: cut the longer segment until the pair fits; on a
    # tie B loses the token, so an odd budget leaves A one token longer.
    budget = sequence_length - 3
    a_keep = tf.minimum(a_length, tf.maximum(budget - b_length, (budget + 1) // 2))
    b_keep = tf.minimum(b_length, budget - a_keep)
    segment_a = tf.gather(flat, tf.ragged.range(a_begin, a_begin + a_keep))
    segment_b = tf.gather(flat, tf.ragged.range(b_begin, b_begin + b_keep))

    ones = tf.ones([pairs, 1], tf.int32)
    cls = tokenizer.token_id(CLS) * ones
    sep = tokenizer.token_id(SEP) * ones
    packed = tf.concat([cls, segment_a, sep, segment_b, sep], axis=1)
    token_ids = packed.to_tensor(0, shape=[None, sequence_length])
    position = tf.range(sequence_length)[None, :]
    segment_ids = (position >= (a_keep + 2)[:, None]) & (
        position < (a_keep + b_keep + 3)[:, None]
    )
    return {
        "token_ids": token_ids,
        "segment_ids": tf.cast(segment_ids, tf.int32),
        "is_next": tf.cast(is_next, tf.int32),
    }


def pack_document_windows(documents, tokenizer: Tokenizer, sequence_length: int = 128):
    """Single-segment MLM sequences of a batch of documents: `[CLS] window [SEP]`.

    Each document's tokens (the whole text, tokenized by `tokenizer`) are cut into
    consecutive windows of `sequence_length - 2` tokens, the last one shorter; each
    is packed `[CLS] window [SEP]` and padded with 0. Every token of a document is
    in exactly one window, windows never cross documents, and an empty document
    gives none. With a WordPiece `Tokenizer`, a document's first window is what the
    tokenizer itself gives for it at `sequence_length`: the input of a classifier
    that reads one segment. These are inputs for masked LM without NSP, close to
    RoBERTa's DOC-SENTENCES (contiguous text of one document, Liu et al. 2019),
    cut at any token rather than at a sentence end.

    Args:
        documents: string tensor `(documents,)`.
        tokenizer: a `keras_attn.text.Tokenizer` whose vocabulary holds `[CLS]`
            and `[SEP]`.
        sequence_length: int, at least 3. Length of the packed sequences.
            Defaults to 128.

    Returns:
        dict of int32 tensors: `token_ids` and `segment_ids` (all 0) `(windows,
        sequence_length)`, and `is_next` `(windows,)`, all 1 (a window has no
        second segment: train with `nsp_weight=0`).

    Example:

    >>> tokenizer = Tokenizer("bert-base-uncased")
    >>> out = pack_document_windows(["one two three four five", ""], tokenizer, 5)
    >>> out["token_ids"].numpy().tolist()  # [CLS] one two three [SEP], [CLS] four ...
    [[101, 2028, 2048, 2093, 102], [101, 2176, 2274, 102, 0]]
    """
    check_int("sequence_length", sequence_length, minimum=3)
    width = sequence_length - 2
    documents = tf.convert_to_tensor(documents, tf.string)
    ids = tokenizer._ragged_ids(documents)  # (docs, tokens)
    flat = tf.cast(ids.flat_values, tf.int32)
    splits = tf.cast(ids.row_splits, tf.int32)  # (docs + 1,)
    counts = (splits[1:] - splits[:-1] + width - 1) // width  # windows per document
    offsets = tf.ragged.range(counts) * width  # (docs, windows)
    doc = tf.cast(offsets.value_rowids(), tf.int32)  # (windows,)
    begin = tf.gather(splits, doc) + offsets.flat_values
    end = tf.minimum(begin + width, tf.gather(splits, doc + 1))
    windows = tf.gather(flat, tf.ragged.range(begin, end))  # (windows, tokens)

    ones = tf.ones([tf.size(begin), 1], tf.int32)
    packed = tf.concat(
        [tokenizer.token_id(CLS) * ones, windows, tokenizer.token_id(SEP) * ones],
        axis=1,
    )
    token_ids = packed.to_tensor(0, shape=[None, sequence_length])
    return {
        "token_ids": token_ids,
        "segment_ids": tf.zeros_like(token_ids),
        "is_next": ones[:, 0],
    }


def mask_tokens(
    token_ids,
    vocabulary_size: int,
    mask_id: int,
    special_ids: Iterable[int],
    max_predictions: int = 20,
    mask_rate: float = 0.15,
    mask_token_rate: float = 0.8,
    random_token_rate: float = 0.1,
    seed=(0, 0),
):
    """BERT's masked-LM corruption of a batch of packed sequences.

    In each row, `round(mask_rate · candidates)` positions (at least one when the
    rate and the candidates are not zero, at most `max_predictions`) are drawn
    without replacement among the candidates: ids that are neither 0 (padding) nor
    in `special_ids`. A selected token becomes `mask_id` with probability
    `mask_token_rate`, a uniformly drawn non-special id with probability
    `random_token_rate`, and stays otherwise.

    Args:
        token_ids: int tensor `(batch, sequence_length)`.
        vocabulary_size: int. Ids are in `[0, vocabulary_size)`.
        mask_id: int. The id of `[MASK]`.
        special_ids: ids never selected nor drawn (e.g. `[CLS]`, `[SEP]`).
        max_predictions: int. Selected positions kept per row. Defaults to 20.
        mask_rate: float in [0, 1]. Defaults to 0.15.
        mask_token_rate: float in [0, 1]. Defaults to 0.8.
        random_token_rate: float in [0, 1]. Defaults to 0.1.
        seed: int tensor `(2,)`, the stateless seed. Defaults to `(0, 0)`.

    Returns:
        `(token_ids, masked_positions, masked_ids)`, int32: the corrupted ids
        `(batch, sequence_length)`, the selected positions `(batch,
        max_predictions)` in increasing order then 0, and their original ids
        (0 in unused slots).

    Example:

    >>> ids = tf.constant([[101, 7, 8, 9, 102, 0]])
    >>> new, positions, labels = mask_tokens(ids, 200, 103, [101, 102], 2, 0.5)
    >>> positions.shape, int(tf.reduce_sum(tf.cast(labels > 0, tf.int32)))
    (TensorShape([1, 2]), 2)
    """
    check_int("vocabulary_size", vocabulary_size, minimum=2)
    check_positive_int("max_predictions", max_predictions)
    _check_masking(mask_rate, mask_token_rate, random_token_rate)
    special = sorted({0, int(mask_id), *(int(i) for i in special_ids)})
    ordinary = [i for i in range(vocabulary_size) if i not in set(special)]
    if not ordinary:
        raise ValueError(
            "`vocabulary_size` must leave ids outside `special_ids`. Received: "
            f"vocabulary_size={vocabulary_size}"
        )

    token_ids = tf.cast(tf.convert_to_tensor(token_ids), tf.int32)
    length = token_ids.shape[-1]
    if length is not None and max_predictions > length:
        raise ValueError(
            "`max_predictions` must be at most the sequence length. Received: "
            f"max_predictions={max_predictions}, sequence length {length}"
        )
    shape = tf.shape(token_ids)
    seeds = tf.random.experimental.stateless_split(seed, 3)
    candidate = tf.reduce_all(
        token_ids[..., None] != tf.constant(special, tf.int32), axis=-1
    )  # (batch, length)
    count = tf.reduce_sum(tf.cast(candidate, tf.float32), axis=-1)
    selected = tf.cast(tf.round(count * mask_rate), tf.int32)
    if mask_rate > 0:
        selected = tf.maximum(selected, tf.cast(count > 0, tf.int32))
    selected = tf.minimum(selected, max_predictions)  # (batch,)

    scores = tf.random.stateless_uniform(shape, seeds[0])
    scores = tf.where(candidate, scores, -1.0)
    _, top = tf.math.top_k(scores, k=max_predictions)  # (batch, P), best first
    used = tf.range(max_predictions)[None, :] < selected[:, None]
    # Sort the used positions in increasing order; unused slots go last, as 0.
    top = tf.sort(tf.where(used, top, shape[1]), axis=-1)
    used = top < shape[1]
    positions = tf.where(used, top, 0)
    labels = tf.where(used, tf.gather(token_ids, positions, batch_dims=1), 0)

    action = tf.random.stateless_uniform(tf.shape(positions), seeds[1])
    random_ids = tf.gather(
        tf.constant(ordinary, tf.int32),
        tf.random.stateless_uniform(
            tf.shape(positions), seeds[2], 0, len(ordinary), dtype=tf.int32
        ),
    )
    replacement = tf.where(
        action < mask_token_rate,
        mask_id,
        tf.where(action < mask_token_rate + random_token_rate, random_ids, labels),
    )
    rows = tf.broadcast_to(tf.range(shape[0])[:, None], tf.shape(positions))
    index = tf.boolean_mask(tf.stack([rows, positions], axis=-1), used)
    corrupted = tf.tensor_scatter_nd_update(
        token_ids, index, tf.boolean_mask(replacement, used)
    )
    return corrupted, positions, labels


def pretraining_dataset(
    corpus,
    tokenizer,
    sequence_length: int = 128,
    batch_size: int = 32,
    max_predictions: int = 20,
    mask_rate: float = 0.15,
    mask_token_rate: float = 0.8,
    random_token_rate: float = 0.1,
    next_sentence_rate: float = 0.5,
    sentences_per_segment: int = 1,
    documents_per_chunk: int = 64,
    shuffle_buffer: int = 1024,
    num_epochs: int | None = 1,
    drop_remainder: bool = False,
    seed: int = 0,
    sentence_pairs: bool = True,
) -> tf.data.Dataset:
    """A `tf.data.Dataset` of BERT pretraining batches (MLM + NSP) from plain text.

    See the module docstring for the steps and the layout of an element.

    Args:
        corpus: list of str (documents) or a `tf.data.Dataset` of scalar strings.
        tokenizer: a `keras_attn.text.Tokenizer` (WordPiece or word level), or a
            vocabulary for a WordPiece one (e.g. `"bert-base-uncased"`). Its
            vocabulary must hold `[PAD]` (id 0), `[CLS]`, `[SEP]` and `[MASK]`.
        sequence_length: int. Packed length, at least 4. Defaults to 128.
        batch_size: int. Defaults to 32.
        max_predictions: int. Masked positions per sequence, at most
            `sequence_length`. Defaults to 20.
        mask_rate: float in [0, 1]. Share of the tokens selected. Defaults to 0.15.
        mask_token_rate: float in [0, 1]. Share of the selected that become
            `[MASK]`. Defaults to 0.8.
        random_token_rate: float in [0, 1]. Share that become a random token.
            Defaults to 0.1.
        next_sentence_rate: float in [0, 1]. Share of true continuations.
            Defaults to 0.5.
        sentences_per_segment: int. Sentences in each segment. Defaults to 1.
        documents_per_chunk: int. Documents tokenized together; negatives come
            from the same chunk. Defaults to 64.
        shuffle_buffer: int. Buffer for shuffling documents and pairs; 0 or 1
            keeps the order. Defaults to 1024.
        num_epochs: int or None. Passes over the corpus (None: forever), each with
            fresh pairs and masks. Defaults to 1.
        drop_remainder: bool. Drop a last, smaller batch. Defaults to False.
        seed: int. Seeds the shuffles, the pairs and the masks. Defaults to 0.
        sentence_pairs: bool. True: NSP sentence pairs, as above. False: masked LM
            alone on `[CLS] window [SEP]` windows of consecutive tokens
            (`pack_document_windows`; `next_sentence_rate` and
            `sentences_per_segment` do not apply, `nsp` is all 1: compile with
            `nsp_weight=0`). Defaults to True.

    Returns:
        A dataset of `(features, labels)` dicts (int32).

    Example:

    >>> docs = ["A first sentence. A second one. A third.", "Other. Text. Here."]
    >>> ds = pretraining_dataset(docs, "bert-base-uncased", sequence_length=16,
    ...                          batch_size=2, max_predictions=3)
    >>> x, y = next(iter(ds))
    >>> x["token_ids"].shape, x["masked_positions"].shape, y["nsp"].shape
    (TensorShape([2, 16]), TensorShape([2, 3]), TensorShape([2]))
    """
    tokenizer = _as_tokenizer(tokenizer)
    check_int("sequence_length", sequence_length, minimum=4)
    for name in ("batch_size", "max_predictions"):
        check_positive_int(name, locals()[name])
    for name in ("sentences_per_segment", "documents_per_chunk"):
        check_positive_int(name, locals()[name])
    check_int("shuffle_buffer", shuffle_buffer, minimum=0)
    if num_epochs is not None:
        check_positive_int("num_epochs", num_epochs)
    if max_predictions > sequence_length:
        raise ValueError(
            "`max_predictions` must be at most `sequence_length`. Received: "
            f"max_predictions={max_predictions}, sequence_length={sequence_length}"
        )
    _check_masking(mask_rate, mask_token_rate, random_token_rate)
    check_rate("next_sentence_rate", next_sentence_rate, closed=True)
    check_int("seed", seed)
    check_bool("sentence_pairs", sentence_pairs)

    if isinstance(corpus, tf.data.Dataset):
        documents = corpus
    else:
        if isinstance(corpus, str):
            raise ValueError(
                "`corpus` must be a list of documents or a dataset of strings. "
                "Received: a single str"
            )
        corpus = [str(doc) for doc in corpus]
        if not corpus:
            raise ValueError("`corpus` must not be empty. Received: corpus=[]")
        documents = tf.data.Dataset.from_tensor_slices(corpus)

    special_ids = [tokenizer.token_id(t) for t in SPECIAL_TOKENS]
    mask_id = tokenizer.token_id(MASK)

    def pairs(index, chunk):
        if not sentence_pairs:
            return pack_document_windows(chunk, tokenizer, sequence_length)
        return pack_sentence_pairs(
            chunk,
            tokenizer,
            sequence_length=sequence_length,
            next_sentence_rate=next_sentence_rate,
            sentences_per_segment=sentences_per_segment,
            seed=_seed(seed, index, 0),
        )

    def mask(index, batch):
        token_ids, positions, labels = mask_tokens(
            batch["token_ids"],
            tokenizer.vocabulary_size,
            mask_id,
            special_ids,
            max_predictions=max_predictions,
            mask_rate=mask_rate,
            mask_token_rate=mask_token_rate,
            random_token_rate=random_token_rate,
            seed=_seed(seed, index, 1),
        )
        features = {
            "token_ids": token_ids,
            "segment_ids": batch["segment_ids"],
            "masked_positions": positions,
        }
        return features, {"mlm": labels, "nsp": batch["is_next"]}

    if shuffle_buffer > 1:
        documents = documents.shuffle(shuffle_buffer, seed=seed)
    documents = documents.repeat(num_epochs) if num_epochs != 1 else documents
    examples = documents.batch(documents_per_chunk).enumerate().map(pairs).unbatch()
    if shuffle_buffer > 1:
        examples = examples.shuffle(shuffle_buffer, seed=seed + 1)
    batches = examples.batch(batch_size, drop_remainder=drop_remainder)
    return batches.enumerate().map(mask).prefetch(tf.data.AUTOTUNE)
