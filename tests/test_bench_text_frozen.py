"""benchmarks/bench_text.py's `bert_frozen` row: its sentence encoder gives
sentence-transformers' embedding of all-MiniLM-L6-v2 (the golden values of
../shared/data/pretrained/minilm_reference.npz) from one trace, and its C is
chosen on the carved part alone."""

import numpy as np
import pytest

from benchmarks import bench_text
from tests.conftest import shared_data

pytestmark = pytest.mark.generation_neutral


def test_sentence_encoder_is_sentence_transformers_embedding(monkeypatch):
    folder = shared_data("pretrained/all-MiniLM-L6-v2")
    reference = np.load(shared_data("pretrained/minilm_reference.npz"))
    monkeypatch.setattr(bench_text, "CHECKPOINT", folder)
    # 16 texts in batches of 5: three full batches and one of 1, one trace.
    encode = bench_text.sentence_encoder(128, batch_size=5)
    embedding = encode([str(t) for t in reference["texts"]])
    assert embedding.shape == reference["sentence_embedding"].shape == (16, 384)
    assert np.abs(embedding - reference["sentence_embedding"]).max() < 1e-5
    assert encode.traced.experimental_get_tracing_count() == 1


def test_choose_c_scores_the_carved_part_only():
    rng = np.random.default_rng(0)
    # The fitted part is 80 % class 0, the carve balanced: a C so small that the
    # intercept decides predicts 0 everywhere and gets half the carve right.
    labels = np.array([0] * 80 + [1] * 20 + [0] * 10 + [1] * 10)
    features = (2.0 * labels - 1)[:, None] + rng.normal(0, 0.1, (len(labels), 1))
    carve = np.arange(100, 120)
    best, scores = bench_text.choose_c(features, labels, carve, (1e-6, 1.0, 100.0))
    assert scores == {1e-6: 0.5, 1.0: 1.0, 100.0: 1.0}
    assert best == 1.0  # the tie goes to the smaller C


def test_record_adds_rows_and_keeps_the_others(monkeypatch, tmp_path):
    from benchmarks import _results

    monkeypatch.setattr(bench_text, "RUNS", tmp_path / "runs.json")
    monkeypatch.setattr(_results, "RESULTS", tmp_path / "RESULTS.md")
    (tmp_path / "RESULTS.md").write_text("# Results\n\n## other\n\nkept\n")

    def row(correct):
        hits = [1] * correct + [0] * (4 - correct)
        return {"correct": correct, "n": 4, "seconds": 1.0, "hits": hits}

    # Two processes' rows on one data set (as the fine-tuned and frozen runs).
    bench_text._record("ag_news", "tfidf", row(2))
    bench_text._record("ag_news", "bert_finetuned", row(3))
    runs = bench_text._record("ag_news", "bert_frozen", row(4))
    assert sorted(runs["ag_news"]) == ["bert_finetuned", "bert_frozen", "tfidf"]
    text = (tmp_path / "RESULTS.md").read_text()
    assert "kept" in text
    for key in ("tfidf", "bert_finetuned", "bert_frozen"):
        assert bench_text.LABELS[key] in text
    # A model measured again replaces its own row only.
    bench_text._record("ag_news", "tfidf", row(1))
    stored = bench_text.json.loads((tmp_path / "runs.json").read_text())
    assert stored["ag_news"]["tfidf"]["correct"] == 1
    assert stored["ag_news"]["bert_frozen"]["correct"] == 4
