"""MovieLens-100K as next-item examples for a sequential retrieval model.

`load_movielens_sequences` makes one example per rating: the rated item is the
target, the user's items rated strictly earlier in time (the most recent
`history_length`, left-padded so the most recent is last) are the history. Every
rating counts as an interaction (implicit feedback), whatever its value. The split is
`load_movielens_din`'s: ratings ordered by user, time and item id; each user's last
`test_ratings` are the test part, the last `validation_ratings` of the rest the
validation part. So a test history holds training items and the user's earlier test
items: what is known when the prediction is made.

Items are indexed 1..num_items in the order of `u.item` (0 is padding); the
`items` table holds each index's raw id, title and genres.

MovieLens is for research use only under GroupLens' terms: keras_attn does not ship
it; pass the path of your own copy.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from keras_attn._validation import check_int, check_positive_int
from keras_attn.datasets.movielens import (
    MOVIELENS_GENRES,
    _paths,
    _read_item_file,
    _read_ratings,
)

__all__ = [
    "MovieLensSequences",
    "SequenceExamples",
    "load_movielens_sequences",
]


@dataclasses.dataclass(frozen=True)
class SequenceExamples:
    """(history, next item) examples, one per rating, in user/time/item order.

    Attributes:
        history: int32 `(n, history_length)`: item indices rated strictly earlier,
            oldest first, left-padded with 0 (the most recent is the last column).
        item: int32 `(n,)`: the target item's index.
        user: int64 `(n,)`: the raw user id.
        timestamp: int64 `(n,)`: the rating's unix time.
        seen_start, seen_stop: int64 `(n,)`: the items the user rated strictly
            before the target, all of them (the history keeps only the most recent
            `history_length`), are `MovieLensSequences.sequence[seen_start:seen_stop]`.
    """

    history: np.ndarray
    item: np.ndarray
    user: np.ndarray
    timestamp: np.ndarray
    seen_start: np.ndarray
    seen_stop: np.ndarray

    def __len__(self) -> int:
        return len(self.item)

    def take(self, rows) -> SequenceExamples:
        """The examples at `rows` (indices or a boolean mask)."""
        return SequenceExamples(
            **{
                f.name: np.asarray(getattr(self, f.name))[rows]
                for f in dataclasses.fields(self)
            }
        )

    def features(self) -> dict:
        """`{"history": ..., "item": ...}`, the model's training inputs."""
        return {"history": self.history, "item": self.item}


class MovieLensSequences(NamedTuple):
    """What `load_movielens_sequences` returns.

    Attributes:
        train, validation, test: `SequenceExamples` (validation is None when
            `validation_ratings=0`).
        items: DataFrame indexed by item index 1..num_items with `item_id` (raw
            id), `title` and `genres` ("|"-joined names).
        item_genres: float32 `(num_items + 1, 19)` multi-hot genres by index (row 0,
            padding, is zeros).
        sequence: int32: every user's item indices in time order, users one after
            the other; `SequenceExamples.seen_start/seen_stop` index it.
    """

    train: SequenceExamples
    validation: SequenceExamples | None
    test: SequenceExamples
    items: pd.DataFrame
    item_genres: np.ndarray
    sequence: np.ndarray

    @property
    def num_items(self) -> int:
        return len(self.items)

    def seen(self, part: SequenceExamples, row: int) -> np.ndarray:
        """Indices of the items the user of `part`'s example `row` rated before
        its target (all of them, oldest first)."""
        return self.sequence[part.seen_start[row] : part.seen_stop[row]]

    def seen_mask(self, part: SequenceExamples) -> np.ndarray:
        """Boolean `(len(part), num_items + 1)`: True where the user had rated the
        item before the example's target (column 0, padding, is False)."""
        mask = np.zeros((len(part), self.num_items + 1), dtype=bool)
        lengths = part.seen_stop - part.seen_start
        rows = np.repeat(np.arange(len(part)), lengths)
        # Positions into `sequence`: each row's range, concatenated.
        offsets = np.arange(lengths.sum()) - np.repeat(
            np.cumsum(lengths) - lengths, lengths
        )
        mask[rows, self.sequence[np.repeat(part.seen_start, lengths) + offsets]] = True
        return mask


