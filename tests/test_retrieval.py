"""Sequential retrieval: the MovieLens next-item examples, the towers, the metrics,
training with keras_attn's RetrievalTask under both Keras generations (and with
TFRS's task under TF_USE_LEGACY_KERAS=1), `.keras` round trips, the old flat
spelling, and the index export reloaded with TensorFlow alone."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from keras_attn._validation import check_at_most, check_shape
from keras_attn.backend import KERAS_3, keras, tf
from keras_attn.datasets import load_movielens_din, load_movielens_sequences
from keras_attn.layers import HistoryPooling, RetrievalTask
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
from keras_attn.serving import export_retrieval_index
from tests.conftest import shared_data
from tests.harness import run_isolated, run_layer_test
from tests.test_datasets_recsys import RATINGS, _expected_history, _write_movielens

# Calls both signatures of an export with TensorFlow alone; prints JSON.
_SERVE_BOTH = r"""
import json, sys
import tensorflow as tf
def keras_modules():
    return {m for m in sys.modules if m.split(".")[0] in ("keras", "tf_keras")}
baseline = keras_modules()
export_dir, feeds_path = sys.argv[1:3]
loaded = tf.saved_model.load(export_dir)
feeds = json.load(open(feeds_path))
out = {}
for name, history in [
    ("serving_default", tf.constant(feeds["ints"], tf.int64)),
    ("serve_strings", tf.constant(feeds["strings"], tf.string)),
]:
    result = loaded.signatures[name](history=history)
    ids = result["item_ids"].numpy()
    out[name] = {
        "item_ids": ids.astype(str).tolist() if ids.dtype == object else ids.tolist(),
        "scores": result["scores"].numpy().tolist(),
    }
out["forbidden_modules"] = sorted(keras_modules() - baseline) + sorted(
    m for m in sys.modules if m.split(".")[0] == "keras_attn"
)
print(json.dumps(out))
"""

# Keras 3 with TensorFlow Recommenders made unimportable: trains, evaluates and
# recommends with keras_attn's own task; prints JSON.
_WITHOUT_TFRS = r"""
import importlib.abc, json, sys

