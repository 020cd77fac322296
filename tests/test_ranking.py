"""Ranking losses and metrics against their formulas written out in NumPy, one
list at a time (padded lists, empty lists, lists without relevance), against
scikit-learn's `ndcg_score`, and against keras-rs where it is installed (Keras 3)."""

import math

import numpy as np
import pytest

from keras_attn import losses, metrics
from keras_attn.backend import KERAS_3, keras, tf

# ---------------------------------------------------------------- NumPy formulas


def _lists(labels, scores, mask):
    """The real items of each list: [(grades, scores)], in list order."""
    return [(y[m], s[m]) for y, s, m in zip(labels, scores, mask)]


def _pairs(y):
    return [(i, j) for i in range(len(y)) for j in range(len(y)) if y[i] > y[j]]


def np_pairwise(y, s, term):
    pairs = _pairs(y)
    if not pairs:
        return 0.0
    return sum(term(s[i] - s[j]) for i, j in pairs) / len(pairs)


def np_hinge(y, s, margin=1.0):
    return np_pairwise(y, s, lambda d: max(0.0, margin - d))


def np_logistic(y, s):
    return np_pairwise(y, s, lambda d: math.log1p(math.exp(-d)))


def np_softmax_ce(y, s):
    if y.sum() == 0:
        return 0.0
    log_p = s - np.log(np.exp(s - s.max()).sum()) - s.max()
    return float(-(y / y.sum() * log_p).sum())


def np_list_mle(y, s):
    order = sorted(range(len(y)), key=lambda i: (-y[i], i))
    s = s[order]
    return float(sum(np.log(np.exp(s[i:]).sum()) - s[i] for i in range(len(s))))


def _ranked(y, s):
    """Grades in the order of the scores, best first; ties: lower index first."""
    return y[sorted(range(len(s)), key=lambda i: (-s[i], i))]


def np_ndcg(y, s, k=None, linear=False):
    gain = (lambda g: g) if linear else (lambda g: 2.0**g - 1.0)
    k = len(y) if k is None else k

    def dcg(grades):
        return sum(gain(g) / math.log2(r + 2) for r, g in enumerate(grades[:k]))

    ideal = dcg(np.sort(y)[::-1])
    return dcg(_ranked(y, s)) / ideal if ideal > 0 else 0.0


def np_mrr(y, s, k=None):
    for r, g in enumerate(_ranked(y, s)[: k or len(y)]):
        if g >= 1:
            return 1.0 / (r + 1)
    return 0.0


def np_map(y, s, k=None):
    ranked = _ranked(y, s)[: k or len(y)] >= 1
    relevant = (y >= 1).sum()
    if relevant == 0:
        return 0.0
    hits = [ranked[: r + 1].sum() / (r + 1) for r in range(len(ranked)) if ranked[r]]
    return sum(hits) / relevant


def np_recall(y, s, k):
    relevant = (y >= 1).sum()
    return (_ranked(y, s)[:k] >= 1).sum() / relevant if relevant else 0.0


def np_precision(y, s, k):
    top = _ranked(y, s)[:k]
    return (top >= 1).sum() / len(top) if len(top) else 0.0


# ------------------------------------------------------------------- inputs


