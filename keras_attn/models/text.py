"""Document classifiers: HAN and the Transformer classifier, and their serving models.

Every classifier takes token ids (what `keras_attn.text` tokenizers produce in
`tf.data`; with `wide=...` also the hashed n-gram ids of `HashedNgrams`, as the
inputs `{"token_ids", "ngram_ids"}`) and returns
`{"probabilities": (batch, num_classes), "label": (batch,)}`.
`build_text_serving_model` puts the tokenizer in front, so the exported model takes
a batch of raw strings; `export_text_classifier` writes it for TF Serving.
"""

from __future__ import annotations

from keras_attn._validation import (
    check_bool,
    check_choice,
    check_divisible,
    check_finite,
    check_int,
    check_positive_int,
    check_rate,
)
from keras_attn.backend import keras, tf
from keras_attn.layers.aoa import AttentionOverAttention
from keras_attn.layers.attention import ContextAttentionPooling
from keras_attn.layers.embedding import FactorizedEmbedding
from keras_attn.layers.position import PositionEmbedding, SinusoidalPositionEncoding
from keras_attn.layers.transformer import TransformerEncoderBlock
from keras_attn.text.layers import (
    CandidateSum,
    NgramLinear,
    PerSentence,
    PredictedLabel,
    SequencePooling,
    TokenMask,
)

__all__ = [
    "TRANSFORMER_POOLINGS",
    "WORD_ENCODERS",
    "bert_checkpoint_map",
    "build_aoa_reader",
    "build_bert",
    "build_han_classifier",
    "build_text_serving_model",
    "build_transformer_classifier",
    "compile_text_classifier",
    "export_text_classifier",
    "han_attention_model",
    "load_bert_checkpoint",
    "wide_layer",
]

WORD_ENCODERS = ("gru", "transformer")
TRANSFORMER_POOLINGS = ("cls", "mean", "attention", "layer_mean")
POSITIONS = ("sinusoidal", "learned")


def _heads(num_classes, class_names):
    probabilities = keras.layers.Dense(
        num_classes, activation="softmax", dtype="float32", name="probabilities"
    )
    return probabilities, PredictedLabel(class_names, name="label")


def _wide_layers(wide, num_classes, class_names):
    """The head's layers by name: plain softmax, or deep + wide logits then softmax.

    `wide` is False/None (no wide part), True (`NgramLinear`'s defaults) or a dict
    of `NgramLinear` keyword arguments (`num_buckets`, `combiner`, `dropout`,
    `ngram_widths`, `max_ngrams`, `lowercase`).
    """
    if wide is None or wide is False:
        probabilities, label = _heads(num_classes, class_names)
        return {"probabilities": probabilities}, label
    if wide is True:
        wide = {}
    if not isinstance(wide, dict):
        raise ValueError(
            "`wide` must be a bool or a dict of NgramLinear arguments. "
            f"Received: wide={wide!r}"
        )
    layers = {
        # float32 logits, as the plain head's softmax is float32.
        "deep_logits": keras.layers.Dense(
            num_classes, dtype="float32", name="deep_logits"
        ),
        "wide": NgramLinear(num_classes, dtype="float32", name="wide", **wide),
        "logits": keras.layers.Add(dtype="float32", name="logits"),
        "probabilities": keras.layers.Activation(
            "softmax", dtype="float32", name="probabilities"
        ),
    }
    return layers, PredictedLabel(class_names, name="label")


def _head_apply(get, features, ngram_ids):
    """Probabilities from the pooled features (and the n-gram ids when wide)."""
    if ngram_ids is None:
        return get("probabilities")(features)
    logits = get("logits")([get("deep_logits")(features), get("wide")(ngram_ids)])
    return get("probabilities")(logits)


def _classifier_inputs(token_shape, wide_layer):
    """`token_ids` alone, or `{"token_ids", "ngram_ids"}` with a wide part."""
    ids = keras.Input(shape=token_shape, dtype="int32", name="token_ids")
    if wide_layer is None:
        return ids, ids, None
    ngram_ids = keras.Input(
        shape=(wide_layer.max_ngrams,), dtype="int32", name="ngram_ids"
    )
    return {"token_ids": ids, "ngram_ids": ngram_ids}, ids, ngram_ids


def wide_layer(model):
    """The `NgramLinear` wide part of a classifier, or None without one."""
    for layer in model.layers:
        if isinstance(layer, NgramLinear):
            return layer
    return None