class _NoTFRS(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tensorflow_recommenders":
            raise ImportError(f"{name} is blocked for this test")
        return None

sys.meta_path.insert(0, _NoTFRS())
import numpy as np
import keras
from keras_attn.models.retrieval import build_sequential_retrieval, fit_retrieval_model

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
history = rng.integers(0, 21, size=(256, 4)).astype("int32")
target = rng.integers(1, 21, size=256).astype("int32")
genres = (rng.random((21, 2)) < 0.5).astype("float32")
model = build_sequential_retrieval(20, num_genres=2, history_length=4,
                                   embedding_dim=8, num_layers=1, item_genres=genres)
before = [w.numpy().copy() for w in model.trainable_weights]
fit = fit_retrieval_model(model, {"history": history, "item": target}, epochs=1,
                          batch_size=64, verbose=0)
indices, scores = model.recommend(history[:3], k=5)
try:
    import tensorflow_recommenders  # noqa: F401
    blocked = False
except ImportError:
    blocked = True
print(json.dumps({
    "keras": keras.version(),
    "blocked": blocked,
    "tfrs_modules": sorted(
        m for m in sys.modules if m.split(".")[0] == "tensorflow_recommenders"
    ),
    "unchanged": [w.path for b, w in zip(before, model.trainable_weights)
                  if np.allclose(b, w.numpy())],
    "weights": len(before),
    "task": type(model.task).__module__,
    "indices": indices.tolist(),
    "finite": bool(np.isfinite(scores).all()),
}))
"""

# u.item of the written files lists items 10..16: indices 1..7 in that order.
INDEX = {raw: i + 1 for i, raw in enumerate(range(10, 17))}


@pytest.fixture
def movielens(tmp_path):
    return _write_movielens(tmp_path / "ml")


def _rows(part):
    return [
        (int(u), int(t), int(i))
        for u, t, i in zip(part.user, part.timestamp, part.item)
    ]


@pytest.mark.parametrize("history_length", [2, 50])
def test_histories_hold_the_strictly_earlier_items_left_padded(
    movielens, history_length
):
    data = load_movielens_sequences(movielens, history_length, test_ratings=2)
    raw_of = {i: raw for raw, i in INDEX.items()}
    checked = 0
    for part in (data.train, data.test):
        for row in range(len(part)):
            user, time = int(part.user[row]), int(part.timestamp[row])
            expected = [INDEX[i] for i in _expected_history(user, time, history_length)]
            history = part.history[row]
            assert history.shape == (history_length,)
            real = history[history != 0].tolist()
            assert real == expected, (user, time, [raw_of[i] for i in real])
            # Left padding: the zeros come first, the most recent item last.
            assert np.all(history[: history_length - len(real)] == 0)
            # Every earlier item, not only the last history_length, is "seen".
            seen = data.seen(part, row).tolist()
            assert seen == [INDEX[i] for i in _expected_history(user, time, 1000)]
            checked += 1
    # The first rating of each user (empty history) is left out; user 1's two
    # ratings at time 300 both have the one earlier item as history.
    assert checked == len(RATINGS) - 3


def test_time_split_matches_the_din_loader(movielens):
    data = load_movielens_sequences(movielens, test_ratings=2, validation_ratings=1)
    din = load_movielens_din(movielens, test_ratings=2, validation_ratings=1)
    for ours, theirs in [
        (data.train, din.train),
        (data.validation, din.validation),
        (data.test, din.test),
    ]:
        theirs = theirs[theirs["history_length"] > 0]  # min_history=1
        expected = [
            (u, t, INDEX[i])
            for u, t, i in zip(
                theirs["user_id"], theirs["timestamp"], theirs["item_id"]
            )
        ]
        assert _rows(ours) == expected
    # No test rating is a training target, and training comes first in time.
    train, test = set(_rows(data.train)), set(_rows(data.test))
    assert not train & test
    for user in {u for u, _, _ in test} & {u for u, _, _ in train}:
        assert max(t for u, t, _ in train if u == user) <= min(
            t for u, t, _ in test if u == user
        )


def test_seen_mask_and_item_table(movielens):
    data = load_movielens_sequences(movielens, test_ratings=2)
    mask = data.seen_mask(data.test)
    assert mask.shape == (len(data.test), 8)
    for row in range(len(data.test)):
        assert sorted(np.flatnonzero(mask[row])) == sorted(data.seen(data.test, row))
        assert not mask[row, data.test.item[row]]  # a user rates an item once
    assert data.num_items == 7
    assert data.items.loc[1, "title"] == "Amélie (2001)"
    assert data.items.loc[4, "genres"] == "Action|Sci-Fi|Thriller"
    assert data.item_genres.shape == (8, 19) and not data.item_genres[0].any()
    assert data.item_genres[4].sum() == 3


def test_real_movielens_split():
    folder = shared_data("movielens_100k")
    data = load_movielens_sequences(folder, history_length=50, test_ratings=10)
    assert len(data.test) == 7550  # 755 users x 10
    assert data.num_items == 1682
    test_pairs = set(zip(data.test.user.tolist(), data.test.item.tolist()))
    train_pairs = set(zip(data.train.user.tolist(), data.train.item.tolist()))
    assert not test_pairs & train_pairs


def test_loader_arguments_are_checked(movielens):
    with pytest.raises(ValueError, match="`history_length` must be a positive"):
        load_movielens_sequences(movielens, history_length=0)
    with pytest.raises(ValueError, match="`min_history` must be"):
        load_movielens_sequences(movielens, min_history=-1)


def test_pack_histories_keeps_the_last_items_of_any_layout():
    packed = pack_histories([[0, 4, 0, 5, 6], [7, 0, 0, 0, 0], [0, 0, 0, 0, 0]], 2)
    assert packed.tolist() == [[5, 6], [0, 7], [0, 0]]


def test_history_pooling_last_attention_mean_and_empty_rows():
    states = np.arange(24, dtype="float32").reshape(2, 3, 4)
    mask = np.array([[True, True, False], [False, False, False]])
    last = HistoryPooling("last")(states, mask=mask).numpy()
    np.testing.assert_array_equal(last, [[4, 5, 6, 7], [0, 0, 0, 0]])
    mean = HistoryPooling("mean")(states, mask=mask).numpy()
    np.testing.assert_allclose(mean, [[2, 3, 4, 5], [0, 0, 0, 0]])
    pooled = HistoryPooling("attention", units=4)(states, mask=mask).numpy()
    assert np.all(np.isfinite(pooled)) and not pooled[1].any()
    with pytest.raises(ValueError, match="`pooling` must be one of"):
        HistoryPooling("max")


@pytest.mark.slow
def test_history_pooling_keeps_the_layer_contracts():
    # The attention pooling, the form with weights; "last" is checked above.
    rng = np.random.default_rng(0)
    mask = np.array([[True, True, False], [False, False, False], [True] * 3])
    run_layer_test(
        HistoryPooling,
        {"pooling": "attention", "units": 4},
        {"inputs": rng.normal(size=(3, 3, 5)).astype("float32"), "mask": mask},
        (3, 5),
        expected_num_trainable_weights=3,
    )


@pytest.mark.slow
def test_history_encoder_masks_padding_and_zeroes_empty_histories():
    tower = HistoryEncoder(
        num_items=20, history_length=4, embedding_dim=8, num_layers=1
    )
    out = tower({"history": np.array([[0, 3, 5, 2], [0, 0, 0, 0]])}).numpy()
    assert out.shape == (2, 8)
    assert np.abs(out[0]).sum() > 0
    np.testing.assert_array_equal(out[1], np.zeros(8))
    # The causal last state depends on every earlier real item.
    other = tower({"history": np.array([[0, 4, 5, 2]])}).numpy()
    assert not np.allclose(other[0], out[0])


def test_towers_config_round_trip_and_genre_table():
    tower = HistoryEncoder(
        num_items=9, history_length=3, embedding_dim=8, num_layers=1, pooling="mean"
    )
    config = tower.get_config()
    assert config["pooling"] == "mean" and config["num_layers"] == 1
    assert HistoryEncoder.from_config(config).get_config() == config
    genres = np.eye(10, 2, k=-1, dtype="float32")
    items = ItemEncoder(num_items=9, num_genres=2, embedding_dim=4, item_genres=genres)
    np.testing.assert_array_equal(items.genre_table.get_weights()[0], genres)
    assert not items.genre_table.trainable_weights
    with pytest.raises(ValueError, match=r"`item_genres` must have shape \(10, 2\)"):
        items.set_item_genres(np.zeros((9, 2)))


def test_top_k_metrics_ranks_ties_exclusion_and_intervals():
    scores = np.array([[-np.inf, 3.0, 2.0, 2.0, 1.0]] * 4)
    targets = np.array([3, 4, 1, 2])
    exclude = np.zeros_like(scores, dtype=bool)
    exclude[1, [1, 2]] = True  # row 1: two better items already seen
    out = top_k_metrics(
        scores, targets, users=[7, 7, 8, 9], exclude=exclude, ks=(1, 2), ndcg_k=2
    )
    # Ties go to the lower index: item 3 ranks after item 2.
    assert out["ranks"].tolist() == [2, 1, 0, 1]
    assert out["recall@1"][0] == 0.25 and out["recall@2"][0] == 0.75
    assert out["ndcg@2"][0] == pytest.approx(
        (0 + 1 / np.log2(3) + 1 + 1 / np.log2(3)) / 4
    )
    value, low, high = out["recall@2"]
    assert low <= value <= high and low < high
    popular = most_popular_scores([1, 1, 2, 3, 3, 3], num_items=4)
    assert popular.tolist() == [-np.inf, 2, 1, 3, 0]
    one_row = top_k_metrics(popular, [4, 3], users=[1, 2], ks=(1,), ndcg_k=None)
    assert one_row["ranks"].tolist() == [3, 0]
    with pytest.raises(ValueError, match="`users` must have shape"):
        top_k_metrics(scores, targets, users=[1, 2])


def test_shape_and_limit_checks_name_the_argument():
    with pytest.raises(
        ValueError,
        match=r"`k` must be at most the number of items \(5\)\. Received: k=6",
    ):
        check_at_most("k", 6, 5, "the number of items")
    check_at_most("k", 5, 5, "the number of items")
    with pytest.raises(
        ValueError, match=r"`x` must have shape \(2, None\) \(rows, any\)"
    ):
        check_shape("x", (3, 4), (2, None), "(rows, any)")
    check_shape("x", (2, 9), (2, None))


def _small(**kwargs):
    return build_sequential_retrieval(
        40,
        num_genres=3,
        history_length=6,
        embedding_dim=16,
        num_layers=1,
        **kwargs,
    )


def test_towers_are_objects_and_the_flat_call_still_works_with_a_warning():
    query = HistoryEncoder(num_items=9, history_length=3, embedding_dim=8)
    items = ItemEncoder(num_items=9, num_genres=2, embedding_dim=8)
    model = SequentialRetrieval(query, items)
    assert model.query_tower is query and model.candidate_tower is items
    assert (model.num_items, model.history_length) == (9, 3)
    assert isinstance(model.task, RetrievalTask) and model.task.remove_accidental_hits
    with pytest.warns(DeprecationWarning, match="build_sequential_retrieval"):
        old = SequentialRetrieval(num_items=9, num_genres=2, history_length=3)
    assert isinstance(old.query_tower, HistoryEncoder)
    assert old.candidate_tower.num_genres == 2 and old.history_length == 3
    with pytest.raises(ValueError, match="`candidate_tower` must be a Keras model"):
        SequentialRetrieval(query, "items")
    with pytest.raises(TypeError, match="build_sequential_retrieval"):
        SequentialRetrieval(query, items, embedding_dim=8)


def test_moved_names_warn_and_resolve():
    import keras_attn.layers
    import keras_attn.models
    import keras_attn.models.retrieval as retrieval
    import keras_attn.serving

    for module in (retrieval, keras_attn.models):
        with pytest.warns(DeprecationWarning, match="moved to"):
            assert module.HistoryPooling is keras_attn.layers.HistoryPooling
        with pytest.warns(DeprecationWarning, match="keras_attn.serving.retrieval"):
            moved = module.export_retrieval_index
        assert moved is keras_attn.serving.export_retrieval_index


@pytest.mark.slow
def test_keras_round_trip_keeps_towers_task_and_genre_table(tmp_path):
    _, _, genres = _synthetic(n=8)
    model = _small(item_genres=genres, num_hard_negatives=5, temperature=0.5)
    history = np.array([[0, 0, 3, 4, 5, 6], [0, 0, 0, 0, 0, 9]], "int32")
    path = str(tmp_path / "retrieval.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    assert isinstance(reloaded, SequentialRetrieval)
    assert isinstance(reloaded.query_tower, HistoryEncoder)
    assert reloaded.task.get_config() == model.task.get_config()
    np.testing.assert_allclose(
        reloaded.scores(history)[:, 1:], model.scores(history)[:, 1:], atol=1e-5
    )
    np.testing.assert_array_equal(
        reloaded.candidate_tower.genre_table.get_weights()[0], genres
    )


@pytest.mark.slow
@pytest.mark.generation_neutral
def test_retrieval_trains_under_keras_3_without_tensorflow_recommenders():
    # A fresh Keras 3 process (whichever generation runs the tests) in which
    # `import tensorflow_recommenders` fails, as on a machine without it.
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env.update(PYTHONPATH=str(root), TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TFRS],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["keras"].startswith("3.") and out["blocked"]
    assert out["tfrs_modules"] == []
    assert out["task"] == "keras_attn.layers.retrieval"
    assert out["unchanged"] == [] and out["weights"] > 0
    indices = np.array(out["indices"])
    assert indices.shape == (3, 5) and out["finite"]
    assert ((indices >= 1) & (indices <= 20)).all()


@pytest.mark.skipif(KERAS_3, reason="tensorflow-recommenders needs Keras 2")
def test_a_tfrs_task_has_no_config_and_says_so():
    tfrs = pytest.importorskip("tensorflow_recommenders")
    model = SequentialRetrieval(
        HistoryEncoder(num_items=9, history_length=3, embedding_dim=8),
        ItemEncoder(num_items=9, num_genres=2, embedding_dim=8),
        task=tfrs.tasks.Retrieval(),
    )
    with pytest.raises(NotImplementedError, match="save_weights"):
        model.get_config()


def _synthetic(num_items=40, history_length=6, n=3072, seed=0):
    """Histories of consecutive items; the target is the next one (1-based,
    wrapping): learnable from the last item alone."""
    rng = np.random.default_rng(seed)
    history = np.zeros((n, history_length), "int32")
    lengths = rng.integers(1, history_length + 1, n)
    starts = rng.integers(0, num_items, n)
    for row, (length, start) in enumerate(zip(lengths, starts)):
        history[row, history_length - length :] = (start + np.arange(length)) % (
            num_items
        ) + 1
    target = (history[:, -1] % num_items + 1).astype("int32")
    genres = np.zeros((num_items + 1, 3), "float32")
    genres[1:, 0] = 1
    return history, target, genres


@pytest.mark.slow
@pytest.mark.parametrize("task", ["native", "tfrs"])
def test_trains_and_beats_chance_on_a_synthetic_sequence_task(task):
    if task == "tfrs" and KERAS_3:
        pytest.skip("tensorflow-recommenders needs Keras 2")
    keras.utils.set_random_seed(0)
    history, target, genres = _synthetic()
    model = _small(item_genres=genres, dropout=0.0)
    if task == "tfrs":  # TFRS's own task on the same towers
        tfrs = pytest.importorskip("tensorflow_recommenders")
        model = SequentialRetrieval(
            model.query_tower,
            model.candidate_tower,
            task=tfrs.tasks.Retrieval(remove_accidental_hits=True),
        )
    train = {"history": history[:2560], "item": target[:2560]}
    model.candidate_embeddings()  # builds both towers
    model(train)
    before = [w.numpy().copy() for w in model.trainable_weights]
    fit_retrieval_model(
        model, train, epochs=3, batch_size=128, learning_rate=5e-3, verbose=0
    )
    changed = [
        not np.allclose(b, w.numpy()) for b, w in zip(before, model.trainable_weights)
    ]
    assert len(before) > 10 and all(changed)
    scores = model.scores(history[2560:])
    out = top_k_metrics(scores, target[2560:], users=np.arange(512), ks=(1, 5))
    # Chance is 1/40 at k=1 and 5/40 at k=5.
    assert out["recall@1"][1] > 0.3, out["recall@1"]
    assert out["recall@5"][1] > 0.6, out["recall@5"]


def test_an_existing_index_export_is_replaced_only_when_asked(tmp_path):
    # export_retrieval_index swapped out whatever stood at `export_dir`, silently.
    old = tmp_path / "index"
    old.mkdir()
    (old / "saved_model.pb").write_text("the served model")
    model = _small()
    model.candidate_embeddings()
    vocabulary = np.arange(1001, 1041)
    with pytest.raises(ValueError, match=r"index' already exists.*overwrite=True"):
        export_retrieval_index(model, str(old), vocabulary, k=5)
    assert (old / "saved_model.pb").read_text() == "the served model"
    export_retrieval_index(model, str(old), vocabulary, k=5, overwrite=True)
    assert (old / "saved_model.pb").read_bytes() != b"the served model"


@pytest.mark.slow
def test_export_maps_raw_histories_to_the_models_top_k_in_tensorflow_alone(tmp_path):
    keras.utils.set_random_seed(0)
    history, target, genres = _synthetic(n=512)
    model = _small(item_genres=genres)
    fit_retrieval_model(
        model, {"history": history, "item": target}, epochs=1, batch_size=128, verbose=0
    )
    vocabulary = np.arange(1001, 1041)  # raw ids of indices 1..40
    path = export_retrieval_index(model, str(tmp_path / "index"), vocabulary, k=5)
    # Raw histories of different lengths, right-padded, one longer than the
    # model's 6 positions (its 6 most recent items are encoded), one empty of
    # known items (an unknown id is padding).
    raw = np.zeros((4, 9), "int64")
    raw[0, :3] = [1007, 1008, 1009]
    raw[1, :9] = np.arange(1011, 1020)
    raw[2, :2] = [1040, 1001]
    raw[3, :1] = [99]
    indices = np.where(raw > 0, raw - 1000, 0)
    indices[3] = 0
    # The expected top 5 in NumPy: every item's score, the history's items out.
    scores = model.scores(pack_histories(indices[:3], 6))
    for row in range(3):
        scores[row, indices[row]] = -np.inf
    expected = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    expected_scores = np.take_along_axis(scores, expected, axis=1)
    recommended, recommended_scores = model.recommend(indices[:3], k=5)
    np.testing.assert_array_equal(recommended, expected)
    np.testing.assert_allclose(recommended_scores, expected_scores, rtol=1e-5)
    strings = np.where(raw > 0, raw.astype(str), "")
    # Both signatures in one TensorFlow-only process.
    with open(tmp_path / "feeds.json", "w") as f:
        json.dump({"ints": raw.tolist(), "strings": strings.tolist()}, f)
    proc = run_isolated(_SERVE_BOTH, path, tmp_path / "feeds.json", cwd=tmp_path)
    served = json.loads(proc.stdout.strip().splitlines()[-1])
    assert served["forbidden_modules"] == [], served
    ids = np.asarray(served["serving_default"]["item_ids"])
    assert ids.shape == (4, 5)
    np.testing.assert_array_equal(ids[:3], vocabulary[expected - 1])
    np.testing.assert_allclose(
        np.asarray(served["serving_default"]["scores"])[:3], expected_scores, atol=1e-4
    )
    # No item of the history comes back.
    for row in range(3):
        assert not set(ids[row].tolist()) & set(raw[row].tolist())
    assert served["serve_strings"]["item_ids"] == ids.astype(str).tolist()


@pytest.mark.slow
def test_a_training_step_under_mixed_float16_and_xla():
    # mixed_float16: the custom train step's loss scaling (bfloat16 needs none).
    policy = "mixed_float16"
    history, target, genres = _synthetic(n=128)
    keras.mixed_precision.set_global_policy(policy)
    model = _small(item_genres=genres)
    assert model.query_tower.compute_dtype == policy.split("_")[1]
    data = {"history": history, "item": target}
    data["item_probability"] = np.full(len(target), 1 / 40, "float32")
    model.compile(keras.optimizers.Adam(1e-2), jit_compile=True)
    before = [w.numpy().copy() for w in model.trainable_weights]
    history = model.fit(
        tf.data.Dataset.from_tensor_slices(data).batch(64), epochs=1, verbose=0
    )
    assert np.isfinite(history.history["loss"][-1])
    moved = [
        not np.allclose(b, w.numpy()) for b, w in zip(before, model.trainable_weights)
    ]
    assert all(moved)
