"""Model builders returning functional Keras models."""

from keras_attn.models.ctr import (
    MULTITASK,
    Task,
    build_ctr_model,
    compile_ctr_model,
    gate_weights_model,
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
)

__all__ = [
    "MULTITASK",
    "Task",
    "bert_checkpoint_map",
    "build_bert",
    "build_ctr_model",
    "build_han_classifier",
    "build_text_serving_model",
    "build_transformer_classifier",
    "compile_ctr_model",
    "compile_text_classifier",
    "export_text_classifier",
    "gate_weights_model",
    "han_attention_model",
    "load_bert_checkpoint",
]