def _read_items(path: Path) -> tuple[pd.DataFrame, np.ndarray]:
    raw = _read_item_file(path)
    flags = raw[list(MOVIELENS_GENRES)].to_numpy(dtype="float32")
    names = np.asarray(MOVIELENS_GENRES)
    items = pd.DataFrame(
        {
            "item_id": raw["item_id"].to_numpy(),
            "title": raw["title"].fillna("").to_numpy(),
            "genres": ["|".join(names[row > 0]) for row in flags],
        },
        index=pd.RangeIndex(1, len(raw) + 1, name="index"),
    )
    genres = np.concatenate([np.zeros((1, flags.shape[1]), "float32"), flags])
    return items, genres


def load_movielens_sequences(
    path_or_dir: str | Path,
    history_length: int = 50,
    test_ratings: int = 10,
    validation_ratings: int = 0,
    min_history: int = 1,
) -> MovieLensSequences:
    """Next-item examples from MovieLens-100K files, split by time within each user.

    Each user's ratings are ordered by time, ties by item id (as in
    `load_movielens_din`). Each rating is an example whose history is the items the
    user rated strictly earlier (a rating at the same second is not in it), the
    `history_length` most recent, oldest first and left-padded with 0. A user's last
    `test_ratings` ratings go to the test part, the last `validation_ratings` of the
    rest to the validation part, the rest to training: no test rating is a training
    target, and every training rating is no later than the user's test ratings.
    Examples with fewer than `min_history` earlier ratings (a user's first rating,
    whose history is empty) are left out of every part.

    Args:
        path_or_dir: the ratings file (`user<TAB>item<TAB>rating<TAB>time`, gzip
            allowed) or the folder holding it, with `u.item` next to it.
        history_length: int. Most recent items kept in a history. Defaults to 50.
        test_ratings: int. Last ratings of each user in the test part. Defaults
            to 10.
        validation_ratings: int. Last training ratings of each user moved to the
            validation part; 0 (the default) gives none.
        min_history: int. Fewest earlier ratings an example needs. Defaults to 1.

    Returns:
        A `MovieLensSequences`.

    Example:

    >>> data = load_movielens_sequences(
    ...     "../shared/data/movielens_100k")  # doctest: +SKIP
    >>> data.train.history.shape  # doctest: +SKIP
    (71732, 50)
    """
    check_positive_int("history_length", history_length)
    check_positive_int("test_ratings", test_ratings)
    check_int("validation_ratings", validation_ratings, minimum=0)
    check_int("min_history", min_history, minimum=0)
    ratings_path, items_path, _ = _paths(path_or_dir)
    ratings = _read_ratings(ratings_path).sort_values(
        ["user_id", "timestamp", "item_id"], kind="stable"
    )
    items, item_genres = _read_items(items_path)
    index_of = pd.Series(items.index.to_numpy(), index=items["item_id"].to_numpy())
    unknown = sorted(set(ratings["item_id"]) - set(index_of.index))
    if unknown:
        raise ValueError(
            f"The ratings name items absent from u.item, e.g. {unknown[:5]}"
        )
    users = ratings["user_id"].to_numpy()
    times = ratings["timestamp"].to_numpy()
    sequence = index_of.loc[ratings["item_id"].to_numpy()].to_numpy("int32")
    n = len(sequence)
    starts_of_users = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
    ends_of_users = np.r_[starts_of_users[1:], n]
    lengths_of_users = ends_of_users - starts_of_users
    user_start = np.repeat(starts_of_users, lengths_of_users)
    # Where each rating's history stops: at the first rating of its user at its
    # time (ratings at the same second are not each other's history).
    first = np.r_[True, (users[1:] != users[:-1]) | (times[1:] != times[:-1])]
    seen_stop = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    seen_start = user_start.astype("int64")
    # (n, history_length) left-padded: column j holds sequence[stop - L + j].
    positions = seen_stop[:, None] - history_length + np.arange(history_length)
    valid = positions >= seen_start[:, None]
    history = np.where(valid, sequence[np.clip(positions, 0, None)], 0).astype("int32")
    examples = SequenceExamples(history, sequence, users, times, seen_start, seen_stop)
    # Position from each user's end: 0 is their last rating.
    from_end = np.repeat(ends_of_users, lengths_of_users) - 1 - np.arange(n)
    enough = seen_stop - seen_start >= min_history
    test = examples.take(enough & (from_end < test_ratings))
    rest = enough & (from_end >= test_ratings)
    validation = None
    if validation_ratings:
        in_validation = rest & (from_end < test_ratings + validation_ratings)
        validation = examples.take(in_validation)
        rest = rest & ~in_validation
    return MovieLensSequences(
        examples.take(rest), validation, test, items, item_genres, sequence
    )
