"""Text preprocessing on tensorflow-text: tokenizers, sentence splitting, hashed
n-grams, vocabularies, cloze questions, BERT pretraining data, and the shipped text
samples.

Imports no layer and no model (`keras_attn.models` holds the text models and
`fit_text_classifier`; `keras_attn.layers` the layers they are made of).
"""

from keras_attn.text.bert_tokenizer import BertTokenizer, pack_segments
from keras_attn.text.cloze import (
    cloze_bert_vocabulary,
    encode_cloze,
    make_cloze_questions,
    most_frequent_candidate,
)
from keras_attn.text.datasets import (
    load_ag_news,
    load_chnsenticorp_htl,
    load_review_polarity,
    load_review_sample,
    stratified_split,
)
from keras_attn.text.labels import early_stopping_split, text_labels
from keras_attn.text.ngrams import HashedNgrams, NgramVocabulary
from keras_attn.text.pretraining import (
    mask_tokens,
    pack_document_windows,
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

__all__ = [
    "BertTokenizer",
    "HashedNgrams",
    "NgramVocabulary",
    "PAD",
    "SHIPPED_VOCABULARIES",
    "UNK",
    "SentenceTokenizer",
    "Tokenizer",
    "build_vocabulary",
    "cloze_bert_vocabulary",
    "early_stopping_split",
    "encode_cloze",
    "load_ag_news",
    "load_chnsenticorp_htl",
    "load_review_polarity",
    "load_review_sample",
    "load_vocabulary",
    "make_cloze_questions",
    "mask_tokens",
    "most_frequent_candidate",
    "pack_segments",
    "pack_document_windows",
    "pack_sentence_pairs",
    "pretraining_dataset",
    "split_sentences",
    "split_words",
    "stratified_split",
    "text_labels",
]
