"""RetrievalTask (in-batch softmax with logQ, accidental hits, hard negatives,
temperature) against its formula in NumPy and against TFRS's task; BruteForceTopK
and streaming_top_k against a full sort; both through the layer harness."""

import numpy as np
import pytest

from keras_attn.backend import KERAS_3, tf
from keras_attn.layers import BruteForceTopK, RetrievalTask, streaming_top_k
from tests.harness import run_layer_test


def _embeddings(n=8, dim=5, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, dim)).astype("float32") for _ in range(2))


def np_retrieval_loss(
    q, c, temperature=None, probability=None, ids=None, hard=None, weights=None
):
    """Yi et al. (2019): row i's softmax cross-entropy of its own candidate i
    against the batch's others, logits q_i . c_j / T - log p_j; a candidate with
    query i's own id is no negative of it; with `hard`, only the `hard` largest
    negative logits enter. Per-query losses, weighted."""
    logits = q.astype("float64") @ c.T.astype("float64")
    if temperature is not None:
        logits = logits / temperature
    if probability is not None:
        logits = logits - np.log(np.clip(probability, 1e-6, 1.0))[None, :]
    losses = []
    for i, row in enumerate(logits):
        negatives = [
            j for j in range(len(c)) if j != i and (ids is None or ids[j] != ids[i])
        ]
        if hard is not None:
            negatives = sorted(negatives, key=lambda j: -row[j])[:hard]
        kept = row[[i, *negatives]]
        top = kept.max()
        losses.append(top + np.log(np.exp(kept - top).sum()) - row[i])
    losses = np.array(losses)
    return losses if weights is None else losses * weights


CASES = [
    {},
    {"temperature": 0.2},
    {"remove_accidental_hits": True},
    {"num_hard_negatives": 3},
    {"num_hard_negatives": 3, "remove_accidental_hits": True, "temperature": 2.0},
]


@pytest.mark.parametrize("config", CASES, ids=str)
def test_task_equals_the_in_batch_softmax_formula(config):
    q, c = _embeddings()
    ids = np.array([3, 7, 3, 1, 7, 7, 2, 9])  # accidental hits: rows 0/2, 1/4/5
    probability = np.linspace(0.01, 0.3, 8).astype("float32")
    weights = np.linspace(0.5, 1.5, 8).astype("float32")
    expected = np_retrieval_loss(
        q,
        c,
        temperature=config.get("temperature"),
        probability=probability,
        ids=ids if config.get("remove_accidental_hits") else None,
        hard=config.get("num_hard_negatives"),
        weights=weights,
    )
    task = RetrievalTask(**config)
    got = task(
        q,
        c,
        sample_weight=weights,
        candidate_sampling_probability=probability,
        candidate_ids=ids,
    )
    np.testing.assert_allclose(float(got), expected.mean(), rtol=1e-5)
    summed = RetrievalTask(**config, reduction="sum")(
        q,
        c,
        sample_weight=weights,
        candidate_sampling_probability=probability,
        candidate_ids=ids,
    )
    np.testing.assert_allclose(float(summed), expected.sum(), rtol=1e-5)


def test_task_without_corrections_and_its_gradients():
    q, c = _embeddings(seed=1)
    expected = np_retrieval_loss(q, c).mean()
    q_t, c_t = tf.constant(q, "float16"), tf.constant(c)
    with tf.GradientTape() as tape:
        tape.watch(c_t)
        loss = RetrievalTask()(q_t, c_t)
    assert loss.dtype == tf.float32  # computed in float32 under mixed precision
    np.testing.assert_allclose(float(loss), expected, rtol=2e-3)
    assert np.all(np.isfinite(tape.gradient(loss, c_t).numpy()))


def test_task_arguments_are_checked():
    with pytest.raises(ValueError, match="`temperature` must be a finite number > 0"):
        RetrievalTask(temperature=0.0)
    with pytest.raises(ValueError, match="`num_hard_negatives` must be a positive"):
        RetrievalTask(num_hard_negatives=0)
    with pytest.raises(ValueError, match="`reduction` must be one of"):
        RetrievalTask(reduction="none")
    with pytest.raises(ValueError, match="`candidate_ids` must be given"):
        RetrievalTask(remove_accidental_hits=True)(*_embeddings())
    config = RetrievalTask(temperature=0.5, num_hard_negatives=2).get_config()
    assert RetrievalTask.from_config(config).get_config() == config


@pytest.mark.skipif(KERAS_3, reason="tensorflow-recommenders needs Keras 2")
@pytest.mark.parametrize("config", CASES, ids=str)
def test_task_equals_tfrs_retrieval_on_the_same_inputs(config):
    tfrs = pytest.importorskip("tensorflow_recommenders")
    q, c = _embeddings(seed=2)
    ids = np.array([3, 7, 3, 1, 7, 7, 2, 9])
    probability = np.linspace(0.01, 0.3, 8).astype("float32")
    arguments = dict(candidate_sampling_probability=probability, candidate_ids=ids)
    # TFRS sums the queries' losses.
    ours = RetrievalTask(**config, reduction="sum")(q, c, **arguments)
    theirs = tfrs.tasks.Retrieval(**config)(q, c, compute_metrics=False, **arguments)
    np.testing.assert_allclose(float(ours), float(theirs), rtol=1e-5)


