"""Encoder-decoder attention: BahdanauAttention, LuongAttention, AttentionDecoder and
the encoder of the seq2seq model (Seq2SeqEncoder).

The attention that started it all: a decoder that, at each output step, attends over
the encoder's states. `BahdanauAttention` scores the previous decoder state with the
additive score (Bahdanau et al. 2015); `LuongAttention` scores the current one with the
dot, general, location or concat score, optionally inside a predicted local window
(Luong et al. 2015, local-p). `AttentionDecoder` is the RNN decoder around either:
teacher forcing for training, greedy and beam-search decoding inside the graph (one
`tf.while_loop`, batch-parallel) so that a SavedModel decodes by itself.
"""

from __future__ import annotations

from keras_attn._validation import (
    check_bool,
    check_choice,
    check_mask_shape,
    check_positive_int,
    check_rate,
    static_shape,
)
from keras_attn.backend import (
    Layer,
    as_bool_mask,
    clone_initializer,
    keras,
    masked_softmax,
    register,
    tf,
)
from keras_attn.layers import decoding
from keras_attn.layers.position import SinusoidalPositionEncoding
from keras_attn.layers.scores import AttentionScore
from keras_attn.layers.transformer import TransformerEncoderBlock

LUONG_SCORES = ("dot", "general", "location", "concat")
CELLS = ("gru", "lstm")
ATTENTIONS = ("bahdanau", "luong", "none")
ENCODERS = ("bigru", "transformer")
# A finite stand-in for log(0): -inf would turn into NaN in `-inf - -inf`.


def _check_source(query, value, value_mask):
    v_shape = _check_ranks(query, value)
    check_mask_shape("value_mask", value_mask, v_shape[:-1], "value")


def _check_ranks(query, value):
    """The value's shape, once query and value (tensors or shapes) have the ranks
    these attentions read."""
    q_shape, v_shape = static_shape(query), static_shape(value)
    if len(q_shape) not in (2, 3) or len(v_shape) != 3:
        raise ValueError(
            "`query` must be (batch, dim) or (batch, q_len, dim) and `value` "
            f"(batch, src_len, dim). Received: query.shape={tuple(q_shape)}, "
            f"value.shape={tuple(v_shape)}"
        )
    return v_shape


def _as_sequence_shape(query_shape, value_shape):
    """A (batch, dim) query's shape as the (batch, 1, dim) the scorer reads."""
    _check_ranks(query_shape, value_shape)
    shape = static_shape(query_shape)
    return [shape[0], 1, shape[-1]] if len(shape) == 2 else shape


class _SourceAttention(Layer):
    """Shared call of the two encoder-decoder attentions: score, mask, context."""

    def _weights(self, query, value, value_mask, scores):
        mask = None if value_mask is None else value_mask[:, tf.newaxis, :]
        return masked_softmax(scores, mask)

    def call(self, query, value, value_mask=None):
        query, value = self.cast_inputs(query, value)
        value_mask = as_bool_mask(value_mask)
        _check_source(query, value, value_mask)
        single = len(query.shape) == 2
        if single:
            query = query[:, tf.newaxis, :]  # (batch, 1, dim)
        scores = self.scorer(query, value)  # (batch, q_len, src_len)
        weights = self._weights(query, value, value_mask, scores)
        context = tf.einsum("bqs,bsd->bqd", weights, value)
        if single:
            return context[:, 0], weights[:, 0]
        return context, weights


