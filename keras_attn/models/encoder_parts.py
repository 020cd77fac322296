"""The parts every Transformer encoder of keras_attn.models makes the same way: the
token embedding (plain or ALBERT's factorized one) and the stack of blocks (one block
for all depths with ALBERT's sharing)."""

from __future__ import annotations

from keras_attn._validation import (
    check_bool,
    check_divisible,
    check_positive_int,
    check_rate,
)
from keras_attn.backend import keras
from keras_attn.layers.embedding import FactorizedEmbedding
from keras_attn.layers.transformer import TransformerEncoderBlock

__all__ = ["block_input", "cls_attention", "encoder_blocks", "token_embedding"]


def token_embedding(vocabulary_size: int, hidden_dim: int, embedding_dim=None):
    """`Embedding(V, H)`, or `FactorizedEmbedding(V, E, H)` when `embedding_dim`."""
    check_positive_int("vocabulary_size", vocabulary_size)
    check_positive_int("embedding_dim", embedding_dim, allow_none=True)
    if embedding_dim is None:
        return keras.layers.Embedding(
            vocabulary_size, hidden_dim, name="token_embedding"
        )
    return FactorizedEmbedding(
        vocabulary_size, embedding_dim, hidden_dim, name="token_embedding"
    )


def encoder_blocks(settings: dict, intermediate_dropout: float | None = None) -> list:
    """The distinct `TransformerEncoderBlock`s of an encoder's `settings` (its
    constructor's arguments): `num_layers` of them, or one with `share_layers`.

    Reads `num_layers`, `share_layers`, `hidden_dim`, `num_heads`,
    `intermediate_dim` (None: `4 * hidden_dim`), `dropout`, `activation` and
    `layer_norm_epsilon` (1e-5 when absent); block `i` is named
    `transformer_layer_{i}` (the roles of Google's BERT checkpoint).
    `intermediate_dropout` goes to each block (None: `dropout`, PyTorch's layout;
    0.0: BERT's, which has no dropout after the feed-forward activation).
    """
    for name in ("num_layers", "hidden_dim", "num_heads"):
        check_positive_int(name, settings[name])
    hidden_dim, num_heads = settings["hidden_dim"], settings["num_heads"]
    check_positive_int(
        "intermediate_dim", settings["intermediate_dim"], allow_none=True
    )
    check_rate("dropout", settings["dropout"])
    check_divisible("hidden_dim", hidden_dim, "num_heads", num_heads)
    share = check_bool("share_layers", settings["share_layers"])
    return [
        TransformerEncoderBlock(
            num_heads=num_heads,
            intermediate_dim=settings["intermediate_dim"] or 4 * hidden_dim,
            dropout=settings["dropout"],
            activation=settings["activation"],
            layer_norm_epsilon=settings.get("layer_norm_epsilon", 1e-5),
            intermediate_dropout=intermediate_dropout,
            name=f"transformer_layer_{index}",
        )
        for index in range(1 if share else settings["num_layers"])
    ]


def block_input(block):
    """The input tensor of an encoder block called once in its model's graph."""
    x = block.input
    return x[0] if isinstance(x, (list, tuple)) else x  # Keras 3 lists the mask too


def cls_attention(block, x, mask):
    """The `[CLS]` row of `block`'s attention over its input `x` (symbolic or
    eager): `(batch, heads, seq_len)`, zero on padded keys."""
    if block.normalize_first:
        x = block.attention_norm(x)
    _, scores = block.attention(
        x, x, value_mask=mask, return_attention_scores=True
    )  # (batch, heads, seq_len, seq_len)
    return scores[:, :, 0, :]


def cls_explain_model(model, blocks, shared, inputs, mask, outputs: dict):
    """A model on `inputs` to `outputs` and `"cls_attention"` `(batch, heads,
    seq_len)`, the `[CLS]` attention of the last of `blocks` (the Transformer
    classifiers' `explain_model()`; its input, the padding `mask` and `outputs` are
    tensors of `model`'s graph)."""
    if shared:
        raise ValueError(
            f"Model {model.name!r} applies one block at every layer "
            "(`share_layers=True`): its last layer's input is no tensor of its own, "
            "so it has no explain model"
        )
    last = blocks[-1]
    attention = cls_attention(last, block_input(last), mask)
    return keras.Model(
        inputs, {**outputs, "cls_attention": attention}, name=f"{model.name}_explain"
    )
