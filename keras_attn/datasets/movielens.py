"""MovieLens-100K as DIN examples: behaviour histories, candidates and a time split.

`load_movielens_din` reads GroupLens' MovieLens-100K files (a ratings file with
`user<TAB>item<TAB>rating<TAB>unix time`, `u.item` and `u.user`) and makes one example
per rating: the rated item is the candidate, the user's items rated strictly earlier
in time (the most recent `history_length`, oldest first) are the behaviour history,
and the label is `rating >= 4`. The split is by time within each user: each user's
last `test_ratings` ratings are the test part, and a validation part, when asked for,
is the last `validation_ratings` of each user's remaining (training) ratings.

MovieLens is for research use only under GroupLens' terms: keras_attn does not ship
it; pass the path of your own copy.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from keras_attn._validation import check_int, check_positive_int
from keras_attn.features.specs import (
    CategoricalFeature,
    NumericFeature,
    SequenceFeature,
    fit_features,
)

__all__ = [
    "MOVIELENS_GENRES",
    "MovieLensDIN",
    "load_movielens_din",
    "movielens_din_features",
]

#: The 19 genre flags of `u.item`, in file order.
MOVIELENS_GENRES = (
    "unknown",
    "Action",
    "Adventure",
    "Animation",
    "Children's",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Fantasy",
    "Film-Noir",
    "Horror",
    "Musical",
    "Mystery",
    "Romance",
    "Sci-Fi",
    "Thriller",
    "War",
    "Western",
)
_RATINGS_NAMES = ("ratings_dev.tsv.gz", "u.data", "ratings.tsv", "ratings.tsv.gz")
_SEPARATOR = "|"  # between the ids of a history
_GENRE_JOINER = ","  # between the genres of one item (the history uses "|")


class MovieLensDIN(NamedTuple):
    """The DIN examples of `load_movielens_din`, split by time within each user.

    Each DataFrame has the columns `user_id`, `item_id`, `age`, `gender`,
    `occupation`, `genres` (the candidate's genres joined by ","), `hist_item_id`
    and `hist_genres` ("|"-joined, oldest first), `history_length`, `rating`,
    `timestamp` and `label` (1 when `rating >= 4`).
    """

    train: pd.DataFrame
    validation: pd.DataFrame | None
    test: pd.DataFrame


def _paths(path_or_dir) -> tuple[Path, Path, Path]:
    path = Path(path_or_dir)
    if path.is_dir():
        found = [path / n for n in _RATINGS_NAMES if (path / n).exists()]
        if not found:
            raise ValueError(
                f"`path_or_dir` must be a ratings file or a folder holding one of "
                f"{list(_RATINGS_NAMES)}. Received: path_or_dir={str(path_or_dir)!r}"
            )
        ratings, folder = found[0], path
    elif path.exists():
        ratings, folder = path, path.parent
    else:
        raise ValueError(
            "`path_or_dir` must be an existing ratings file or folder. Received: "
            f"path_or_dir={str(path_or_dir)!r}"
        )
    items, users = folder / "u.item", folder / "u.user"
    for p in (items, users):
        if not p.exists():
            raise ValueError(
                f"MovieLens needs {p.name} next to the ratings file; it is absent "
                f"from {str(folder)!r}"
            )
    return ratings, items, users


def _read_ratings(path: Path) -> pd.DataFrame:
    """The ratings file (`u.data`'s layout: user, item, rating, unix time, tab
    separated, gzip allowed) as int64 columns `user_id`, `item_id`, `rating`,
    `timestamp`."""
    return pd.read_csv(
        path,
        sep="\t",
        header=None,
        names=["user_id", "item_id", "rating", "timestamp"],
        dtype="int64",
    )


def _read_item_file(path: Path) -> pd.DataFrame:
    """`u.item` as it is, one row per item in file order: `item_id`, `title`,
    `release`, `video_release`, `url`, then one 0/1 column per genre of
    `MOVIELENS_GENRES`. The one reader of the file (`load_movielens_sequences`
    reads it here too)."""
    # Latin-1 and pipe-separated.
    columns = ["item_id", "title", "release", "video_release", "url"]
    return pd.read_csv(
        path,
        sep="|",
        header=None,
        names=columns + list(MOVIELENS_GENRES),
        encoding="latin-1",
        dtype={"item_id": "int64"},
    )


def _read_items(path: Path) -> pd.DataFrame:
    items = _read_item_file(path)
    flags = items[list(MOVIELENS_GENRES)].to_numpy(dtype=bool)
    names = np.asarray(MOVIELENS_GENRES)
    genres = [_GENRE_JOINER.join(names[row]) or "unknown" for row in flags]
    return pd.DataFrame({"item_id": items["item_id"], "genres": genres})


def _read_users(path: Path) -> pd.DataFrame:
    return pd.read_csv(
        path,
        sep="|",
        header=None,
        names=["user_id", "age", "gender", "occupation", "zip"],
        dtype={"user_id": "int64", "age": "float32", "zip": str},
    ).drop(columns="zip")


def _histories(ratings: pd.DataFrame, genres: dict, history_length: int):
    """The history columns, in the row order of `ratings` (sorted by user, time,
    item): each row's items of strictly earlier time, the last `history_length`."""
    users = ratings["user_id"].to_numpy()
    times = ratings["timestamp"].to_numpy()
    items = ratings["item_id"].to_numpy()
    item_text = items.astype(str)
    genre_text = np.asarray([genres.get(i, "unknown") for i in items], dtype=object)
    hist_items = np.empty(len(ratings), dtype=object)
    hist_genres = np.empty(len(ratings), dtype=object)
    lengths = np.zeros(len(ratings), dtype="int64")
    starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
    ends = np.r_[starts[1:], len(users)]
    for start, end in zip(starts, ends):
        t = times[start:end]
        # Ratings at the same second are not each other's history: the history of
        # row k ends before the first row with its time.
        cut = np.searchsorted(t, t, side="left")
        for k, stop in enumerate(cut):
            first = max(0, stop - history_length)
            row = start + k
            hist_items[row] = _SEPARATOR.join(item_text[start + first : start + stop])
            hist_genres[row] = _SEPARATOR.join(genre_text[start + first : start + stop])
            lengths[row] = stop - first
    return hist_items, hist_genres, lengths


def load_movielens_din(
    path_or_dir: str | Path,
    history_length: int = 50,
    test_ratings: int = 10,
    validation_ratings: int = 0,
    positive_rating: int = 4,
) -> MovieLensDIN:
    """DIN examples from MovieLens-100K files, split by time within each user.

    Each user's ratings are ordered by time, ties by item id. Every rating is one
    example; its history holds the items the user rated strictly earlier in time
    (a rating at the same second is not in it), at most the `history_length` most
    recent, oldest first. A user's last `test_ratings` ratings in that order go to
    the test part (all of them if the user has fewer), the last
    `validation_ratings` of the rest to the validation part, and the rest to
    training. So every training rating of a user is no later than each of their
    test ratings, and test histories hold training items and the user's earlier
    test items: what is known at the time of the prediction.

    Args:
        path_or_dir: the ratings file (`user<TAB>item<TAB>rating<TAB>time`, gzip
            allowed) or the folder holding it, with `u.item` and `u.user` next to it.
        history_length: int. Most recent items kept in a history. Defaults to 50.
        test_ratings: int. Last ratings of each user in the test part. Defaults
            to 10.
        validation_ratings: int. Last training ratings of each user moved to the
            validation part; 0 (the default) gives none.
        positive_rating: int. Ratings at or above it are label 1. Defaults to 4.

    Returns:
        A `MovieLensDIN` of DataFrames `(train, validation, test)` (validation is
        None when `validation_ratings=0`), each sorted by user, time and item.

    Example:

    >>> data = load_movielens_din("../shared/data/movielens_100k")  # doctest: +SKIP
    >>> specs = movielens_din_features(data.train)  # doctest: +SKIP
    """
    check_positive_int("history_length", history_length)
    check_positive_int("test_ratings", test_ratings)
    check_int("validation_ratings", validation_ratings, minimum=0)
    ratings_path, items_path, users_path = _paths(path_or_dir)
    ratings = _read_ratings(ratings_path)
    items = _read_items(items_path)
    users = _read_users(users_path)
    unknown = sorted(set(ratings["user_id"]) - set(users["user_id"]))
    if unknown:
        raise ValueError(
            f"The ratings name users absent from u.user, e.g. {unknown[:5]}"
        )
    ratings = ratings.sort_values(
        ["user_id", "timestamp", "item_id"], kind="stable"
    ).reset_index(drop=True)
    genres = dict(zip(items["item_id"], items["genres"]))
    hist_items, hist_genres, lengths = _histories(ratings, genres, history_length)
    df = ratings.merge(users, on="user_id", how="left", validate="many_to_one")
    df["genres"] = [genres.get(i, "unknown") for i in df["item_id"]]
    df["hist_item_id"] = hist_items
    df["hist_genres"] = hist_genres
    df["history_length"] = lengths
    df["label"] = (df["rating"] >= positive_rating).astype("int64")
    # Position from each user's end: 0 is their last rating.
    from_end = df.groupby("user_id").cumcount(ascending=False).to_numpy()
    columns = [
        "user_id",
        "item_id",
        "age",
        "gender",
        "occupation",
        "genres",
        "hist_item_id",
        "hist_genres",
        "history_length",
        "rating",
        "timestamp",
        "label",
    ]
    df = df[columns]
    test = df[from_end < test_ratings].reset_index(drop=True)
    rest = from_end >= test_ratings
    if validation_ratings:
        val_mask = rest & (from_end < test_ratings + validation_ratings)
        validation = df[val_mask].reset_index(drop=True)
        train = df[rest & ~val_mask].reset_index(drop=True)
    else:
        validation, train = None, df[rest].reset_index(drop=True)
    return MovieLensDIN(train, validation, test)


def movielens_din_features(
    train: pd.DataFrame,
    history_length: int = 50,
    embed_user: bool = True,
    genre_history: bool = True,
) -> list:
    """DIN feature specs fitted on the training part of `load_movielens_din`.

    Categorical (by vocabulary): `user_id` (with `embed_user`), `item_id`,
    `gender`, `occupation`, `genres` (the candidate's genre set as one value);
    numeric: `age`; sequences: `hist_item_id` sharing `item_id`'s table and, with
    `genre_history`, `hist_genres` sharing `genres`', both of `history_length`
    steps. Each sequence is pooled by its own DIN attention in `build_ctr_model`.

    Args:
        train: the training DataFrame (vocabularies and statistics come from it).
        history_length: int. `max_len` of the sequences. Defaults to 50.
        embed_user: bool. Include the user id as a feature. Defaults to True.
        genre_history: bool. Include the history of genre sets. Defaults to True.

    Returns:
        A list of fitted feature specs.
    """
    specs = [
        CategoricalFeature("item_id", dtype="int64"),
        CategoricalFeature("genres"),
        CategoricalFeature("gender"),
        CategoricalFeature("occupation"),
        NumericFeature("age", missing_indicator=False),
        SequenceFeature("hist_item_id", shares="item_id", max_len=history_length),
    ]
    if genre_history:
        specs.append(
            SequenceFeature("hist_genres", shares="genres", max_len=history_length)
        )
    if embed_user:
        specs.insert(0, CategoricalFeature("user_id", dtype="int64"))
    return fit_features(specs, train)
