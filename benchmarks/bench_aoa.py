"""Attention-over-Attention reader vs the most-frequent-candidate baseline on cloze
questions made from real reviews or news.

The documents of ../shared/data/review_polarity (1,600 movie reviews) or
../shared/data/ag_news (6,000 news items) are split once, at the document level
(seed 0, 80% train, 20% test), so no test question shares a document with a training
question. The vocabulary is built on the training documents; questions are made
with `keras_attn.text.cloze.make_cloze_questions` (answers and candidates in that
vocabulary), the reader is trained with `fit_aoa_reader`, and test accuracy is
reported beside the most-frequent candidate and chance, with McNemar's z of the
reader against the baseline (the questions only one of the two gets right).

    python -m benchmarks.bench_aoa [--dataset review_polarity] [--epochs 3]
        [--questions-per-document 4] [--no-write]

Reads ../shared/data (see DATA.md); exits with a message when it is absent.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
FILES = {
    "review_polarity": DATA / "review_polarity" / "review_polarity_dev.jsonl.gz",
    "ag_news": DATA / "ag_news" / "ag_news_dev.csv.gz",
}


def _documents(name: str):
    """Documents as lists of sentence strings (review_polarity) or strings."""
    if name == "review_polarity":
        with gzip.open(FILES[name], "rt", encoding="utf-8") as f:
            return [json.loads(line)["sentences"] for line in f]
    from keras_attn.text.datasets import load_ag_news

    return load_ag_news(FILES[name])[0]


def run(args) -> dict:
    from keras_attn.models import fit_aoa_reader
    from keras_attn.text.cloze import (
        build_cloze_vocabulary,
        make_cloze_questions,
        most_frequent_candidate,
        tokenize_documents,
    )

    docs = tokenize_documents(_documents(args.dataset))
    order = np.random.default_rng(0).permutation(len(docs))
    cut = int(0.8 * len(docs))
    train_docs = [docs[i] for i in order[:cut]]
    test_docs = [docs[i] for i in order[cut:]]
    vocab = build_cloze_vocabulary(train_docs, max_tokens=args.max_tokens)
    settings = dict(
        num_candidates=args.candidates,
        context_sentences=args.context_sentences,
        max_document_tokens=args.max_document_tokens,
        vocabulary=vocab,
    )
    train = make_cloze_questions(
        train_docs, questions_per_document=args.questions_per_document, **settings
    )
    test = make_cloze_questions(test_docs, questions_per_document=5, seed=1, **settings)
    result = fit_aoa_reader(
        train,
        test,
        vocab,
        epochs=args.epochs,
        batch_size=32,
        learning_rate=args.learning_rate,
        embedding_dim=args.units,
        units=args.units,
        dropout=0.2,
        verbose=2,
    )
    answers = np.array([q.answer for q in test])
    reader = result.test_predictions == answers
    baseline = most_frequent_candidate(test) == answers
    only_reader = int(np.sum(reader & ~baseline))
    only_baseline = int(np.sum(~reader & baseline))
    z = (only_reader - only_baseline) / max(1, only_reader + only_baseline) ** 0.5
    return dict(
        dataset=args.dataset,
        train_documents=len(train_docs),
        test_documents=len(test_docs),
        vocabulary=len(vocab),
        train_questions=len(train),
        test_questions=len(test),
        document_tokens=float(np.mean([len(q.document) for q in test])),
        summary=result.summary(),
        only_reader=only_reader,
        only_baseline=only_baseline,
        z=z,
        seconds=result.seconds,
    )


def _body(r, args) -> str:
    s = r["summary"]
    standard_error = (
        s["aoa_reader"] * (1 - s["aoa_reader"]) / r["test_questions"]
    ) ** 0.5
    return "\n".join(
        [
            f"Cloze questions from {r['dataset']}: {r['train_documents']} training and "
            f"{r['test_documents']} test documents (a document-level split, seed 0), "
            f"{r['train_questions']} training and {r['test_questions']} test "
            f"questions, {args.candidates} candidates each, documents of "
            f"{r['document_tokens']:.0f} tokens on average, vocabulary "
            f"{r['vocabulary']} words (the most frequent of the training documents). "
            "Reader: "
            f"embeddings and GRUs of {args.units}, {args.epochs} epochs, Adam "
            f"{args.learning_rate}, trained in {r['seconds']:.0f} s.",
            "",
            "| model | test accuracy |",
            "|---|---|",
            f"| AoA reader | {s['aoa_reader']:.4f} (± {standard_error:.4f} s.e.) |",
            f"| most frequent candidate | {s['most_frequent']:.4f} |",
            f"| random | {s['random']:.4f} |",
            "",
            f"Questions only the reader gets right: {r['only_reader']}; only the "
            f"baseline: {r['only_baseline']}; McNemar z = {r['z']:.2f}.",
        ]
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", choices=sorted(FILES), default="review_polarity")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--questions-per-document", type=int, default=6)
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--context-sentences", type=int, default=8)
    parser.add_argument("--max-document-tokens", type=int, default=150)
    parser.add_argument("--units", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=5000)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not FILES[args.dataset].exists():
        sys.exit(f"{FILES[args.dataset]} is absent: see ../shared/data/DATA.md")
    start = time.perf_counter()
    r = run(args)
    body = _body(r, args)
    print(body)
    print(f"total {time.perf_counter() - start:.0f} s")
    if not args.no_write:
        from benchmarks._results import write_section

        command = "python -m benchmarks.bench_aoa " + " ".join(
            argv if argv is not None else sys.argv[1:]
        )
        write_section("AoA reader on cloze questions", body, command.strip())


if __name__ == "__main__":
    main()