def _han_apply(get, ids, word_encoder, ngram_ids=None):
    """Runs HAN's layers (looked up by name through `get`) on `ids`.

    Masks are passed explicitly (not through Keras mask propagation), so both Keras
    generations see the same graph. Returns the document probabilities and both
    levels of attention weights.
    """
    word_mask = get("word_mask")(ids)  # (batch, sentences, words)
    sentence_mask = get("sentence_mask")(ids)  # (batch, sentences)
    x = get("embedding")(ids)  # (batch, sentences, words, embedding_dim)
    x = get("embedding_dropout")(x)
    if word_encoder == "transformer":
        x = get("word_position_add")([x, get("word_positions")(x)])
    x = get("word_encoder")(x, mask=word_mask)  # (batch, sentences, words, dim)
    sentences, word_weights = get("word_attention")(
        x, mask=word_mask, return_attention_scores=True
    )
    sentences = get("sentence_encoder")(sentences, mask=sentence_mask)
    document, sentence_weights = get("sentence_attention")(
        sentences, mask=sentence_mask, return_attention_scores=True
    )
    document = get("document_dropout")(document)
    return _head_apply(get, document, ngram_ids), word_weights, sentence_weights


def build_han_classifier(
    vocabulary_size: int,
    num_classes: int,
    max_sentences: int | None = None,
    max_words: int | None = None,
    embedding_dim: int = 100,
    units: int = 50,
    attention_units: int = 100,
    word_encoder: str = "gru",
    num_heads: int = 2,
    intermediate_dim: int | None = None,
    dropout: float = 0.5,
    embedding_dropout: float = 0.25,
    class_names: list[str] | None = None,
    wide: bool | dict = False,
    name: str = "han_classifier",
):
    """Hierarchical Attention Network for document classification.

    ids `(batch, sentences, words)` -> word embeddings -> word encoder (bidirectional
    GRU of `units` per direction, as in the paper, or a `TransformerEncoderBlock` with
    sinusoidal positions) -> word attention (a learned context vector) -> sentence
    vectors -> bidirectional GRU sentence encoder -> sentence attention -> document
    vector -> softmax. Id 0 is padding: padded words and empty sentences are masked
    everywhere. `han_attention_model(model)` gives both levels of attention weights.

    Paper: "Hierarchical Attention Networks for Document Classification", Yang et
    al., NAACL 2016.

    Args:
        vocabulary_size: int. Number of token ids (id 0 is padding).
        num_classes: int. Number of classes.
        max_sentences: int. Static sentence axis, or None. Defaults to None.
        max_words: int. Static word axis, or None. Defaults to None.
        embedding_dim: int. Width of the word embeddings. Defaults to 100.
        units: int. GRU units per direction. Defaults to 50.
        attention_units: int. Width of both attention projections. Defaults to 100.
        word_encoder: str. "gru" or "transformer". Defaults to "gru".
        num_heads: int. Heads of the Transformer word encoder. Defaults to 2.
        intermediate_dim: int. Its feed-forward width. Defaults to 2·embedding_dim.
        dropout: float. Dropout on the document vector (and inside the Transformer
            block). Defaults to 0.5.
        embedding_dropout: float. Dropout on the word embeddings. Defaults to 0.25.
        class_names: optional list of str: the `label` output gives names, not ids.
        wide: bool or dict. Adds a wide part: an `NgramLinear` over hashed word
            n-grams (second input `ngram_ids`, from `HashedNgrams`) whose logits are
            added to HAN's before the softmax (wide-and-deep). True uses its
            defaults; a dict gives `NgramLinear` arguments. Defaults to False.
        name: str. Model name. Defaults to "han_classifier".

    Returns:
        A functional `keras.Model`, input `token_ids` `(batch, sentences, words)`
        (with `wide`: `{"token_ids", "ngram_ids": (batch, max_ngrams)}`), outputs
        `{"probabilities": (batch, num_classes), "label": (batch,)}`.

    Example:

    >>> import numpy as np
    >>> model = build_han_classifier(50, 2, embedding_dim=8, units=4,
    ...                              attention_units=8)
    >>> out = model(np.ones((3, 4, 5), "int32"))
    >>> out["probabilities"].shape, out["label"].shape
    (TensorShape([3, 2]), TensorShape([3]))
    """
    for arg in ("vocabulary_size", "embedding_dim", "units", "attention_units"):
        check_positive_int(arg, locals()[arg])
    check_positive_int("num_heads", num_heads)
    check_positive_int("max_sentences", max_sentences, allow_none=True)
    check_positive_int("max_words", max_words, allow_none=True)
    check_positive_int("intermediate_dim", intermediate_dim, allow_none=True)
    check_int("num_classes", num_classes, minimum=2)
    check_choice("word_encoder", word_encoder, WORD_ENCODERS)
    check_rate("dropout", dropout)
    check_rate("embedding_dropout", embedding_dropout)
    if word_encoder == "transformer":
        check_divisible("embedding_dim", embedding_dim, "num_heads", num_heads)
    if class_names is not None and len(class_names) != num_classes:
        raise ValueError(
            f"`class_names` must have num_classes={num_classes} names. "
            f"Received: class_names={class_names!r}"
        )

    head, label_layer = _wide_layers(wide, num_classes, class_names)

    # Inputs
    inputs, ids, ngram_ids = _classifier_inputs(
        (max_sentences, max_words), head.get("wide")
    )

    # Encoders
    layers = {
        "word_mask": TokenMask(name="word_mask"),
        "sentence_mask": TokenMask(reduce_last=True, name="sentence_mask"),
        "embedding": keras.layers.Embedding(
            vocabulary_size, embedding_dim, name="embedding"
        ),
        "embedding_dropout": keras.layers.Dropout(
            embedding_dropout, name="embedding_dropout"
        ),
        "word_attention": ContextAttentionPooling(
            attention_units, name="word_attention"
        ),
        "sentence_encoder": keras.layers.Bidirectional(
            keras.layers.GRU(units, return_sequences=True), name="sentence_encoder"
        ),
        "sentence_attention": ContextAttentionPooling(
            attention_units, name="sentence_attention"
        ),
        "document_dropout": keras.layers.Dropout(dropout, name="document_dropout"),
    }
    if word_encoder == "gru":
        inner = keras.layers.Bidirectional(
            keras.layers.GRU(units, return_sequences=True), name="word_gru"
        )
    else:
        inner = TransformerEncoderBlock(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim or 2 * embedding_dim,
            dropout=dropout,
            name="word_transformer",
        )
        layers["word_positions"] = SinusoidalPositionEncoding(name="word_positions")
        layers["word_position_add"] = keras.layers.Add(name="word_position_add")
    layers["word_encoder"] = PerSentence(inner, name="word_encoder")

    # Heads
    layers.update(head)
    probabilities, _, _ = _han_apply(layers.__getitem__, ids, word_encoder, ngram_ids)
    outputs = {"probabilities": probabilities, "label": label_layer(probabilities)}
    return keras.Model(inputs, outputs, name=name)


