"""Model classes that keep their settings (functional `keras.Model` subclasses with
their parts as attributes), their `build_*` spellings, and their training helpers."""

from keras_attn._deprecation import moved
from keras_attn.models.aoa import (
    AoAReader,
    AoAReaderResult,
    BertClozeReader,
    build_aoa_reader,
    candidate_crossentropy,
    fit_aoa_reader,
)
from keras_attn.models.bert import (
    BertBackbone,
    BertClassifier,
    bert_checkpoint_map,
    build_bert,
    build_bert_classifier,
    load_bert_checkpoint,
)
from keras_attn.models.bert_preprocessor import BertPreprocessor
from keras_attn.models.bert_pretraining import (
    BertPretrainer,
    MaskedLMAccuracy,
    MaskedLMLoss,
    build_bert_pretrainer,
    compile_bert_pretrainer,
    fit_bert_pretrainer,
)
from keras_attn.models.ctr import (
    MULTITASK,
    CTRModel,
    Task,
    build_ctr_model,
    compile_ctr_model,
    fit_ctr_model,
    gate_weights_model,
    split_ctr_model,
)
from keras_attn.models.han import (
    HANClassifier,
    build_han_classifier,
    han_attention_model,
)
from keras_attn.models.retrieval import (
    HistoryEncoder,
    ItemEncoder,
    SequentialRetrieval,
    build_sequential_retrieval,
    fit_retrieval_model,
    most_popular_scores,
    pack_histories,
    top_k_metrics,
)
from keras_attn.models.seq2seq import (
    SPECIAL_TOKENS,
    Seq2Seq,
    build_character_vocabulary,
    build_seq2seq,
    encode_characters,
    fit_seq2seq,
)
from keras_attn.models.text import (
    build_text_serving_model,
    compile_text_classifier,
    wide_layer,
)
from keras_attn.models.text_classifier import TextClassifier, fit_text_classifier
from keras_attn.models.text_limits import corpus_limits
from keras_attn.models.text_preprocessor import (
    BertTextPreprocessor,
    HANTextPreprocessor,
    TextPreprocessor,
    TransformerTextPreprocessor,
    text_preprocessor,
)
from keras_attn.models.transformer_classifier import (
    TransformerClassifier,
    build_transformer_classifier,
)

__all__ = [
    "AoAReader",
    "AoAReaderResult",
    "BertBackbone",
    "BertClassifier",
    "BertClozeReader",
    "BertPreprocessor",
    "BertPretrainer",
    "BertTextPreprocessor",
    "CTRModel",
    "HANClassifier",
    "HANTextPreprocessor",
    "HistoryEncoder",
    "ItemEncoder",
    "MULTITASK",
    "MaskedLMAccuracy",
    "MaskedLMLoss",
    "SPECIAL_TOKENS",
    "Seq2Seq",
    "SequentialRetrieval",
    "Task",
    "TextClassifier",
    "TextPreprocessor",
    "TransformerClassifier",
    "TransformerTextPreprocessor",
    "bert_checkpoint_map",
    "build_aoa_reader",
    "build_bert",
    "build_bert_classifier",
    "build_bert_pretrainer",
    "build_character_vocabulary",
    "build_ctr_model",
    "build_han_classifier",
    "build_seq2seq",
    "build_sequential_retrieval",
    "build_text_serving_model",
    "build_transformer_classifier",
    "candidate_crossentropy",
    "compile_bert_pretrainer",
    "compile_ctr_model",
    "compile_text_classifier",
    "corpus_limits",
    "encode_characters",
    "fit_aoa_reader",
    "fit_bert_pretrainer",
    "fit_ctr_model",
    "fit_retrieval_model",
    "fit_seq2seq",
    "fit_text_classifier",
    "gate_weights_model",
    "han_attention_model",
    "load_bert_checkpoint",
    "most_popular_scores",
    "pack_histories",
    "split_ctr_model",
    "text_preprocessor",
    "top_k_metrics",
    "wide_layer",
]

__getattr__ = moved(
    __name__,
    {
        "HistoryPooling": "keras_attn.layers.pooling:HistoryPooling",
        "Seq2SeqEncoder": "keras_attn.layers.seq2seq:Seq2SeqEncoder",
        "export_retrieval_index": "keras_attn.serving.retrieval:export_retrieval_index",
        "export_seq2seq": "keras_attn.serving.seq2seq:export_seq2seq",
    },
)
