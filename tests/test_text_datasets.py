"""Loaders of the text data sets in ../shared/data (skipped when it is absent)."""

import collections
import gzip

import pytest

from keras_attn.text.datasets import (
    load_ag_news,
    load_chnsenticorp_htl,
    load_review_polarity,
    load_review_sample,
)
from tests.conftest import shared_data

pytestmark = pytest.mark.generation_neutral


def test_review_polarity_dev():
    texts, labels = load_review_polarity(
        shared_data("review_polarity/review_polarity_dev.jsonl.gz")
    )
    assert len(texts) == 1600
    assert collections.Counter(labels) == {"pos": 800, "neg": 800}
    assert all(isinstance(t, str) and t for t in texts)


def test_ag_news_dev():
    texts, labels = load_ag_news(shared_data("ag_news/ag_news_dev.csv.gz"))
    assert len(texts) == len(labels) == 6000
    assert set(labels) == {"1", "2", "3", "4"}
    # title + ". " + description, as in the file's second data row
    assert texts[1].startswith("Qantas says record profit not big enough. Australia")


def test_chnsenticorp_htl_dev():
    texts, labels = load_chnsenticorp_htl(
        shared_data("chnsenticorp_htl/chnsenticorp_htl_dev.csv.gz")
    )
    assert len(texts) == len(labels) == 6165
    assert set(labels) == {"0", "1"}
    assert texts[1].startswith("初五住的，这么冷的天没有暖气，没有热水。")
    assert texts[1].endswith("总之感觉很业余。")


def test_csv_loaders_read_plain_files_and_check_columns(tmp_path):
    plain = tmp_path / "ag.csv"
    plain.write_text('label,title,description\n2,Win,"Team wins, again"\n')
    assert load_ag_news(plain) == (["Win. Team wins, again"], ["2"])
    zipped = tmp_path / "htl.csv.gz"
    with gzip.open(zipped, "wt", encoding="utf-8") as f:
        f.write('label,review\n1,"很好，\n干净。"\n')
    assert load_chnsenticorp_htl(zipped) == (["很好，\n干净。"], ["1"])
    with pytest.raises(ValueError, match="columns"):
        load_chnsenticorp_htl(plain)


def test_shipped_review_sample_is_balanced():
    texts, labels = load_review_sample()
    counts = collections.Counter(labels)
    assert counts["pos"] == counts["neg"] == len(texts) // 2