def han_attention_model(model):
    """A model giving a HAN classifier's attention weights for plotting.

    Args:
        model: a model from `build_han_classifier` (trained or not).

    Returns:
        A `keras.Model` (sharing the weights) from the same inputs (`token_ids`, and
        `ngram_ids` with a wide part) to `{"probabilities", "word_attention":
        (batch, sentences, words), "sentence_attention": (batch, sentences)}`.

    Example:

    >>> import numpy as np
    >>> han = build_han_classifier(50, 2, embedding_dim=8, units=4, attention_units=8)
    >>> weights = han_attention_model(han)(np.ones((1, 3, 4), "int32"))
    >>> weights["word_attention"].shape, weights["sentence_attention"].shape
    (TensorShape([1, 3, 4]), TensorShape([1, 3]))
    """
    names = {layer.name for layer in model.layers}
    encoder = "transformer" if "word_positions" in names else "gru"
    token_shape = model.get_layer("word_mask").input.shape[1:]
    inputs, ids, ngram_ids = _classifier_inputs(token_shape, wide_layer(model))
    probabilities, words, sentences = _han_apply(
        model.get_layer, ids, encoder, ngram_ids
    )
    outputs = {
        "probabilities": probabilities,
        "word_attention": words,
        "sentence_attention": sentences,
    }
    return keras.Model(inputs, outputs, name=f"{model.name}_attention")


