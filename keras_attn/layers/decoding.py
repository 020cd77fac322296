"""Greedy and beam search inside the graph, over a step function.

The search is apart from the model it decodes (as KerasHub's samplers are): a model
gives a `step(tokens, carry, context) -> (logits, carry, weights)` function, where

- `tokens` int32 `(n,)` are the previous tokens (the start token first),
- `carry` is a tuple of `(n, ...)` tensors (the recurrent state: whatever the step
  keeps between tokens),
- `context` a tuple of `(n, ...)` tensors the step reads but never changes (the
  encoder states and their mask),
- `logits` `(n, vocabulary_size)` score the next token, and `weights` `(n,
  attention_length)` are what the step attended to (recorded per step; zeros for
  a model without attention).

`n` is the batch for greedy search and `batch · beam_width` for beam search, which
repeats every row of `carry` and `context` `beam_width` times itself. Both run one
`tf.while_loop` (every row and beam in parallel) that stops at `max_length` or when
every row has produced `end_token`; id 0 (padding) is never generated. Wrap a call
in a `tf.function` with an input signature to export it: the loop is part of the
graph, XLA-compilable.

Each returns a dict: `token_ids` int32 `(batch, max_length)`, the ids up to and
including the end token, 0 after it; `lengths` int32 `(batch,)`, the number of ids
before the padding (the end token included); `scores` float32 `(batch,)`, the
log-probability of those ids; `attention_weights` float32 `(batch, max_length,
attention_length)`, each step's weights (zeros after the end).
"""

from __future__ import annotations

from collections.abc import Callable

from keras_attn._validation import check_positive_int
from keras_attn.backend import tf

__all__ = ["beam_search", "check_search_arguments", "greedy_search"]

_NEG = -1e9


def check_search_arguments(
    vocabulary_size, start_token, end_token, max_length, beam_width, length_penalty
) -> None:
    """Raises a `ValueError` naming the first bad search argument."""
    for name, value in (("start_token", start_token), ("end_token", end_token)):
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 < value < vocabulary_size
        ):
            raise ValueError(
                f"`{name}` must be an integer id in [1, {vocabulary_size}) "
                f"(0 is padding). Received: {name}={value!r}"
            )
    check_positive_int("max_length", max_length)
    check_positive_int("beam_width", beam_width)
    if (
        isinstance(length_penalty, bool)
        or not isinstance(length_penalty, (int, float))
        or length_penalty < 0
    ):
        raise ValueError(
            "`length_penalty` must be a float >= 0. "
            f"Received: length_penalty={length_penalty!r}"
        )


def _length_penalty(lengths, alpha):
    """GNMT's length penalty `((5 + |Y|) / 6)^α` (Wu et al. 2016), float32."""
    return tf.pow((5.0 + tf.cast(lengths, tf.float32)) / 6.0, alpha)


def _log_probs(step, tokens, carry, context):
    """The step's float32 log-probabilities, with padding (id 0) never chosen."""
    logits, carry, weights = step(tokens, carry, context)
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    not_padding = tf.range(tf.shape(log_probs)[-1]) > 0
    log_probs = tf.where(not_padding, log_probs, _NEG)
    return log_probs, tuple(carry), tf.cast(weights, tf.float32)


def greedy_search(
    step: Callable,
    carry,
    context,
    start_token: int,
    end_token: int,
    max_length: int,
    attention_length,
) -> dict:
    """The most probable token at each step, for every row of the batch.

    Args:
        step: `(tokens, carry, context) -> (logits, carry, weights)` (see the
            module docstring).
        carry: tuple of `(batch, ...)` tensors, the state before the first step.
        context: tuple of `(batch, ...)` tensors passed to every step.
        start_token: int. Id fed at the first step.
        end_token: int. Id that ends a sequence.
        max_length: int. Most generated ids per row.
        attention_length: int or scalar tensor. Width of the step's `weights`.

    Returns:
        The dict of the module docstring.
    """
    carry, context = tuple(carry), tuple(context)
    batch = tf.shape(tf.nest.flatten(carry)[0])[0]
    state = (
        tf.constant(0),
        carry,
        tf.fill([batch], tf.constant(start_token, tf.int32)),
        tf.zeros([batch], tf.bool),  # finished
        tf.zeros([batch], tf.int32),  # lengths
        tf.zeros([batch], tf.float32),  # scores
        tf.zeros([batch, max_length], tf.int32),
        tf.zeros([batch, max_length, attention_length], tf.float32),
    )

    def cond(t, carry, tokens, finished, *_):
        return (t < max_length) & ~tf.reduce_all(finished)

    def body(t, carry, tokens, finished, lengths, scores, ids, attention):
        log_probs, carry, weights = _log_probs(step, tokens, carry, context)
        tokens = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
        tokens = tf.where(finished, 0, tokens)
        alive = ~finished
        chosen = tf.gather(log_probs, tokens, batch_dims=1)
        scores += tf.where(alive, chosen, 0.0)
        lengths += tf.cast(alive, tf.int32)
        at_t = tf.one_hot(t, max_length, dtype=tf.int32)  # (max_length,)
        ids += tokens[:, tf.newaxis] * at_t
        weights = tf.where(alive[:, tf.newaxis], weights, 0.0)
        attention += weights[:, tf.newaxis, :] * tf.cast(at_t, tf.float32)[:, None]
        finished |= tokens == end_token
        return t + 1, carry, tokens, finished, lengths, scores, ids, attention

    out = tf.while_loop(cond, body, state, maximum_iterations=max_length)
    return {
        "token_ids": out[6],
        "lengths": out[4],
        "scores": out[5],
        "attention_weights": out[7],
    }


