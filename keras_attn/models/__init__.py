"""Model builders returning functional Keras models."""

from keras_attn.models.bert_pretraining import (
    BertPretrainer,
    MaskedLMAccuracy,
    MaskedLMLoss,
    build_bert_classifier,
    build_bert_pretrainer,
    compile_bert_pretrainer,
)
from keras_attn.models.ctr import (
    MULTITASK,
    Task,
    build_ctr_model,
    compile_ctr_model,
    fit_ctr_model,
    gate_weights_model,
    split_ctr_model,
)
from keras_attn.models.text import (
    bert_checkpoint_map,
    build_bert,
    build_han_classifier,
    build_text_serving_model,
    build_transformer_classifier,
    compile_text_classifier,
    export_text_classifier,
    han_attention_model,
    load_bert_checkpoint,
    wide_layer,
)

__all__ = [
    "BertPretrainer",
    "MULTITASK",
    "MaskedLMAccuracy",
    "MaskedLMLoss",
    "Task",
    "bert_checkpoint_map",
    "build_bert",
    "build_bert_classifier",
    "build_bert_pretrainer",
    "build_ctr_model",
    "build_han_classifier",
    "build_text_serving_model",
    "build_transformer_classifier",
    "compile_bert_pretrainer",
    "compile_ctr_model",
    "compile_text_classifier",
    "export_text_classifier",
    "fit_ctr_model",
    "gate_weights_model",
    "han_attention_model",
    "load_bert_checkpoint",
    "split_ctr_model",
    "wide_layer",
]
