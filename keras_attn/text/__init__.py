"""Text pipeline on tensorflow-text: tokenizers, sentence splitting, vocabularies."""

from keras_attn.text.cloze import (
    encode_cloze,
    fit_aoa_reader,
    make_cloze_questions,
    most_frequent_candidate,
)
from keras_attn.text.datasets import (
    load_ag_news,
    load_chnsenticorp_htl,
    load_review_polarity,
    load_review_sample,
)
from keras_attn.text.layers import HashedNgrams, NgramLinear
from keras_attn.text.pretraining import (
    mask_tokens,
    pack_sentence_pairs,
    pretraining_dataset,
)
from keras_attn.text.tokenizers import (
    PAD,
    SHIPPED_VOCABULARIES,
    UNK,
    SentenceTokenizer,
    Tokenizer,
    build_vocabulary,
    load_vocabulary,
    split_sentences,
    split_words,
)
from keras_attn.text.train import (
    TextClassifier,
    corpus_limits,
    fit_text_classifier,
    stratified_split,
)

__all__ = [
    "HashedNgrams",
    "NgramLinear",
    "PAD",
    "SHIPPED_VOCABULARIES",
    "UNK",
    "SentenceTokenizer",
    "TextClassifier",
    "Tokenizer",
    "build_vocabulary",
    "corpus_limits",
    "encode_cloze",
    "fit_aoa_reader",
    "fit_text_classifier",
    "load_ag_news",
    "load_chnsenticorp_htl",
    "load_review_polarity",
    "load_review_sample",
    "load_vocabulary",
    "make_cloze_questions",
    "mask_tokens",
    "most_frequent_candidate",
    "pack_sentence_pairs",
    "pretraining_dataset",
    "split_sentences",
    "split_words",
    "stratified_split",
]