@pytest.mark.generation_neutral
@pytest.mark.skipif(not KERAS_3, reason="keras-rs is a Keras 3 library")
@pytest.mark.parametrize(
    "config", [c for c in CASES if not c.get("remove_accidental_hits")], ids=str
)
def test_task_equals_keras_rs_retrieval_layers_on_the_same_inputs(config):
    # keras-rs has the corrections as layers, not a task: the same order as
    # TFRS's task, then the softmax cross-entropy of each row's positive. Its
    # RemoveAccidentalHits (0.4.0) adds float32's smallest normal / 100 (about
    # 1e-40) to a hit's logit, which leaves it as it was (keras-team/keras-rs
    # pull request 206, open): accidental hits are checked against TFRS above.
    rs = pytest.importorskip("keras_rs", reason="keras-rs is not installed")
    q, c = _embeddings(seed=3)
    ids = np.array([3, 7, 3, 1, 7, 7, 2, 9])
    probability = np.linspace(0.01, 0.3, 8).astype("float32")
    logits = q @ c.T
    labels = np.eye(8, dtype="float32")
    if config.get("temperature"):
        logits = logits / config["temperature"]
    logits = rs.layers.SamplingProbabilityCorrection()(
        logits, np.broadcast_to(probability, logits.shape)
    )
    if config.get("num_hard_negatives"):
        logits, labels = rs.layers.HardNegativeMining(config["num_hard_negatives"])(
            logits, labels
        )
    theirs = tf.nn.softmax_cross_entropy_with_logits(labels, logits)
    ours = RetrievalTask(**config, reduction="sum")(
        q, c, candidate_sampling_probability=probability, candidate_ids=ids
    )
    np.testing.assert_allclose(float(ours), float(tf.reduce_sum(theirs)), rtol=1e-5)


def _top_k_np(q, c, k, exclude=None):
    scores = q.astype("float64") @ c.T.astype("float64")
    if exclude is not None:
        for row, items in enumerate(exclude):
            scores[row, items[items >= 0]] = -np.inf
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, axis=1), order


@pytest.mark.parametrize("block_size", [None, 1, 4, 23, 64])
def test_top_k_equals_a_full_sort_with_exclusions_and_under_xla(block_size):
    rng = np.random.default_rng(3)
    q = rng.normal(size=(6, 5)).astype("float32")
    c = rng.normal(size=(23, 5)).astype("float32")
    c[7] = c[3]  # a tie: the lower index first
    exclude = rng.integers(-1, 23, size=(6, 4))
    layer = BruteForceTopK(k=7, block_size=block_size)
    for ex in (None, exclude):
        expected_scores, expected = _top_k_np(q, c, 7, ex)
        scores, indices = layer(q, c, exclude=ex)
        np.testing.assert_array_equal(indices.numpy(), expected)
        np.testing.assert_allclose(scores.numpy(), expected_scores, rtol=1e-5)
    xla = tf.function(lambda a, b, e: layer(a, b, exclude=e), jit_compile=True)
    np.testing.assert_array_equal(xla(q, c, exclude)[1].numpy(), expected)


def test_top_k_places_without_a_candidate_score_minus_infinity():
    q, c = np.ones((1, 2), "float32"), np.eye(3, 2, dtype="float32")
    scores, indices = BruteForceTopK(k=3, block_size=2)(q, c, exclude=[[0, -1]])
    assert indices.numpy()[0, :2].tolist() == [1, 2]
    assert scores.numpy()[0, 2] == -np.inf


def test_streaming_top_k_over_a_dataset_equals_a_full_sort():
    rng = np.random.default_rng(4)
    q = rng.normal(size=(5, 4)).astype("float32")
    c = rng.normal(size=(31, 4)).astype("float32")
    ids = np.arange(1000, 1031)
    expected_scores, order = _top_k_np(q, c, 6)
    batches = tf.data.Dataset.from_tensor_slices((ids, c)).batch(7)
    scores, got = streaming_top_k(q, batches, k=6)
    np.testing.assert_array_equal(got.numpy(), ids[order])
    np.testing.assert_allclose(scores.numpy(), expected_scores, rtol=1e-5)
    with pytest.raises(ValueError, match="must hold at least k=40 candidates"):
        streaming_top_k(q, batches, k=40)


@pytest.mark.slow
def test_top_k_harness():
    rng = np.random.default_rng(5)
    run_layer_test(
        BruteForceTopK,
        {"k": 3, "block_size": 4},
        {
            "queries": rng.normal(size=(8, 5)).astype("float32"),
            "candidates": rng.normal(size=(8, 5)).astype("float32"),
        },
        expected_output_shape=[(8, 3), (8, 3)],
        expected_num_trainable_weights=0,
        run_xla=False,  # no weights to train; XLA is checked above
    )


@pytest.mark.slow
def test_task_harness():
    q, c = _embeddings()
    run_layer_test(
        RetrievalTask,
        {"temperature": 0.5},
        {"query_embeddings": q, "candidate_embeddings": c},
        expected_output_shape=(),
        expected_num_trainable_weights=0,
        run_fit=False,  # a loss, not an output to fit
        run_xla=False,
        run_mixed_precision=False,  # the loss stays float32; checked above
    )
