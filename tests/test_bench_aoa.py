"""bench_aoa's split and comparisons (issue 16: BERT + AoA vs BERT + dot)."""

import pytest

from benchmarks.bench_aoa import _comparisons, _split

pytestmark = pytest.mark.generation_neutral


def test_validation_documents_come_from_the_training_part_only():
    docs = [[[f"w{i}"]] for i in range(100)]
    train, test, scored = _split(docs, validation=False)
    assert scored == "test" and len(train) == 80 and len(test) == 20
    inner, held, scored = _split(docs, validation=True)
    assert scored == "validation" and len(inner) == 68 and len(held) == 12
    ids = {d[0][0] for d in train}
    # Settings chosen on the validation part never read a test document.
    assert {d[0][0] for d in inner + held} == ids
    assert not {d[0][0] for d in inner} & {d[0][0] for d in held}


def test_comparisons_put_bert_dot_minus_aoa_first():
    readers = {(e, h): None for e in ("gru", "bert") for h in ("aoa", "dot")}
    assert _comparisons(readers) == [
        (("bert", "aoa"), ("bert", "dot")),
        (("gru", "aoa"), ("gru", "dot")),
        (("gru", "aoa"), ("bert", "aoa")),
        (("gru", "dot"), ("bert", "dot")),
    ]
    assert _comparisons({("bert", "aoa"): None}) == []