def build_transformer_classifier(
    vocabulary_size: int,
    num_classes: int,
    sequence_length: int,
    hidden_dim: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_dim: int | None = None,
    embedding_dim: int | None = None,
    positions: str = "sinusoidal",
    share_layers: bool = False,
    pooling: str = "mean",
    dropout: float = 0.1,
    activation: str = "gelu",
    class_names: list[str] | None = None,
    wide: bool | dict = False,
    name: str = "transformer_classifier",
):
    """Transformer encoder classifier over token ids.

    ids `(batch, sequence_length)` -> token embeddings (factorized `V×E -> E×H` when
    `embedding_dim` is given, as ALBERT) + sinusoidal or learned positions ->
    `num_layers` `TransformerEncoderBlock`s (one block applied `num_layers` times with
    `share_layers`, ALBERT's cross-layer sharing) -> pooling -> softmax. Poolings:
    `"cls"` (the first token, e.g. `[CLS]`), `"mean"` (over real tokens),
    `"attention"` (a learned context vector), `"layer_mean"` (the mean over all
    layers' outputs, padded positions zeroed, flattened).

    Args:
        vocabulary_size: int. Number of token ids (id 0 is padding).
        num_classes: int. Number of classes.
        sequence_length: int. Length of the id sequences.
        hidden_dim: int. Model width. Defaults to 128.
        num_layers: int. Encoder depth. Defaults to 2.
        num_heads: int. Attention heads; must divide `hidden_dim`. Defaults to 4.
        intermediate_dim: int. Feed-forward width. Defaults to 4·hidden_dim.
        embedding_dim: int. Factorized embedding width, or None for a plain
            `hidden_dim` embedding. Defaults to None.
        positions: str. "sinusoidal" or "learned". Defaults to "sinusoidal".
        share_layers: bool. One block for all layers. Defaults to False.
        pooling: str. "cls", "mean", "attention" or "layer_mean". Defaults to "mean".
        dropout: float. Dropout everywhere. Defaults to 0.1.
        activation: str. "relu" or "gelu". Defaults to "gelu".
        class_names: optional list of str for the `label` output.
        wide: bool or dict. A wide part as in `build_han_classifier`. Defaults to
            False.
        name: str. Model name. Defaults to "transformer_classifier".

    Returns:
        A functional `keras.Model`, input `token_ids` `(batch, sequence_length)`
        (with `wide`: `{"token_ids", "ngram_ids"}`), outputs
        `{"probabilities": (batch, num_classes), "label": (batch,)}`.

    Example:

    >>> import numpy as np
    >>> model = build_transformer_classifier(50, 3, sequence_length=8, hidden_dim=8,
    ...                                      num_heads=2, pooling="layer_mean")
    >>> model(np.ones((2, 8), "int32"))["probabilities"].shape
    TensorShape([2, 3])
    """
    for arg in ("vocabulary_size", "sequence_length", "hidden_dim", "num_layers"):
        check_positive_int(arg, locals()[arg])
    check_positive_int("num_heads", num_heads)
    check_positive_int("intermediate_dim", intermediate_dim, allow_none=True)
    check_positive_int("embedding_dim", embedding_dim, allow_none=True)
    check_int("num_classes", num_classes, minimum=2)
    check_choice("positions", positions, POSITIONS)
    check_choice("pooling", pooling, TRANSFORMER_POOLINGS)
    check_rate("dropout", dropout)
    check_divisible("hidden_dim", hidden_dim, "num_heads", num_heads)

    head, label_layer = _wide_layers(wide, num_classes, class_names)

    # Inputs
    inputs, ids, ngram_ids = _classifier_inputs((sequence_length,), head.get("wide"))

    # Encoders: masks are passed explicitly, the same graph in both generations.
    mask = TokenMask(name="token_mask")(ids)  # (batch, sequence_length)
    if embedding_dim is None:
        x = keras.layers.Embedding(vocabulary_size, hidden_dim, name="token_embedding")(
            ids
        )
    else:
        x = FactorizedEmbedding(
            vocabulary_size, embedding_dim, hidden_dim, name="token_embedding"
        )(ids)
    if positions == "sinusoidal":
        position_layer = SinusoidalPositionEncoding(name="position_encoding")
    else:
        position_layer = PositionEmbedding(sequence_length, name="position_embedding")
    x = keras.layers.Add(name="embeddings")([x, position_layer(x)])
    x = keras.layers.LayerNormalization(epsilon=1e-5, name="embeddings_norm")(x)
    x = keras.layers.Dropout(dropout, name="embeddings_dropout")(x)

    def block(index):
        return TransformerEncoderBlock(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim or 4 * hidden_dim,
            dropout=dropout,
            activation=activation,
            name=f"transformer_layer_{index}",
        )

    shared = block(0) if check_bool("share_layers", share_layers) else None
    layer_outputs = []
    for index in range(num_layers):
        x = (shared or block(index))(x, padding_mask=mask)
        layer_outputs.append(x)

    # Heads
    if pooling == "cls":
        pooled = SequencePooling("cls", name="pooling")(x)
    elif pooling == "mean":
        pooled = SequencePooling("mean", name="pooling")(x, mask=mask)
    elif pooling == "attention":
        pooled = ContextAttentionPooling(hidden_dim, name="pooling")(x, mask=mask)
    else:
        if num_layers > 1:
            x = keras.layers.Average(name="layer_mean")(layer_outputs)
        pooled = SequencePooling("flatten", name="pooling")(x, mask=mask)
    pooled = keras.layers.Dropout(dropout, name="pooled_dropout")(pooled)
    probabilities = _head_apply(head.__getitem__, pooled, ngram_ids)
    outputs = {"probabilities": probabilities, "label": label_layer(probabilities)}
    return keras.Model(inputs, outputs, name=name)