@register
class BahdanauAttention(_SourceAttention):
    """Additive attention of a decoder state over the encoder states.

    `e_j = vᵀ tanh(W₁ s + W₂ h_j + b)`, `a = softmax_j(e)` over the real source
    positions, `c = Σ_j a_j h_j`: the alignment model of Bahdanau, Cho & Bengio (ICLR
    2015), where `s` is the decoder's previous state `s_{i-1}`. The score is
    `AttentionScore(score="additive")`. A source row without any real position gives
    zero weights and a zero context.

    Args:
        units: int. Width of the additive score's hidden layer. Defaults to the encoder
            states' dim.
        use_bias: bool. Whether the score adds `b`. Defaults to True.
        kernel_initializer: initializer of `W₁`, `W₂`, `v`. Defaults to
            "glorot_uniform".
        bias_initializer: initializer of `b`. Defaults to "zeros".

    Call arguments:
        query: the decoder state, `(batch, q_dim)`, or `(batch, q_len, q_dim)` for
            several queries at once.
        value: the encoder states, `(batch, src_len, dim)`.
        value_mask: optional boolean `(batch, src_len)`, True at real positions.

    Returns:
        `(context, weights)`: `(batch, dim)` and `(batch, src_len)` for a single query,
        `(batch, q_len, dim)` and `(batch, q_len, src_len)` for several.

    Example:

    >>> import numpy as np
    >>> layer = BahdanauAttention(units=16)
    >>> state, states = np.ones((2, 8), "float32"), np.ones((2, 5, 6), "float32")
    >>> context, weights = layer(state, states, value_mask=np.ones((2, 5), bool))
    >>> context.shape, weights.shape
    (TensorShape([2, 6]), TensorShape([2, 5]))
    """

    def __init__(
        self,
        units: int | None = None,
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("units", units, allow_none=True)
        self.units = units
        self.use_bias = check_bool("use_bias", use_bias)
        self.scorer = AttentionScore(
            score="additive",
            units=units,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            dtype=self.dtype_policy,
            name="scorer",
        )

    def build(self, query_shape, value_shape):
        self.scorer.build(_as_sequence_shape(query_shape, value_shape), value_shape)
        self.built = True

    def get_config(self):
        scorer = self.scorer.get_config()
        config = {
            "units": self.units,
            "use_bias": self.use_bias,
            "kernel_initializer": scorer["kernel_initializer"],
            "bias_initializer": scorer["bias_initializer"],
        }
        return {**super().get_config(), **config}


@register
class LuongAttention(_SourceAttention):
    """Luong's global or local-p attention of the current decoder state.

    Scores of the decoder state `h_t` (after the decoder step) against each encoder
    state `h̄_s` (Luong, Pham & Manning, EMNLP 2015), through `AttentionScore`:

    - `"dot"`: `h_tᵀ h̄_s`; `"general"`: `h_tᵀ W_a h̄_s`;
    - `"location"`: `(W_a h_t)_s`, from the decoder state alone (`max_length` source
      positions at most);
    - `"concat"`: `v_aᵀ tanh(W_a [h_t; h̄_s])`, the additive form without a bias.

    `a_t = softmax_s(score)` over the real source positions, `c_t = Σ_s a_t(s) h̄_s`.
    With `window=D` (local-p), the aligned position is predicted,
    `p_t = S · sigmoid(v_pᵀ tanh(W_p h_t))` with `S` the real source length, the
    softmax runs over the positions `s` (numbered 1..S as in the paper) inside
    `[p_t − D, p_t + D]`, and the weights are multiplied by the Gaussian
    `exp(−(s − p_t)² / (2σ²))`, `σ = D/2` (so they sum to less than one). A source
    row without any real position gives zero weights and a zero context.

    Args:
        score: str. "dot", "general", "location" or "concat". Defaults to "general".
        units: int. Width of the "concat" score's hidden layer and of the local-p
            position network `W_p`. Defaults to the query's dim.
        max_length: int. Source positions covered by the "location" score. Defaults
            to the static source length seen at build.
        window: int or None. `D` of local-p attention; None is global attention.
            Defaults to None.
        kernel_initializer: initializer of the learned matrices. Defaults to
            "glorot_uniform".
        bias_initializer: initializer of the "location" score's bias. Defaults to
            "zeros".

    Call arguments:
        query: the decoder state `h_t`, `(batch, q_dim)`, or `(batch, q_len, q_dim)`.
        value: the encoder states, `(batch, src_len, dim)`.
        value_mask: optional boolean `(batch, src_len)`, True at real positions.

    Returns:
        `(context, weights)`: `(batch, dim)` and `(batch, src_len)` for a single query,
        `(batch, q_len, dim)` and `(batch, q_len, src_len)` for several.

    Example:

    >>> import numpy as np
    >>> layer = LuongAttention(score="general", window=2)
    >>> state, states = np.ones((2, 8), "float32"), np.ones((2, 7, 6), "float32")
    >>> context, weights = layer(state, states)
    >>> context.shape, weights.shape
    (TensorShape([2, 6]), TensorShape([2, 7]))
    """

    def __init__(
        self,
        score: str = "general",
        units: int | None = None,
        max_length: int | None = None,
        window: int | None = None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_choice("score", score, LUONG_SCORES)
        check_positive_int("units", units, allow_none=True)
        check_positive_int("max_length", max_length, allow_none=True)
        check_positive_int("window", window, allow_none=True)
        self.score = score
        self.units = units
        self.max_length = max_length
        self.window = window
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        # Luong's concat score is the additive form v·tanh(W[h_t; h̄_s]) without a bias.
        self.scorer = AttentionScore(
            score="additive" if score == "concat" else score,
            units=units,
            max_length=max_length,
            use_bias=score != "concat",
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            dtype=self.dtype_policy,
            name="scorer",
        )

    def build(self, query_shape, value_shape):
        self.scorer.build(_as_sequence_shape(query_shape, value_shape), value_shape)
        if self.window is not None:
            q_dim = static_shape(query_shape)[-1]
            units = self.units or q_dim
            self.position_kernel = self.add_weight(
                name="position_kernel",
                shape=(q_dim, units),
                initializer=clone_initializer(self.kernel_initializer),
            )
            self.position_score = self.add_weight(
                name="position_score",
                shape=(units,),
                initializer=clone_initializer(self.kernel_initializer),
            )
        self.built = True

    def aligned_position(self, query, value, value_mask=None):
        """Local-p's predicted position `p_t = S·sigmoid(v_pᵀ tanh(W_p h_t))`.

        `query` is `(batch, q_len, q_dim)`; returns float32 `(batch, q_len)`.
        """
        hidden = tf.tanh(tf.einsum("bqd,du->bqu", query, self.position_kernel))
        logit = tf.einsum("bqu,u->bq", hidden, self.position_score)
        if value_mask is None:
            length = tf.cast(tf.shape(value)[1], tf.float32)[tf.newaxis]
        else:
            length = tf.reduce_sum(tf.cast(value_mask, tf.float32), axis=-1)
        return length[:, tf.newaxis] * tf.sigmoid(tf.cast(logit, tf.float32))

    def _weights(self, query, value, value_mask, scores):
        if self.window is None:
            return super()._weights(query, value, value_mask, scores)
        p = self.aligned_position(query, value, value_mask)[..., tf.newaxis]
        # Positions 1..S as in the paper; float32, half precision cannot hold s².
        s = tf.cast(tf.range(1, tf.shape(value)[1] + 1), tf.float32)
        distance = s[tf.newaxis, tf.newaxis, :] - p  # (batch, q_len, src_len)
        mask = tf.abs(distance) <= float(self.window)
        if value_mask is not None:
            mask &= value_mask[:, tf.newaxis, :]
        sigma = self.window / 2.0
        gaussian = tf.exp(-tf.square(distance) / (2.0 * sigma * sigma))
        return masked_softmax(scores, mask) * tf.cast(gaussian, scores.dtype)

    def get_config(self):
        config = {
            "score": self.score,
            "units": self.units,
            "max_length": self.max_length,
            "window": self.window,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}


@register
class AttentionDecoder(Layer):
    """RNN decoder with Bahdanau or Luong attention over the encoder states.

    One step, from the previous target token `y_{t-1}` (embedded as `e_{t-1}`):

    - `attention="bahdanau"` (Bahdanau et al. 2015): `c_t = attn(s_{t-1}, H)`,
      `s_t = cell([e_{t-1}; c_t], s_{t-1})`, `logits_t = W_o [s_t; c_t] + b_o`.
    - `attention="luong"` (Luong et al. 2015): `h_t = cell([e_{t-1}; h̃_{t-1}],
      h_{t-1})` (input feeding; `e_{t-1}` alone without it), `c_t = attn(h_t, H)`,
      `h̃_t = tanh(W_c [c_t; h_t])`, `logits_t = W_s h̃_t + b_s`.
    - `attention="none"`, the control without attention (Cho et al. 2014 /
      Sutskever et al. 2014 style): `s_t = cell(e_{t-1}, s_{t-1})`,
      `logits_t = W_o s_t + b_o`; the source reaches the decoder only through the
      initial state (the bridge), and the attention weights are zeros.

    The initial state is `tanh(W_b·mean(H) + b_b)` over the real source positions
    (`bridge=True`) or zeros. `call` runs teacher forcing over given decoder input
    ids (the targets shifted right behind a start token). `decode` generates inside
    the graph: greedy for `beam_width=1`, beam search otherwise.

    Args:
        vocabulary_size: int. Target vocabulary size; id 0 is padding.
        units: int. Width of the recurrent state.
        embedding_dim: int. Width of the target token embedding. Defaults to `units`.
        cell: str. "gru" or "lstm". Defaults to "gru".
        attention: str. "bahdanau", "luong" or "none" (no attention: the
            control). Defaults to "luong".
        score: str. For "luong": "dot", "general", "location" or "concat" (defaults
            to "general"); for "bahdanau" only "additive" (the default); for
            "none", None.
        attention_units: int. Hidden width of the additive/concat score and of the
            local-p position network. Defaults to the layers' own defaults.
        window: int or None. Luong's local-p window `D`. Defaults to None (global).
        input_feeding: bool. Luong's input feeding. Defaults to True.
        max_source_length: int. Source positions of the "location" score.
        bridge: bool. Initial state from the encoder states (True) or zeros.
            Defaults to True.
        dropout: float. Dropout on the embeddings and before the output projection.
            Defaults to 0.0.

    Call arguments:
        target_ids: int `(batch, tgt_len)`, the decoder inputs (start token first).
        encoder_states: `(batch, src_len, dim)`.
        source_mask: optional boolean `(batch, src_len)`, True at real positions.
        training: bool, whether dropout is active.
        return_attention_scores: bool. Also return the weights. Defaults to False.

    Returns:
        logits `(batch, tgt_len, vocabulary_size)`, and the attention weights
        `(batch, tgt_len, src_len)` when `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> decoder = AttentionDecoder(vocabulary_size=10, units=8, attention="bahdanau")
    >>> states, mask = np.ones((2, 5, 6), "float32"), np.ones((2, 5), bool)
    >>> decoder(np.ones((2, 3), "int32"), states, source_mask=mask).shape
    TensorShape([2, 3, 10])
    >>> out = decoder.decode(states, mask, start_token=1, end_token=2, max_length=4,
    ...                      beam_width=3, length_penalty=0.6)
    >>> out["token_ids"].shape, out["attention_weights"].shape
    (TensorShape([2, 4]), TensorShape([2, 4, 5]))
    """

    def __init__(
        self,
        vocabulary_size: int,
        units: int,
        embedding_dim: int | None = None,
        cell: str = "gru",
        attention: str = "luong",
        score: str | None = None,
        attention_units: int | None = None,
        window: int | None = None,
        input_feeding: bool = True,
        max_source_length: int | None = None,
        bridge: bool = True,
        dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("vocabulary_size", vocabulary_size)
        check_positive_int("units", units)
        check_positive_int("embedding_dim", embedding_dim, allow_none=True)
        check_choice("cell", cell, CELLS)
        check_choice("attention", attention, ATTENTIONS)
        check_positive_int("attention_units", attention_units, allow_none=True)
        check_positive_int("window", window, allow_none=True)
        check_positive_int("max_source_length", max_source_length, allow_none=True)
        check_rate("dropout", dropout)
        if attention != "luong" and window is not None:
            raise ValueError(
                "`window` (local-p) is Luong attention's option: it needs "
                f'attention="luong". Received: window={window!r}, '
                f"attention={attention!r}"
            )
        if attention == "bahdanau":
            check_choice("score", score or "additive", ("additive",))
        elif attention == "none":
            if score is not None:
                raise ValueError(
                    '`score` must be None for attention="none" (nothing is '
                    f"scored). Received: score={score!r}"
                )
            if not bridge:
                raise ValueError(
                    'attention="none" needs `bridge=True`: without attention the '
                    "initial state is the only way the source reaches the "
                    f"decoder. Received: bridge={bridge!r}"
                )
        else:
            check_choice("score", score or "general", LUONG_SCORES)
        self.vocabulary_size = vocabulary_size
        self.units = units
        self.embedding_dim = embedding_dim
        self.cell_type = cell
        self.attention = attention
        self.score = score or {"bahdanau": "additive", "luong": "general"}.get(
            attention
        )
        self.attention_units = attention_units
        self.window = window
        self.input_feeding = check_bool("input_feeding", input_feeding)
        self.max_source_length = max_source_length
        self.bridge = check_bool("bridge", bridge)
        self.dropout = dropout

        policy = self.dtype_policy
        self.embedding = keras.layers.Embedding(
            vocabulary_size, embedding_dim or units, dtype=policy, name="embedding"
        )
        cell_cls = keras.layers.GRUCell if cell == "gru" else keras.layers.LSTMCell
        self.cell = cell_cls(units, dtype=policy, name="cell")
        if attention == "bahdanau":
            self.attention_layer = BahdanauAttention(
                units=attention_units, dtype=policy, name="attention_layer"
            )
            self.attention_dense = None
        elif attention == "none":
            self.attention_layer = self.attention_dense = None
        else:
            self.attention_layer = LuongAttention(
                score=self.score,
                units=attention_units,
                max_length=max_source_length,
                window=window,
                dtype=policy,
                name="attention_layer",
            )
            # W_c of h̃_t = tanh(W_c [c_t; h_t]); the paper has no bias here.
            self.attention_dense = keras.layers.Dense(
                units, use_bias=False, dtype=policy, name="attention_dense"
            )
        self.num_states = 1 if cell == "gru" else 2
        self.bridge_dense = (
            keras.layers.Dense(
                units * self.num_states,
                activation="tanh",
                dtype=policy,
                name="bridge_dense",
            )
            if self.bridge
            else None
        )
        self.output_dense = keras.layers.Dense(
            vocabulary_size, dtype=policy, name="output_dense"
        )
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=policy, name="dropout_layer"
        )

    # Build -------------------------------------------------------------------------

    def build(self, target_ids_shape, encoder_states_shape):
        enc = static_shape(encoder_states_shape)
        if len(enc) != 3 or enc[-1] is None:
            raise ValueError(
                "`encoder_states` must have shape (batch, src_len, dim) with a known "
                f"dim. Received: encoder_states.shape={tuple(enc)}"
            )
        dim = enc[-1]
        if self.score == "dot" and dim != self.units:
            raise ValueError(
                'score="dot" needs encoder states as wide as the decoder state. '
                f"Received: units={self.units}, encoder_states.shape={tuple(enc)}"
            )
        emb = self.embedding_dim or self.units
        self.embedding.build((None,))
        if self.attention_layer is not None:
            self.attention_layer.build((None, self.units), (None, enc[1], dim))
        if self.attention == "none":
            cell_input, self.feature_dim = emb, self.units
        elif self.attention == "bahdanau":
            cell_input, self.feature_dim = emb + dim, self.units + dim
        else:
            cell_input = emb + self.units if self.input_feeding else emb
            self.attention_dense.build((None, dim + self.units))
            self.feature_dim = self.units
        self.cell.build((None, cell_input))
        if self.bridge_dense is not None:
            self.bridge_dense.build((None, dim))
        self.output_dense.build((None, self.feature_dim))
        self.built = True

    # One step ----------------------------------------------------------------------

    def _initial_carry(self, encoder_states, source_mask):
        """`(states..., feed)`: the cell states and Luong's h̃_0, (batch, units) each."""
        batch = tf.shape(encoder_states)[0]
        dtype = encoder_states.dtype
        if self.bridge_dense is not None:
            if source_mask is None:
                mean = tf.reduce_mean(encoder_states, axis=1)
            else:
                weights = tf.cast(source_mask, dtype)[..., tf.newaxis]
                # max(count, 1): an empty source averages to zeros, not NaN.
                count = tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)
                mean = tf.reduce_sum(encoder_states * weights, axis=1) / count
            initial = self.bridge_dense(mean)  # (batch, units · num_states)
            states = tf.split(initial, self.num_states, axis=-1)
        else:
            states = [tf.zeros([batch, self.units], dtype)] * self.num_states
        return tuple(states) + (tf.zeros([batch, self.units], dtype),)

    def _cell_step(self, embedded, carry, encoder_states, source_mask):
        """One decoder step on embedded tokens `(batch, emb)`.

        Returns the step's features for the output projection `(batch, feature_dim)`,
        the new carry and the attention weights `(batch, src_len)`.
        """
        states, feed = list(carry[:-1]), carry[-1]
        if self.attention == "none":
            output, states = self.cell(embedded, states)
            weights = tf.zeros(tf.shape(encoder_states)[:2], output.dtype)
            return output, tuple(states) + (feed,), weights
        if self.attention == "bahdanau":
            # Bahdanau: attend with the previous state, then step.
            context, weights = self.attention_layer(
                states[0], encoder_states, value_mask=source_mask
            )
            output, states = self.cell(tf.concat([embedded, context], axis=-1), states)
            features = tf.concat([output, context], axis=-1)
            return features, tuple(states) + (feed,), weights
        # Luong: step (fed the previous attentional state), then attend.
        cell_input = (
            tf.concat([embedded, feed], axis=-1) if self.input_feeding else embedded
        )
        output, states = self.cell(cell_input, states)
        context, weights = self.attention_layer(
            output, encoder_states, value_mask=source_mask
        )
        attentional = tf.tanh(
            self.attention_dense(tf.concat([context, output], axis=-1))
        )
        return attentional, tuple(states) + (attentional,), weights

    def _decode_step(self, tokens, carry, encoder_states, source_mask):
        """Logits `(n, vocabulary_size)` of the next token after `tokens` `(n,)`."""
        embedded = self.embedding(tokens)
        features, carry, weights = self._cell_step(
            embedded, carry, encoder_states, source_mask
        )
        return self.output_dense(features), carry, weights

    # Teacher forcing ---------------------------------------------------------------

    def call(
        self,
        target_ids,
        encoder_states,
        source_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        encoder_states = self.cast_inputs(encoder_states)
        source_mask = as_bool_mask(source_mask)
        check_mask_shape(
            "source_mask",
            source_mask,
            static_shape(encoder_states)[:-1],
            "encoder_states",
        )
        tgt_len, src_len = target_ids.shape[1], encoder_states.shape[1]
        embedded = self.dropout_layer(self.embedding(target_ids), training=training)
        embedded = tf.transpose(embedded, [1, 0, 2])  # (tgt_len, batch, emb)
        steps = tf.shape(target_ids)[1]
        carry = self._initial_carry(encoder_states, source_mask)
        dtype = encoder_states.dtype
        features = tf.TensorArray(dtype, size=steps, element_shape=[None, None])
        weights = tf.TensorArray(dtype, size=steps, element_shape=[None, None])

        def body(t, carry, features, weights):
            f, carry, w = self._cell_step(
                embedded[t], carry, encoder_states, source_mask
            )
            return t + 1, carry, features.write(t, f), weights.write(t, w)

        # maximum_iterations: XLA needs a bound to differentiate through the loop.
        _, _, features, weights = tf.while_loop(
            lambda t, *_: t < steps,
            body,
            (tf.constant(0), carry, features, weights),
            maximum_iterations=steps,
        )
        features = tf.transpose(features.stack(), [1, 0, 2])  # (batch, tgt, feature)
        features.set_shape([None, tgt_len, self.feature_dim])
        logits = self.output_dense(self.dropout_layer(features, training=training))
        if not return_attention_scores:
            return logits
        weights = tf.transpose(weights.stack(), [1, 0, 2])  # (batch, tgt, src)
        weights.set_shape([None, tgt_len, src_len])
        return logits, weights

    # Decoding ----------------------------------------------------------------------

    def decode(
        self,
        encoder_states,
        source_mask=None,
        start_token: int = 1,
        end_token: int = 2,
        max_length: int = 32,
        beam_width: int = 1,
        length_penalty: float = 0.0,
    ) -> dict:
        """Generates target ids inside the graph: greedy, or beam search.

        One `tf.while_loop` over the steps, every row of the batch (and every beam) in
        parallel; it stops at `max_length` or when every row has produced
        `end_token`. Id 0 (padding) is never generated. Wrap it in a `tf.function`
        with an input signature to export it: the loop is part of the graph.

        Beam search keeps `beam_width` hypotheses per row; a finished hypothesis
        (one that produced `end_token`) stays in the beam at its score. Candidates
        are ranked by `log P(Y) / lp(Y)` with GNMT's length penalty
        `lp(Y) = ((5 + |Y|) / 6)^α`, `α = length_penalty` (Wu et al. 2016; 0 ranks by
        the log-probability alone), `|Y|` counting the end token.

        Args:
            encoder_states: `(batch, src_len, dim)`.
            source_mask: optional boolean `(batch, src_len)`, True at real positions.
            start_token: int. Id fed at the first step. Defaults to 1.
            end_token: int. Id that ends a sequence. Defaults to 2.
            max_length: int. Most generated ids per row. Defaults to 32.
            beam_width: int. 1 for greedy decoding. Defaults to 1.
            length_penalty: float. `α` of the length penalty. Defaults to 0.0.

        Returns:
            A dict: `token_ids` int32 `(batch, max_length)`, the ids up to and
            including the end token, 0 after it; `lengths` int32 `(batch,)`, the
            number of ids before the padding (the end token included); `scores`
            float32 `(batch,)`, the log-probability of those ids;
            `attention_weights` float32 `(batch, max_length, src_len)`, each step's
            weights (zeros after the end).
        """
        search = decoding.greedy_search if beam_width == 1 else decoding.beam_search
        return self._search(
            search,
            encoder_states,
            source_mask,
            start_token,
            end_token,
            max_length,
            beam_width,
            length_penalty,
        )

    def beam_search(
        self,
        encoder_states,
        source_mask=None,
        start_token: int = 1,
        end_token: int = 2,
        max_length: int = 32,
        beam_width: int = 4,
        length_penalty: float = 0.0,
    ) -> dict:
        """Beam search at any `beam_width`, 1 included (`decode` runs greedy there).

        Arguments and result as `decode`.
        """
        return self._search(
            decoding.beam_search,
            encoder_states,
            source_mask,
            start_token,
            end_token,
            max_length,
            beam_width,
            length_penalty,
        )

    def _search_step(self, tokens, carry, context):
        """The step function of `keras_attn.layers.decoding`'s searches."""
        encoder_states, source_mask = context
        return self._decode_step(tokens, carry, encoder_states, source_mask)

    def _search(
        self,
        search,
        encoder_states,
        source_mask,
        start_token,
        end_token,
        max_length,
        beam_width,
        length_penalty,
    ):
        """Runs `search` (greedy or beam) over this decoder's steps."""
        decoding.check_search_arguments(
            self.vocabulary_size,
            start_token,
            end_token,
            max_length,
            beam_width,
            length_penalty,
        )
        encoder_states = self.cast_inputs(encoder_states)
        source_mask = as_bool_mask(source_mask)
        check_mask_shape(
            "source_mask",
            source_mask,
            static_shape(encoder_states)[:-1],
            "encoder_states",
        )
        if source_mask is None:
            source_mask = tf.ones(tf.shape(encoder_states)[:2], tf.bool)
        arguments = {}
        if search is decoding.beam_search:
            arguments = dict(beam_width=beam_width, length_penalty=length_penalty)
        return search(
            self._search_step,
            self._initial_carry(encoder_states, source_mask),
            (encoder_states, source_mask),
            start_token=start_token,
            end_token=end_token,
            max_length=max_length,
            attention_length=tf.shape(encoder_states)[1],
            **arguments,
        )

    def get_config(self):
        config = {
            "vocabulary_size": self.vocabulary_size,
            "units": self.units,
            "embedding_dim": self.embedding_dim,
            "cell": self.cell_type,
            "attention": self.attention,
            "score": self.score,
            "attention_units": self.attention_units,
            "window": self.window,
            "input_feeding": self.input_feeding,
            "max_source_length": self.max_source_length,
            "bridge": self.bridge,
            "dropout": self.dropout,
        }
        return {**super().get_config(), **config}


@register
class Seq2SeqEncoder(Layer):
    """Token embedding and encoder of `Seq2Seq`: a BiGRU stack or Transformer blocks.

    Args:
        vocabulary_size: int. Source vocabulary size; id 0 is padding.
        units: int. GRU width (the states are `2·units` wide), or the Transformer's
            model width.
        embedding_dim: int. Embedding width for "bigru" (the Transformer embeds at
            `units`). Defaults to `units`.
        encoder: str. "bigru" or "transformer". Defaults to "bigru".
        num_layers: int. Encoder depth. Defaults to 1.
        num_heads: int. Transformer heads; must divide `units`. Defaults to 2.
        dropout: float. Dropout on the embeddings and inside the blocks. Defaults to 0.

    Call arguments:
        inputs: int ids `(batch, src_len)`.
        training: bool, whether dropout is active.

    Returns:
        `(states, mask)`: `(batch, src_len, dim)` and boolean `(batch, src_len)`.

    Example:

    >>> import numpy as np
    >>> states, mask = Seq2SeqEncoder(20, 8)(np.array([[3, 4, 0]]))
    >>> states.shape, mask.numpy().tolist()
    (TensorShape([1, 3, 16]), [[True, True, False]])
    """

    def __init__(
        self,
        vocabulary_size: int,
        units: int,
        embedding_dim: int | None = None,
        encoder: str = "bigru",
        num_layers: int = 1,
        num_heads: int = 2,
        dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("vocabulary_size", vocabulary_size)
        check_positive_int("units", units)
        check_positive_int("embedding_dim", embedding_dim, allow_none=True)
        check_choice("encoder", encoder, ENCODERS)
        check_positive_int("num_layers", num_layers)
        check_positive_int("num_heads", num_heads)
        check_rate("dropout", dropout)
        if encoder == "transformer" and units % num_heads:
            raise ValueError(
                "`units` must be divisible by `num_heads`. Received: "
                f"units={units}, num_heads={num_heads}"
            )
        self.vocabulary_size = vocabulary_size
        self.units = units
        self.embedding_dim = embedding_dim
        self.encoder = encoder
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.dropout = dropout
        policy = self.dtype_policy
        width = units if encoder == "transformer" else (embedding_dim or units)
        self.embedding = keras.layers.Embedding(
            vocabulary_size, width, dtype=policy, name="embedding"
        )
        self.embedding_dropout = keras.layers.Dropout(
            dropout, dtype=policy, name="embedding_dropout"
        )
        if encoder == "bigru":
            self.position_encoding = None
            self.encoder_layers = [
                keras.layers.Bidirectional(
                    keras.layers.GRU(units, return_sequences=True, dtype=policy),
                    dtype=policy,
                    name=f"bigru_{i}",
                )
                for i in range(num_layers)
            ]
        else:
            self.position_encoding = SinusoidalPositionEncoding(
                dtype=policy, name="position_encoding"
            )
            self.encoder_layers = [
                TransformerEncoderBlock(
                    num_heads=num_heads,
                    intermediate_dim=4 * units,
                    dropout=dropout,
                    dtype=policy,
                    name=f"transformer_layer_{i}",
                )
                for i in range(num_layers)
            ]

    def build(self, input_shape):
        self.embedding.build(input_shape)
        width = (
            self.units
            if self.encoder == "transformer"
            else (self.embedding_dim or self.units)
        )
        shape = (None, None, width)
        for layer in self.encoder_layers:
            layer.build(shape)
            shape = (None, None, 2 * self.units if self.encoder == "bigru" else width)
        self.built = True

    def call(self, inputs, training=None):
        mask = tf.not_equal(inputs, tf.zeros([], inputs.dtype))  # (batch, src_len)
        x = self.embedding(inputs)
        if self.position_encoding is not None:
            x = x + tf.cast(self.position_encoding(x), x.dtype)
        x = self.embedding_dropout(x, training=training)
        for layer in self.encoder_layers:
            if self.encoder == "bigru":
                x = layer(x, mask=mask, training=training)
            else:
                x = layer(x, padding_mask=mask, training=training)
        return x, mask

    def get_config(self):
        config = {
            "vocabulary_size": self.vocabulary_size,
            "units": self.units,
            "embedding_dim": self.embedding_dim,
            "encoder": self.encoder,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "dropout": self.dropout,
        }
        return {**super().get_config(), **config}
