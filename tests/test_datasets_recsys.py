"""The MovieLens (DIN) and raw Criteo loaders, on small files written here and on
the real copies under ../shared/data when present."""

import gzip
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from keras_attn.datasets import (
    criteo_features,
    criteo_integer_bucket,
    load_criteo,
    load_movielens_din,
    movielens_din_features,
)
from keras_attn.datasets.criteo import CRITEO_COLUMNS
from keras_attn.datasets.movielens import MOVIELENS_GENRES

pytestmark = pytest.mark.generation_neutral

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# user, item, rating, time: user 1 rates items 11 and 12 in the same second, and
# user 2's ratings are written out of time order; item 16 is only ever a test item.
RATINGS = [
    (1, 10, 5, 100),
    (1, 12, 4, 300),
    (1, 11, 2, 300),
    (1, 13, 3, 400),
    (1, 14, 4, 500),
    (1, 15, 1, 600),
    (2, 13, 4, 900),
    (2, 16, 2, 1000),
    (2, 10, 3, 50),
    (2, 11, 5, 70),
    (2, 14, 1, 80),
    (3, 15, 4, 10),
    (3, 10, 4, 20),
]


def _item_line(item, title, flags):
    genres = ["1" if g in flags else "0" for g in MOVIELENS_GENRES]
    return "|".join([str(item), title, "01-Jan-1995", "", "http://x"] + genres)


def _write_movielens(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"{u}\t{i}\t{r}\t{t}" for u, i, r, t in RATINGS]
    with gzip.open(folder / "ratings_dev.tsv.gz", "wt") as f:
        f.write("\n".join(lines) + "\n")
    items = [
        _item_line(10, "Amélie (2001)", {"Comedy", "Romance"}),  # Latin-1 title
        _item_line(11, "B", {"Action"}),
        _item_line(12, "C", {"Drama"}),
        _item_line(13, "D", {"Action", "Sci-Fi", "Thriller"}),
        _item_line(14, "E", {"unknown"}),
        _item_line(15, "F", set()),
        _item_line(16, "G", {"War"}),
    ]
    (folder / "u.item").write_bytes(("\n".join(items) + "\n").encode("latin-1"))
    users = ["1|24|M|technician|85711", "2|53|F|other|94043", "3|23|M|writer|32067"]
    (folder / "u.user").write_text("\n".join(users) + "\n")
    return folder


def _expected_history(user, time, n):
    """Written out directly: the user's items of strictly earlier time, ordered by
    (time, item), the last n."""
    earlier = sorted((t, i) for u, i, _, t in RATINGS if u == user and t < time)
    return [i for _, i in earlier][-n:]


@pytest.fixture
def movielens(tmp_path):
    return _write_movielens(tmp_path / "ml")


@pytest.mark.parametrize("n", [1, 2, 50])
def test_history_is_the_most_recent_strictly_earlier_items(movielens, n):
    data = load_movielens_din(movielens, history_length=n, test_ratings=1)
    rows = pd.concat([data.train, data.test])
    assert len(rows) == len(RATINGS)
    for row in rows.itertuples():
        expected = _expected_history(row.user_id, row.timestamp, n)
        got = [int(i) for i in row.hist_item_id.split("|")] if row.hist_item_id else []
        assert got == expected, row
        assert row.history_length == len(expected)
        assert len(row.hist_genres.split("|")) == len(expected) or not expected
    # The two ratings of user 1 at time 300 are not in each other's history.
    tied = rows[(rows.user_id == 1) & (rows.timestamp == 300)]
    assert (tied.hist_item_id == "10").all()


def test_time_split_puts_each_users_last_ratings_in_test(movielens):
    data = load_movielens_din(movielens, test_ratings=2, validation_ratings=1)
    by_user = {}
    for u, i, _, t in RATINGS:
        by_user.setdefault(u, []).append((t, i))
    for user, events in by_user.items():
        events = sorted(events)  # ties by item id
        test = data.test[data.test.user_id == user]
        val = data.validation[data.validation.user_id == user]
        train = data.train[data.train.user_id == user]
        assert list(test.item_id) == [i for _, i in events[-2:]]
        assert list(val.item_id) == [i for _, i in events[-3:-2]]
        assert list(train.item_id) == [i for _, i in events[:-3]]
        if len(train):
            assert train.timestamp.max() <= test.timestamp.min()
    # User 3 has two ratings: both are test, none train or validation.
    assert (data.test.user_id == 3).sum() == 2
    assert not (data.train.user_id == 3).any()
    assert len(data.train) + len(data.validation) + len(data.test) == len(RATINGS)


def test_labels_users_and_genres(movielens):
    data = load_movielens_din(movielens, test_ratings=1)
    rows = pd.concat([data.train, data.test])
    ratings = {(u, i): r for u, i, r, _ in RATINGS}
    for row in rows.itertuples():
        assert row.rating == ratings[(row.user_id, row.item_id)]
        assert row.label == int(row.rating >= 4)
    first = rows[rows.item_id == 10].iloc[0]
    assert first.genres == "Comedy,Romance"
    assert rows[rows.item_id == 13].iloc[0].genres == "Action,Sci-Fi,Thriller"
    assert rows[rows.item_id == 15].iloc[0].genres == "unknown"  # no flag set
    user2 = rows[rows.user_id == 2].iloc[0]
    assert (user2.age, user2.gender, user2.occupation) == (53.0, "F", "other")
    # hist_genres is the genres of the history's items, in the same order.
    row = data.test[data.test.user_id == 1].iloc[0]  # item 15 at 600
    assert row.hist_genres.split("|") == [
        "Comedy,Romance",
        "Action",
        "Drama",
        "Action,Sci-Fi,Thriller",
        "unknown",
    ]