def compile_text_classifier(model, learning_rate: float = 1e-3, **kwargs):
    """Compiles a classifier: sparse cross-entropy and accuracy on `probabilities`.

    Targets are class indices, given as `{"probabilities": y}` (the `label` output
    has no loss). Extra keyword arguments go to `model.compile`.
    """
    if not isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        check_finite("learning_rate", learning_rate, minimum=0, exclusive_minimum=True)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss={"probabilities": "sparse_categorical_crossentropy"},
        metrics={"probabilities": ["accuracy"]},
        **kwargs,
    )
    return model


def build_text_serving_model(classifier, tokenizer, class_names=None, name=None):
    """Raw strings in: the tokenizer layer in front of a trained classifier.

    With a wide part (`wide=...`), the `HashedNgrams` layer its `NgramLinear`
    records (`NgramLinear.hasher()`) computes the `ngram_ids` from the same strings
    inside the graph: the hashing of training (in `tf.data`) and of serving is one
    layer.

    Args:
        classifier: a model from `build_han_classifier` or
            `build_transformer_classifier` (input `token_ids`, and `ngram_ids` with
            a wide part).
        tokenizer: the `keras_attn.text` tokenizer layer used for training
            (`SentenceTokenizer` for HAN, `Tokenizer` for the Transformer).
        class_names: optional list of str: `label` gives names instead of indices.
        name: str. Model name. Defaults to the classifier's name + "_serving".

    Returns:
        A functional `keras.Model`, input `{"text": (batch,) string}`, outputs
        `{"probabilities": (batch, num_classes), "label": (batch,)}`.
    """
    text = keras.Input(shape=(), dtype="string", name="text")
    ids = tokenizer(text)
    wide = wide_layer(classifier)
    if wide is not None:
        ids = {"token_ids": ids, "ngram_ids": wide.hasher()(text)}
    probabilities = classifier(ids)["probabilities"]
    probabilities = keras.layers.Activation("linear", name="probabilities")(
        probabilities
    )
    label = PredictedLabel(class_names, name="label")(probabilities)
    return keras.Model(
        {"text": text},
        {"probabilities": probabilities, "label": label},
        name=name or f"{classifier.name}_serving",
    )


def export_text_classifier(
    classifier,
    tokenizer,
    base_dir,
    version=None,
    class_names=None,
    overwrite=False,
    warmup=None,
    explain=False,
):
    """Exports a classifier for TF Serving with raw strings in.

    `serving_default` takes `text` (a batch of strings) and returns `probabilities`
    and `label`. Written with `keras_attn.serving.export` as `base_dir/<version>/`;
    it loads in TensorFlow + tensorflow-text alone (`import tensorflow_text` registers
    the tokenizer ops), and in TF Serving 2.20 or newer. `warmup` (a list of
    strings) writes TF Serving's warm-up records; `explain=True` adds an "explain"
    signature with the attention weights (`keras_attn.serving.explain`).

    Returns:
        The path of the version folder.
    """
    from keras_attn.serving import export

    model = build_text_serving_model(classifier, tokenizer, class_names)
    if explain:
        from keras_attn.serving.explain import text_explain_fn

        explain = text_explain_fn(classifier, tokenizer, class_names)
    return export(
        model,
        base_dir,
        version=version,
        overwrite=overwrite,
        warmup=warmup,
        explain=explain,
    )