def _batch(seed=0, batch=7, size=6, grades=4):
    """Graded lists with padding (as -1), one empty list and one without
    relevance; scores without ties. Returns (labels with -1, scores, mask)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, grades, size=(batch, size)).astype("float32")
    scores = rng.normal(size=(batch, size)).astype("float32")
    mask = np.ones((batch, size), bool)
    mask[1, 4:] = False
    mask[2, 1:] = False  # one item
    mask[3] = False  # empty
    mask[5, :3] = False  # padding first
    labels[4] = 0.0  # no relevance
    padded = np.where(mask, labels, -1.0).astype("float32")
    return padded, scores, mask


LOSSES = [
    (losses.PairwiseHingeLoss(), np_hinge),
    (losses.PairwiseHingeLoss(margin=0.3), lambda y, s: np_hinge(y, s, 0.3)),
    (losses.PairwiseLogisticLoss(), np_logistic),
    (losses.ListwiseSoftmaxLoss(), np_softmax_ce),
    (losses.ListMLELoss(), np_list_mle),
]


@pytest.mark.parametrize("loss, formula", LOSSES, ids=lambda x: getattr(x, "name", ""))
def test_losses_equal_their_formulas_per_list_padded_and_empty(loss, formula):
    labels, scores, mask = _batch()
    expected = [formula(y, s) for y, s in _lists(labels, scores, mask)]
    assert expected[3] == 0.0  # the empty list
    per_list = loss.__class__.from_config({**loss.get_config(), "reduction": "none"})
    got = np.asarray(per_list(labels, scores))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    # Keras reduces the lists by their mean, sample weights weighting them.
    np.testing.assert_allclose(
        float(loss(labels, scores)), np.mean(expected), rtol=1e-6, atol=1e-6
    )
    weights = np.arange(7, dtype="float32")
    np.testing.assert_allclose(
        float(loss(labels, scores, sample_weight=weights)),
        np.sum(weights * np.array(expected)) / 7,
        rtol=1e-6,
        atol=1e-6,
    )
    # A mask given as a dict is the same as the -1 padding.
    as_dict = {"labels": np.where(mask, labels, 0.0), "mask": mask}
    np.testing.assert_allclose(
        np.asarray(per_list(as_dict, scores)), expected, rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("loss", [x for x, _ in LOSSES[1:]], ids=lambda x: x.name)
def test_losses_ignore_padded_values_and_give_finite_zero_gradients_there(loss):
    labels, scores, mask = _batch(seed=1)
    noisy = np.where(mask, scores, 1e4 * np.sign(scores)).astype("float32")
    base = float(loss(labels, scores))
    assert float(loss(labels, noisy)) == pytest.approx(base, rel=1e-6, abs=1e-6)
    for dtype in ("float32", "float16"):
        y_pred = tf.constant(noisy, dtype)
        with tf.GradientTape() as tape:
            tape.watch(y_pred)
            value = loss(labels, y_pred)
        grad = np.asarray(tape.gradient(value, y_pred), "float64")
        assert value.dtype == tf.float32 and np.isfinite(float(value))
        assert np.all(np.isfinite(grad)) and np.all(grad[~mask] == 0)
        assert np.abs(grad[mask]).sum() > 0


def test_loss_of_only_empty_lists_is_zero_not_nan():
    for loss, _ in LOSSES:
        value = loss(-np.ones((2, 3), "float32"), np.zeros((2, 3), "float32"))
        assert float(value) == 0.0, loss.name


def test_a_single_list_and_bad_shapes():
    loss = losses.ListMLELoss()
    y, s = np.array([2.0, 0.0, 1.0]), np.array([0.3, -1.0, 2.0])
    assert float(loss(y, s)) == pytest.approx(np_list_mle(y, s), rel=1e-6)
    with pytest.raises(ValueError, match="`y_true` and `y_pred` must have the same"):
        loss(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match='must hold "labels"'):
        loss({"mask": np.ones((2, 3), bool)}, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="`margin` must be a finite number >= 0"):
        losses.PairwiseHingeLoss(margin=-1.0)


METRICS = [
    (metrics.NDCG(), np_ndcg),
    (metrics.NDCG(k=3), lambda y, s: np_ndcg(y, s, 3)),
    (metrics.NDCG(k=2, gain="linear"), lambda y, s: np_ndcg(y, s, 2, linear=True)),
    (metrics.MRR(), np_mrr),
    (metrics.MRR(k=2), lambda y, s: np_mrr(y, s, 2)),
    (metrics.MAP(), np_map),
    (metrics.MAP(k=3), lambda y, s: np_map(y, s, 3)),
    (metrics.RecallAtK(3), lambda y, s: np_recall(y, s, 3)),
    (metrics.PrecisionAtK(4), lambda y, s: np_precision(y, s, 4)),
]


@pytest.mark.parametrize(
    "metric, formula", METRICS, ids=lambda x: getattr(x, "name", "")
)
def test_metrics_equal_their_formulas_and_stream_over_batches(metric, formula):
    labels, scores, mask = _batch(seed=2, batch=9, size=7)
    lists = _lists(labels, scores, mask)
    per_list = np.array([formula(y, s) for y, s in lists])
    counted = mask.any(axis=1)  # an empty list has weight 0
    # Two batches, streamed: the mean over every non-empty list seen.
    metric.reset_state()
    metric.update_state(labels[:4], scores[:4])
    metric.update_state(labels[4:], scores[4:])
    expected = per_list[counted].mean()
    np.testing.assert_allclose(float(metric.result()), expected, rtol=1e-6, atol=1e-6)
    # List weights.
    weights = np.linspace(0.5, 2.0, 9).astype("float32")
    metric.reset_state()
    metric.update_state(labels, scores, sample_weight=weights)
    w = weights * counted
    np.testing.assert_allclose(
        float(metric.result()), (w * per_list).sum() / w.sum(), rtol=1e-6, atol=1e-6
    )
    # The padded values change nothing.
    metric.reset_state()
    noise = np.random.default_rng(3).normal(scale=50, size=scores.shape)
    metric.update_state(
        {"labels": np.where(mask, labels, 5.0), "mask": mask},
        np.where(mask, scores, noise).astype("float32"),
    )
    np.testing.assert_allclose(float(metric.result()), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("metric", [m for m, _ in METRICS], ids=lambda m: m.name)
def test_metrics_of_empty_lists_are_zero_not_nan(metric):
    metric.reset_state()
    assert float(metric.result()) == 0.0
    metric.update_state(-np.ones((3, 4), "float32"), np.zeros((3, 4), "float32"))
    assert float(metric.result()) == 0.0
    metric.update_state(np.zeros((2, 4), "float32"), np.ones((2, 4), "float32"))
    assert float(metric.result()) == 0.0  # lists without relevance count, as 0


def test_ties_rank_the_lower_index_first():
    y, s = np.array([[0.0, 1.0]]), np.array([[0.5, 0.5]])
    mrr = metrics.MRR()
    mrr.update_state(y, s)
    assert float(mrr.result()) == 0.5


def test_ndcg_equals_scikit_learns_on_ragged_lists():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    labels, scores, mask = _batch(seed=4, batch=12, size=8, grades=5)
    mask[2:4] = True  # scikit-learn needs at least two items a list
    mask[3, 6:] = False
    labels = np.where(mask, np.abs(labels), -1.0).astype("float32")
    for k in (None, 3, 5):
        ours = metrics.NDCG(k=k, gain="linear")
        ours.update_state(labels, scores)
        # scikit-learn takes no padding: one call per list of its real items.
        theirs = [
            sklearn_metrics.ndcg_score(y[None], s[None], k=k)
            for y, s in _lists(labels, scores, mask)
        ]
        np.testing.assert_allclose(
            float(ours.result()), np.mean(theirs), rtol=1e-6, atol=1e-6
        )


def test_config_round_trip_and_compile_save_load(tmp_path):
    for item in [m for m, _ in METRICS] + [x for x, _ in LOSSES]:
        config = item.get_config()
        assert item.__class__.from_config(config).get_config() == config
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(5)(inputs))
    model.compile(
        "adam",
        loss=losses.ListMLELoss(),
        metrics=[metrics.NDCG(k=3), metrics.RecallAtK(2)],
    )
    x = np.random.default_rng(0).normal(size=(8, 4)).astype("float32")
    y, _, _ = _batch(seed=5, batch=8, size=5)
    history = model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    assert {"loss", "ndcg@3", "recall@2"} <= set(history.history)
    path = str(tmp_path / "ranker.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    np.testing.assert_allclose(
        reloaded.predict(x, verbose=0), model.predict(x, verbose=0)
    )
    assert isinstance(reloaded.loss, losses.ListMLELoss)


# -------------------------------------------------- keras-rs on the same inputs


def _keras_rs():
    return pytest.importorskip("keras_rs", reason="keras-rs is not installed")


@pytest.mark.generation_neutral
@pytest.mark.skipif(not KERAS_3, reason="keras-rs is a Keras 3 library")
def test_losses_equal_keras_rs():
    rs = _keras_rs()
    labels, scores, mask = _batch(seed=6)
    pairs = np.array([len(_pairs(y)) for y, _ in _lists(labels, scores, mask)])
    for ours, theirs in [
        (losses.PairwiseHingeLoss, rs.losses.PairwiseHingeLoss),
        (losses.PairwiseLogisticLoss, rs.losses.PairwiseLogisticLoss),
    ]:
        mine = np.asarray(ours(reduction="none")(labels, scores))
        # keras-rs keeps each item's sum over its pairs: the list's sum is ours
        # (a mean over the pairs) times the number of pairs.
        per_item = np.asarray(theirs(reduction=None)(labels, scores))
        np.testing.assert_allclose(
            mine * pairs, per_item.sum(axis=-1), rtol=1e-6, atol=1e-5
        )
    mine = np.asarray(losses.ListMLELoss(reduction="none")(labels, scores))
    theirs = np.asarray(rs.losses.ListMLELoss(reduction=None)(labels, scores))
    np.testing.assert_allclose(mine, theirs.reshape(-1), rtol=1e-6, atol=1e-5)


@pytest.mark.generation_neutral
@pytest.mark.skipif(not KERAS_3, reason="keras-rs is a Keras 3 library")
def test_metrics_equal_keras_rs():
    rs = _keras_rs()
    labels, scores, mask = _batch(seed=7, batch=10, size=8)
    pairs = [
        (metrics.NDCG(k=4), rs.metrics.NDCG(k=4, shuffle_ties=False)),
        (metrics.NDCG(), rs.metrics.NDCG(shuffle_ties=False)),
        (metrics.MRR(), rs.metrics.MeanReciprocalRank(shuffle_ties=False)),
        (metrics.MAP(k=5), rs.metrics.MeanAveragePrecision(k=5, shuffle_ties=False)),
        (metrics.RecallAtK(3), rs.metrics.RecallAtK(k=3, shuffle_ties=False)),
        (metrics.PrecisionAtK(3), rs.metrics.PrecisionAtK(k=3, shuffle_ties=False)),
    ]
    for ours, theirs in pairs:
        ours.update_state(labels, scores)
        theirs.update_state({"labels": np.where(mask, labels, 0), "mask": mask}, scores)
        np.testing.assert_allclose(
            float(ours.result()),
            float(theirs.result()),
            rtol=1e-6,
            atol=1e-6,
            err_msg=ours.name,
        )