def beam_search(
    step: Callable,
    carry,
    context,
    start_token: int,
    end_token: int,
    max_length: int,
    attention_length,
    beam_width: int = 4,
    length_penalty: float = 0.0,
) -> dict:
    """Beam search: `beam_width` hypotheses per row, the best one returned.

    A finished hypothesis (one that produced `end_token`) stays in the beam at its
    score. Candidates are ranked by `log P(Y) / lp(Y)` with GNMT's length penalty
    `lp(Y) = ((5 + |Y|) / 6)^α`, `α = length_penalty` (Wu et al. 2016; 0 ranks by
    the log-probability alone), `|Y|` counting the end token.

    Args:
        step, carry, context, start_token, end_token, max_length,
            attention_length: as `greedy_search` (`carry` and `context` for the
            batch; they are repeated per beam here).
        beam_width: int. Hypotheses kept per row. Defaults to 4.
        length_penalty: float >= 0. `α`. Defaults to 0.

    Returns:
        The dict of the module docstring.
    """
    k, alpha = beam_width, float(length_penalty)
    carry, context = tuple(carry), tuple(context)
    batch = tf.shape(tf.nest.flatten(carry)[0])[0]

    def per_beam(x):
        """`(batch, ...)` -> `(batch · k, ...)`: every row's beams side by side."""
        return tf.repeat(x, k, axis=0)

    carry = tf.nest.map_structure(per_beam, carry)
    context = tf.nest.map_structure(per_beam, context)
    # Only beam 0 is live at the start, so the first step does not pick k copies.
    first = tf.concat([tf.zeros([1]), tf.fill([k - 1], _NEG)], axis=0)
    state = (
        tf.constant(0),
        carry,
        tf.fill([batch * k], tf.constant(start_token, tf.int32)),
        tf.zeros([batch, k], tf.bool),  # finished
        tf.zeros([batch, k], tf.int32),  # lengths
        tf.tile(first[tf.newaxis], [batch, 1]),  # log-probabilities
        tf.zeros([batch, k, max_length], tf.int32),
        tf.zeros([batch, k, max_length, attention_length], tf.float32),
    )

    def by_parent(x, parent):
        """Reorders `(batch, k, ...)` by the parent beam of each new beam."""
        return tf.gather(x, parent, batch_dims=1)

    def regroup(x, parent):
        """`(batch · k, ...)` reordered by parent beam, same shape."""
        grouped = tf.reshape(x, tf.concat([[batch, k], tf.shape(x)[1:]], axis=0))
        return tf.reshape(by_parent(grouped, parent), tf.shape(x))

    def cond(t, carry, tokens, finished, *_):
        return (t < max_length) & ~tf.reduce_all(finished)

    def body(t, carry, tokens, finished, lengths, log_probs, ids, attention):
        step_log_probs, carry, weights = _log_probs(step, tokens, carry, context)
        vocab = tf.shape(step_log_probs)[-1]
        step_log_probs = tf.reshape(step_log_probs, [batch, k, vocab])
        # A finished beam's one continuation: padding, at no cost.
        finished_row = tf.where(tf.range(vocab) == 0, 0.0, _NEG)  # (vocab,)
        step_log_probs = tf.where(
            finished[..., tf.newaxis], finished_row, step_log_probs
        )
        total = log_probs[..., tf.newaxis] + step_log_probs  # (batch, k, vocab)
        new_lengths = lengths + tf.cast(~finished, tf.int32)
        ranked = total / _length_penalty(new_lengths, alpha)[..., tf.newaxis]
        _, top = tf.math.top_k(tf.reshape(ranked, [batch, k * vocab]), k)
        parent, tokens = top // vocab, top % vocab  # (batch, k) each
        log_probs = tf.gather(tf.reshape(total, [batch, k * vocab]), top, batch_dims=1)
        parent_finished = by_parent(finished, parent)
        lengths = by_parent(new_lengths, parent)
        finished = parent_finished | (tokens == end_token)
        at_t = tf.one_hot(t, max_length, dtype=tf.int32)
        ids = by_parent(ids, parent) + tokens[..., tf.newaxis] * at_t
        weights = by_parent(tf.reshape(weights, [batch, k, -1]), parent)
        weights = tf.where(parent_finished[..., tf.newaxis], 0.0, weights)
        attention = (
            by_parent(attention, parent)
            + weights[:, :, tf.newaxis, :] * tf.cast(at_t, tf.float32)[:, tf.newaxis]
        )
        carry = tf.nest.map_structure(lambda c: regroup(c, parent), carry)
        tokens = tf.reshape(tokens, [batch * k])
        return t + 1, carry, tokens, finished, lengths, log_probs, ids, attention

    out = tf.while_loop(cond, body, state, maximum_iterations=max_length)
    _, _, _, _, lengths, log_probs, ids, attention = out
    ranked = log_probs / _length_penalty(lengths, alpha)
    best = tf.argmax(ranked, axis=-1, output_type=tf.int32)  # (batch,)
    return {
        "token_ids": tf.gather(ids, best, batch_dims=1),
        "lengths": tf.gather(lengths, best, batch_dims=1),
        "scores": tf.gather(log_probs, best, batch_dims=1),
        "attention_weights": tf.gather(attention, best, batch_dims=1),
    }