def build_bert(
    vocabulary_size: int,
    sequence_length: int = 128,
    hidden_dim: int = 256,
    num_layers: int = 4,
    num_heads: int = 4,
    intermediate_dim: int | None = None,
    type_vocabulary_size: int = 2,
    embedding_dim: int | None = None,
    share_layers: bool = False,
    dropout: float = 0.1,
    layer_norm_epsilon: float = 1e-12,
    activation: str = "gelu_approximate",
    name: str = "bert",
):
    """BERT / ALBERT encoder: token + segment + position embeddings, then blocks.

    `LN(E_tok[ids] + E_seg[segments] + E_pos)` -> dropout -> `num_layers` post-LN
    `TransformerEncoderBlock`s (GELU, by default in the tanh form of Google's
    release, so its checkpoints give their numbers) -> `sequence_output`; the
    `[CLS]` vector through a tanh dense layer is `pooled_output`. `embedding_dim`
    factorizes the token embedding and `share_layers` applies one block at every
    depth (ALBERT).
    Layer names follow the roles of Google's checkpoint (`load_bert_checkpoint`).

    Paper: "BERT", Devlin et al., NAACL 2019; "ALBERT", Lan et al., ICLR 2020.

    Args:
        vocabulary_size: int. WordPiece vocabulary size (id 0 is padding).
        sequence_length: int. Maximum positions. Defaults to 128.
        hidden_dim: int. Width. Defaults to 256.
        num_layers: int. Depth. Defaults to 4.
        num_heads: int. Attention heads. Defaults to 4.
        intermediate_dim: int. Feed-forward width. Defaults to 4·hidden_dim.
        type_vocabulary_size: int. Number of segment ids. Defaults to 2.
        embedding_dim: int. Factorized token-embedding width, or None.
        share_layers: bool. ALBERT cross-layer sharing. Defaults to False.
        dropout: float. Dropout everywhere. Defaults to 0.1.
        layer_norm_epsilon: float. Defaults to 1e-12 (BERT's).
        activation: str. Feed-forward activation: "gelu_approximate" (Google's
            tanh form), "gelu" (exact) or "relu". Defaults to "gelu_approximate".
        name: str. Model name. Defaults to "bert".

    Returns:
        A functional `keras.Model`, inputs `{"token_ids", "segment_ids"}` (int32
        `(batch, sequence_length)`), outputs `{"sequence_output": (batch,
        sequence_length, hidden_dim), "pooled_output": (batch, hidden_dim)}`.

    Example:

    >>> import numpy as np
    >>> bert = build_bert(100, sequence_length=8, hidden_dim=8, num_layers=2,
    ...                   num_heads=2)
    >>> ids = np.ones((2, 8), "int32")
    >>> out = bert({"token_ids": ids, "segment_ids": np.zeros_like(ids)})
    >>> out["sequence_output"].shape, out["pooled_output"].shape
    (TensorShape([2, 8, 8]), TensorShape([2, 8]))
    """
    for arg in ("vocabulary_size", "sequence_length", "hidden_dim", "num_layers"):
        check_positive_int(arg, locals()[arg])
    check_positive_int("num_heads", num_heads)
    check_positive_int("type_vocabulary_size", type_vocabulary_size)
    check_positive_int("intermediate_dim", intermediate_dim, allow_none=True)
    check_positive_int("embedding_dim", embedding_dim, allow_none=True)
    check_rate("dropout", dropout)
    check_divisible("hidden_dim", hidden_dim, "num_heads", num_heads)

    # Inputs
    ids = keras.Input(shape=(sequence_length,), dtype="int32", name="token_ids")
    segments = keras.Input(shape=(sequence_length,), dtype="int32", name="segment_ids")

    # Encoders
    mask = TokenMask(name="token_mask")(ids)
    if embedding_dim is None:
        tokens = keras.layers.Embedding(
            vocabulary_size, hidden_dim, name="token_embedding"
        )(ids)
    else:
        tokens = FactorizedEmbedding(
            vocabulary_size, embedding_dim, hidden_dim, name="token_embedding"
        )(ids)
    segment = keras.layers.Embedding(
        type_vocabulary_size, hidden_dim, name="segment_embedding"
    )(segments)
    position = PositionEmbedding(sequence_length, name="position_embedding")(tokens)
    x = keras.layers.Add(name="embeddings")([tokens, segment, position])
    x = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, name="embeddings_norm"
    )(x)
    x = keras.layers.Dropout(dropout, name="embeddings_dropout")(x)

    def block(index):
        return TransformerEncoderBlock(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim or 4 * hidden_dim,
            dropout=dropout,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            name=f"transformer_layer_{index}",
        )

    shared = block(0) if check_bool("share_layers", share_layers) else None
    for index in range(num_layers):
        x = (shared or block(index))(x, padding_mask=mask)

    # Heads
    cls = SequencePooling("cls", name="cls_token")(x)
    pooled = keras.layers.Dense(hidden_dim, activation="tanh", name="pooler")(cls)
    outputs = {"sequence_output": x, "pooled_output": pooled}
    return keras.Model({"token_ids": ids, "segment_ids": segments}, outputs, name=name)