def test_features_fit_on_train_and_share_tables(movielens):
    data = load_movielens_din(movielens, history_length=3, test_ratings=1)
    specs = {f.name: f for f in movielens_din_features(data.train, history_length=3)}
    assert specs["hist_item_id"].shares == "item_id"
    assert specs["hist_genres"].shares == "genres"
    assert specs["hist_item_id"].max_len == 3
    # Item 16 is rated once, as user 2's last rating: a test item only.
    assert 16 not in specs["item_id"].vocabulary
    assert set(specs["item_id"].vocabulary) == set(data.train.item_id)
    assert specs["age"].mean == pytest.approx(data.train.age.mean(), rel=1e-6)
    names = {
        f.name
        for f in movielens_din_features(
            data.train, embed_user=False, genre_history=False
        )
    }
    assert "user_id" not in names and "hist_genres" not in names
    assert "hist_item_id" in names


def test_movielens_bad_arguments(movielens, tmp_path):
    with pytest.raises(ValueError, match="history_length"):
        load_movielens_din(movielens, history_length=0)
    with pytest.raises(ValueError, match="test_ratings"):
        load_movielens_din(movielens, test_ratings=0)
    with pytest.raises(ValueError, match="path_or_dir"):
        load_movielens_din(tmp_path / "absent")
    (movielens / "u.user").unlink()
    with pytest.raises(ValueError, match="u.user"):
        load_movielens_din(movielens)


# ----------------------------------------------------------------------- Criteo


def _bucket_reference(x):
    # AutoInt's transform written out with NumPy: floor(ln(x)^2) above 2.
    return str(int(np.floor(np.log(np.float64(x)) ** 2))) if x > 2 else str(int(x))


@pytest.mark.parametrize("x", [-3, -1, 0, 1, 2, 3, 7, 8, 100, 1382, 10**6])
def test_integer_bucket_matches_formula(x):
    assert criteo_integer_bucket(str(x)) == _bucket_reference(x)


def test_integer_bucket_missing_and_bad():
    assert criteo_integer_bucket("") == ""
    with pytest.raises(ValueError, match="number"):
        criteo_integer_bucket("abc")
    with pytest.raises(ValueError, match="whole number"):
        criteo_integer_bucket("2.5")


def _raw_line(label, integers, categories):
    return "\t".join([str(label), *integers, *categories])


def test_load_criteo_raw_lines(tmp_path):
    full = _raw_line(1, ["5", "", "-1"] + ["2"] * 10, ["a1"] * 25 + ["z9"])
    missing = _raw_line(0, [""] * 13, ["", "b2"] + [""] * 24)
    short = "0\t100\t1"  # its 37 trailing empty fields left out
    path = tmp_path / "raw.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join([full, missing, short]) + "\n")
    df = load_criteo(path)
    assert list(df.columns) == list(CRITEO_COLUMNS)
    assert df["label"].tolist() == [1, 0, 0]
    assert df.loc[0, "I1"] == str(math.floor(math.log(5) ** 2))
    assert df.loc[0, "I2"] == "" and df.loc[0, "I3"] == "-1"
    assert df.loc[0, "C26"] == "z9"
    assert (df.loc[1, [f"I{i}" for i in range(1, 14)]] == "").all()
    assert df.loc[1, "C2"] == "b2" and df.loc[1, "C1"] == ""
    assert df.loc[2, "I1"] == _bucket_reference(100) and df.loc[2, "I2"] == "1"
    assert (df.loc[2, "I3":] == "").all()
    assert len(load_criteo(path, nrows=2)) == 2
    specs = criteo_features(df)
    assert len(specs) == 39
    by_name = {f.name: f for f in specs}
    assert by_name["C26"].vocabulary == ["z9"]  # missing values are not a value
    assert criteo_features(df, min_frequency=2)[0].vocabulary == []


def test_load_criteo_bad_lines(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("\t".join(["1"] * 41) + "\n")
    with pytest.raises(ValueError, match="41 tab-separated fields"):
        load_criteo(path)
    path.write_text("x\t1\n")
    with pytest.raises(ValueError, match="label 0 or 1"):
        load_criteo(path)
    with pytest.raises(ValueError, match="path"):
        load_criteo(tmp_path / "absent.txt")
    with pytest.raises(ValueError, match="nrows"):
        load_criteo(path, nrows=0)


# ------------------------------------------------------------------- real files


def test_real_files():
    ml, criteo = DATA / "movielens_100k", DATA / "criteo" / "criteo_8k.tsv.gz"
    if not (ml / "ratings_dev.tsv.gz").exists() or not criteo.exists():
        pytest.skip(
            "../shared/data (MovieLens-100K and criteo_8k) is absent: the real-data "
            "check of the loaders is skipped"
        )
    data = load_movielens_din(ml, history_length=20, test_ratings=10)
    assert len(data.train) + len(data.test) == 80_992
    assert data.test.groupby("user_id").size().eq(10).all()
    assert data.test.user_id.nunique() == 755
    last_train = data.train.groupby("user_id").timestamp.max()
    first_test = data.test.groupby("user_id").timestamp.min()
    assert (last_train <= first_test[last_train.index]).all()
    assert data.train.history_length.max() == 20
    df = load_criteo(criteo)
    assert df.shape == (8000, 40)
    assert int(df["label"].sum()) == 1728  # DATA.md's count of positives