def bert_checkpoint_map(model, prefix: str = "bert") -> dict:
    """`{checkpoint name: (variable, reshape)}` for Google's BERT variable layout.

    The model is one from `build_bert` without factorized embeddings or sharing
    (the layout of the original BERT release).
    """
    embedding = model.get_layer("token_embedding")
    if isinstance(embedding, FactorizedEmbedding):
        raise ValueError(
            "`model` must have a plain token embedding for the BERT layout. "
            "Received: a FactorizedEmbedding (ALBERT)"
        )
    blocks = [
        layer for layer in model.layers if isinstance(layer, TransformerEncoderBlock)
    ]
    e = f"{prefix}/embeddings"
    mapping = {
        f"{e}/word_embeddings": embedding.embeddings,
        f"{e}/token_type_embeddings": model.get_layer("segment_embedding").embeddings,
        f"{e}/position_embeddings": model.get_layer(
            "position_embedding"
        ).position_embeddings,
        f"{e}/LayerNorm/gamma": model.get_layer("embeddings_norm").gamma,
        f"{e}/LayerNorm/beta": model.get_layer("embeddings_norm").beta,
        f"{prefix}/pooler/dense/kernel": model.get_layer("pooler").kernel,
        f"{prefix}/pooler/dense/bias": model.get_layer("pooler").bias,
    }
    for i, b in enumerate(blocks):
        layer = f"{prefix}/encoder/layer_{i}"
        attention = b.attention
        for part in ("query", "key", "value"):
            dense = getattr(attention, f"{part}_dense")
            mapping[f"{layer}/attention/self/{part}/kernel"] = dense.kernel
            mapping[f"{layer}/attention/self/{part}/bias"] = dense.bias
        mapping[f"{layer}/attention/output/dense/kernel"] = (
            attention.output_dense.kernel
        )
        mapping[f"{layer}/attention/output/dense/bias"] = attention.output_dense.bias
        mapping[f"{layer}/attention/output/LayerNorm/gamma"] = b.attention_norm.gamma
        mapping[f"{layer}/attention/output/LayerNorm/beta"] = b.attention_norm.beta
        ff = b.feedforward
        mapping[f"{layer}/intermediate/dense/kernel"] = ff.intermediate_dense.kernel
        mapping[f"{layer}/intermediate/dense/bias"] = ff.intermediate_dense.bias
        mapping[f"{layer}/output/dense/kernel"] = ff.output_dense.kernel
        mapping[f"{layer}/output/dense/bias"] = ff.output_dense.bias
        mapping[f"{layer}/output/LayerNorm/gamma"] = b.feedforward_norm.gamma
        mapping[f"{layer}/output/LayerNorm/beta"] = b.feedforward_norm.beta
    return mapping


def load_bert_checkpoint(model, checkpoint_path: str, prefix: str = "bert") -> list:
    """Loads a checkpoint in Google's original BERT layout into `build_bert`'s model.

    Reads `bert/embeddings/word_embeddings`, `bert/encoder/layer_0/attention/self/
    query/kernel`, ... with `tf.train.load_checkpoint` and assigns each to its
    weight, reshaping the `(hidden, hidden)` attention kernels to the per-head
    layout. Checkpoint variables outside the encoder (e.g. `cls/predictions/...`)
    are ignored. A missing variable or a shape that cannot match raises ValueError.

    Returns:
        The checkpoint names that were loaded.
    """
    import numpy as np

    reader = tf.train.load_checkpoint(checkpoint_path)
    shapes = reader.get_variable_to_shape_map()
    loaded = []
    for ckpt_name, variable in bert_checkpoint_map(model, prefix).items():
        if ckpt_name not in shapes:
            raise ValueError(
                f"Checkpoint {checkpoint_path!r} lacks {ckpt_name!r}: the model "
                "needs every encoder variable of the BERT layout."
            )
        value = reader.get_tensor(ckpt_name)
        target = tuple(variable.shape)
        if value.size != int(np.prod(target)):
            raise ValueError(
                f"Checkpoint variable {ckpt_name!r} has shape {value.shape}, the "
                f"model's weight {target}."
            )
        variable.assign(value.reshape(target))
        loaded.append(ckpt_name)
    return loaded


def build_aoa_reader(
    vocabulary_size: int,
    embedding_dim: int = 128,
    units: int = 128,
    dropout: float = 0.1,
    name: str = "aoa_reader",
):
    """Attention-over-Attention reader for cloze-style questions (Cui et al. 2017).

    Shared word embeddings -> bidirectional GRU encodings of the document and the
    query -> `AttentionOverAttention` document scores `s` -> the sum of `s` over each
    candidate's positions in the document -> the most probable candidate. Id 0 is
    padding everywhere.

    Paper: "Attention-over-Attention Neural Networks for Reading Comprehension", Cui
    et al., ACL 2017.

    Args:
        vocabulary_size: int. Number of token ids.
        embedding_dim: int. Embedding width. Defaults to 128.
        units: int. GRU units per direction. Defaults to 128.
        dropout: float. Dropout on the embeddings. Defaults to 0.1.
        name: str. Model name. Defaults to "aoa_reader".

    Returns:
        A functional `keras.Model`, inputs `{"document_ids": (batch, doc_len),
        "query_ids": (batch, query_len), "candidate_ids": (batch, candidates)}`,
        outputs `{"probabilities": (batch, candidates)` (the attention mass of each
        candidate), `"label": (batch,)` (the index of the best candidate)`}`.

    Example:

    >>> import numpy as np
    >>> reader = build_aoa_reader(30, embedding_dim=8, units=4)
    >>> out = reader({"document_ids": np.ones((2, 7), "int32"),
    ...               "query_ids": np.ones((2, 3), "int32"),
    ...               "candidate_ids": np.ones((2, 4), "int32")})
    >>> out["probabilities"].shape, out["label"].shape
    (TensorShape([2, 4]), TensorShape([2]))
    """
    for arg in ("vocabulary_size", "embedding_dim", "units"):
        check_positive_int(arg, locals()[arg])
    check_rate("dropout", dropout)

    # Inputs
    document = keras.Input(shape=(None,), dtype="int32", name="document_ids")
    query = keras.Input(shape=(None,), dtype="int32", name="query_ids")
    candidates = keras.Input(shape=(None,), dtype="int32", name="candidate_ids")

    # Encoders
    document_mask = TokenMask(name="document_mask")(document)
    query_mask = TokenMask(name="query_mask")(query)
    embedding = keras.layers.Embedding(vocabulary_size, embedding_dim, name="embedding")
    embedding_dropout = keras.layers.Dropout(dropout, name="embedding_dropout")
    d = embedding_dropout(embedding(document))
    q = embedding_dropout(embedding(query))
    d = keras.layers.Bidirectional(
        keras.layers.GRU(units, return_sequences=True), name="document_encoder"
    )(d, mask=document_mask)
    q = keras.layers.Bidirectional(
        keras.layers.GRU(units, return_sequences=True), name="query_encoder"
    )(q, mask=query_mask)
    scores = AttentionOverAttention(name="attention_over_attention")(
        d, q, document_mask=document_mask, query_mask=query_mask
    )

    # Heads
    probabilities = CandidateSum(name="probabilities")(scores, document, candidates)
    label = PredictedLabel(name="label")(probabilities)
    inputs = {"document_ids": document, "query_ids": query, "candidate_ids": candidates}
    return keras.Model(
        inputs, {"probabilities": probabilities, "label": label}, name=name
    )
