"""Cloze readers against the most-frequent-candidate baseline and each other, on cloze
questions made from real reviews or news: GRU or BERT encoders, under the
Attention-over-Attention head (Cui et al. 2017) or the Attention Sum Reader's
dot-product head (Kadlec et al. 2016).

The documents of ../shared/data/review_polarity (1,600 movie reviews) or
../shared/data/ag_news (6,000 news items) are split once, at the document level
(seed 0, 80% train, 20% test), so no test question shares a document with a training
question. The vocabulary is built on the training documents; questions are made
with `keras_attn.text.cloze.make_cloze_questions` (answers and candidates in that
vocabulary), and every reader asked for (`--encoder` x `--head`) is trained with
`fit_aoa_reader` and scored on the same test questions: test accuracy with its 95%
Wilson interval beside the most-frequent candidate and chance, each reader against
the baseline, and the paired comparisons (the dot head minus AoA on one encoder,
BERT minus GRU under one head): the difference with its 95% interval for matched
pairs and McNemar's exact p-value, from `benchmarks._stats.paired_difference`.

The BERT readers (`BertClozeReader`) share one word-level `BertBackbone` over the
cloze vocabulary (`cloze_bert_vocabulary`: the placeholder is `[MASK]`), first
pretrained with masked LM + NSP (`pretraining_dataset` with a word `Tokenizer`,
`fit_bert_pretrainer`) for `--pretrain-epochs` passes over the training documents
only; each head then fine-tunes a copy of those weights. Both heads are
weight-free, so BERT+AoA and BERT+dot differ in the head's function alone.

`--validation` sets the test documents aside unread and scores on questions from
15% of the training documents instead (train on the other 85%, pretraining too):
choose settings there. `--documents N` keeps the first N documents (a smoke run).

    python -m benchmarks.bench_aoa [--dataset review_polarity]
        [--encoder gru bert] [--head aoa dot] [--epochs 1] [--bert-epochs 2]
        [--pretrain-epochs 1] [--validation] [--documents N] [--no-write]

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
ENCODERS = ("gru", "bert")
#: Sentences in each segment of a pretraining pair: reviews have ~32 sentences of
#: ~23 words (3 + 3 fill most of 150 positions); a news item has 1-3 sentences.
PRETRAIN_SENTENCES = {"review_polarity": 3, "ag_news": 1}
HEADS = ("aoa", "dot")
LABELS = {"aoa": "AoA", "dot": "dot", "gru": "GRU", "bert": "BERT"}


def _documents(name: str):
    """Documents as lists of sentence strings (review_polarity) or strings."""
    if name == "review_polarity":
        with gzip.open(FILES[name], "rt", encoding="utf-8") as f:
            return [json.loads(line)["sentences"] for line in f]
    from keras_attn.text.datasets import load_ag_news

    return load_ag_news(FILES[name])[0]


def _label(variant) -> str:
    encoder, head = variant
    return f"{LABELS[encoder]} + {LABELS[head]}"


def _split(docs, validation: bool):
    """The document-level split: (train, scored) documents and what they are."""
    order = np.random.default_rng(0).permutation(len(docs))
    cut = int(0.8 * len(docs))
    train = [docs[i] for i in order[:cut]]
    if not validation:
        return train, [docs[i] for i in order[cut:]], "test"
    # The test documents stay unread: settings are chosen on training documents.
    inner = np.random.default_rng(1).permutation(len(train))
    cut = int(0.85 * len(train))
    kept, held = inner[:cut], inner[cut:]
    return [train[i] for i in kept], [train[i] for i in held], "validation"


def _bert(args, vocab):
    from keras_attn.models import build_bert
    from keras_attn.text.cloze import cloze_bert_vocabulary

    return build_bert(
        len(cloze_bert_vocabulary(vocab)),
        sequence_length=args.bert_length,
        hidden_dim=args.bert_hidden,
        num_layers=args.bert_layers,
        num_heads=args.bert_heads,
        name="bert",
    )


def pretrain(backbone, train_docs, vocab, args) -> dict:
    """Masked LM + NSP on the training documents (the cloze words, re-joined), in
    place; the last epoch's figures."""
    from keras_attn.backend import keras
    from keras_attn.models import build_bert_pretrainer, fit_bert_pretrainer
    from keras_attn.text import Tokenizer, pretraining_dataset
    from keras_attn.text.cloze import cloze_bert_vocabulary

    start = time.perf_counter()
    length = backbone.sequence_length
    tokenizer = Tokenizer(
        cloze_bert_vocabulary(vocab), sequence_length=length, method="word"
    )
    texts = [" ".join(" ".join(s) for s in doc) for doc in train_docs]

    def data(num_epochs):
        return pretraining_dataset(
            texts,
            tokenizer,
            sequence_length=length,
            batch_size=32,
            max_predictions=max(1, round(0.15 * length)),
            sentences_per_segment=args.pretrain_sentences,
            num_epochs=num_epochs,
            seed=0,
        )

    # Batches of one pass; the stream repeats with fresh pairs and masks.
    steps = sum(1 for _ in data(1))
    if not steps:
        raise SystemExit(
            f"no pretraining pair: the documents have fewer than "
            f"{2 * args.pretrain_sentences} sentences (lower --pretrain-sentences)"
        )
    keras.utils.set_random_seed(0)
    history = fit_bert_pretrainer(
        build_bert_pretrainer(backbone),
        data(None),
        epochs=args.pretrain_epochs,
        steps_per_epoch=steps,
        learning_rate=args.pretrain_learning_rate,
        verbose=2,
    )
    last = {k: float(v[-1]) for k, v in history.history.items()}
    return dict(
        steps=steps,
        seconds=time.perf_counter() - start,
        mlm_loss=last.get("mlm_loss", float("nan")),
        mlm_accuracy=last.get("mlm_accuracy", float("nan")),
    )


def run(args) -> dict:
    from keras_attn.models import BertClozeReader, fit_aoa_reader
    from keras_attn.text.cloze import (
        build_cloze_vocabulary,
        make_cloze_questions,
        most_frequent_candidate,
        tokenize_documents,
    )

    docs = tokenize_documents(_documents(args.dataset)[: args.documents])
    train_docs, test_docs, scored = _split(docs, args.validation)
    vocab = build_cloze_vocabulary(train_docs, max_tokens=args.max_tokens)
    settings = dict(
        num_candidates=args.candidates,
        context_sentences=args.context_sentences,
        max_document_tokens=args.max_document_tokens,
        max_query_tokens=args.max_query_tokens,
        vocabulary=vocab,
    )
    train = make_cloze_questions(
        train_docs, questions_per_document=args.questions_per_document, **settings
    )
    test = make_cloze_questions(test_docs, questions_per_document=5, seed=1, **settings)
    answers = np.array([q.answer for q in test])
    variants = [(e, h) for e in args.encoder for h in args.head]

    pretrained, pretraining = None, None
    if "bert" in args.encoder:
        backbone = _bert(args, vocab)
        if args.pretrain_epochs:
            print(f"pretraining on {len(train_docs)} documents", flush=True)
            pretraining = pretrain(backbone, train_docs, vocab, args)
        pretrained = backbone.get_weights()

    readers = {}
    for variant in variants:
        encoder, head = variant
        print(f"training {_label(variant)}", flush=True)
        if encoder == "gru":
            kwargs = dict(
                epochs=args.epochs,
                learning_rate=args.learning_rate,
                embedding_dim=args.units,
                units=args.units,
                dropout=0.2,
                head=head,
            )
        else:
            backbone = _bert(args, vocab)
            backbone.set_weights(pretrained)  # each head starts from the same weights
            # The readers read sequence outputs: the pooler (NSP's) gets no gradient.
            backbone.pooler.trainable = False
            kwargs = dict(
                epochs=args.bert_epochs,
                learning_rate=args.bert_learning_rate,
                model=BertClozeReader(backbone, head=head),
            )
        result = fit_aoa_reader(train, test, vocab, batch_size=32, verbose=2, **kwargs)
        readers[variant] = dict(
            accuracy=result.test_accuracy,
            hits=result.test_predictions == answers,
            seconds=result.seconds,
            loss=float(result.history.history["loss"][-1]),
        )
        print(f"  {scored} accuracy {result.test_accuracy:.4f}", flush=True)
    baseline = most_frequent_candidate(test) == answers
    return dict(
        dataset=args.dataset,
        scored=scored,
        train_documents=len(train_docs),
        test_documents=len(test_docs),
        vocabulary=len(vocab),
        train_questions=len(train),
        test_questions=len(test),
        document_tokens=float(np.mean([len(q.document) for q in test])),
        readers=readers,
        baseline=baseline,
        random=float(np.mean([1 / len(q.candidates) for q in test])),
        pretraining=pretraining,
    )


def _comparisons(readers) -> list:
    """(a, b) pairs to compare, b minus a: the dot head minus AoA on each encoder
    (BERT first), then BERT minus GRU under each head."""
    pairs = []
    for encoder in ("bert", "gru"):
        if (encoder, "aoa") in readers and (encoder, "dot") in readers:
            pairs.append(((encoder, "aoa"), (encoder, "dot")))
    for head in HEADS:
        if ("gru", head) in readers and ("bert", head) in readers:
            pairs.append((("gru", head), ("bert", head)))
    return pairs


def _body(r, args) -> str:
    from benchmarks._stats import paired_difference, wilson

    n, scored = r["test_questions"], r["scored"]
    lines = [
        f"Cloze questions from {r['dataset']}: {r['train_documents']} training and "
        f"{r['test_documents']} {scored} documents (a document-level split, seed 0), "
        f"{r['train_questions']} training and {n} {scored} questions, "
        f"{args.candidates} candidates each, documents of "
        f"{r['document_tokens']:.0f} tokens on average, vocabulary "
        f"{r['vocabulary']} words (the most frequent of the training documents).",
    ]
    if any(e == "gru" for e, _ in r["readers"]):
        lines.append(
            f"GRU readers: embeddings and GRUs of {args.units}, {args.epochs} "
            f"epoch(s), Adam {args.learning_rate}."
        )
    if any(e == "bert" for e, _ in r["readers"]):
        p = r["pretraining"]
        pretraining = (
            "no pretraining (from scratch)"
            if p is None
            else f"pretrained first with masked LM + NSP on the training documents "
            f"only, {args.pretrain_epochs} pass(es) of {p['steps']} batches of 32 "
            f"({args.pretrain_sentences} sentences a segment, Adam "
            f"{args.pretrain_learning_rate}, {p['seconds']:.0f} s; last pass: MLM "
            f"loss {p['mlm_loss']:.2f}, MLM accuracy {p['mlm_accuracy']:.3f})"
        )
        lines.append(
            f"BERT readers: one word-level BertBackbone over the cloze vocabulary "
            f"(hidden {args.bert_hidden}, {args.bert_layers} layers, "
            f"{args.bert_heads} heads, {args.bert_length} positions) encodes the "
            f"document and the query, {pretraining}; each head fine-tunes a copy "
            f"of the same weights for {args.bert_epochs} epoch(s), Adam "
            f"{args.bert_learning_rate}."
        )
    lines += [
        "",
        f"| reader | {scored} accuracy [95% Wilson] | minus most frequent, paired "
        "95% | McNemar p | fit s |",
        "|---|---|---|---|---|",
    ]
    for variant, reader in r["readers"].items():
        low, high = wilson(int(reader["hits"].sum()), n)
        d, dlow, dhigh, p = paired_difference(r["baseline"], reader["hits"])
        lines.append(
            f"| {_label(variant)} | {reader['accuracy']:.4f} [{low:.4f}, "
            f"{high:.4f}] | {d:+.4f} ({dlow:+.4f} to {dhigh:+.4f}) | {p:.2g} | "
            f"{reader['seconds']:.0f} |"
        )
    low, high = wilson(int(r["baseline"].sum()), n)
    lines += [
        f"| most frequent candidate | {r['baseline'].mean():.4f} [{low:.4f}, "
        f"{high:.4f}] | | | |",
        f"| random | {r['random']:.4f} | | | |",
    ]
    pairs = _comparisons(r["readers"])
    if pairs:
        lines += [
            "",
            "| comparison (same questions) | difference, paired 95% | only the "
            "first right | only the second right | McNemar p |",
            "|---|---|---|---|---|",
        ]
        for a, b in pairs:
            hits_a, hits_b = r["readers"][a]["hits"], r["readers"][b]["hits"]
            d, dlow, dhigh, p = paired_difference(hits_a, hits_b)
            lines.append(
                f"| {_label(b)} minus {_label(a)} | {d:+.4f} ({dlow:+.4f} to "
                f"{dhigh:+.4f}) | {int(np.sum(hits_b & ~hits_a))} | "
                f"{int(np.sum(hits_a & ~hits_b))} | {p:.2g} |"
            )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", choices=sorted(FILES), default="review_polarity")
    parser.add_argument("--encoder", nargs="+", choices=ENCODERS, default=["gru"])
    parser.add_argument("--head", nargs="+", choices=HEADS, default=["aoa"])
    parser.add_argument("--epochs", type=int, default=1, help="GRU readers' epochs")
    parser.add_argument("--questions-per-document", type=int, default=6)
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--context-sentences", type=int, default=8)
    parser.add_argument("--max-document-tokens", type=int, default=150)
    parser.add_argument("--max-query-tokens", type=int, default=50)
    parser.add_argument("--units", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=5000)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--bert-epochs", type=int, default=2)
    parser.add_argument("--bert-hidden", type=int, default=64)
    parser.add_argument("--bert-layers", type=int, default=2)
    parser.add_argument("--bert-heads", type=int, default=2)
    parser.add_argument(
        "--bert-length",
        type=int,
        default=None,
        help="BERT positions; defaults to --max-document-tokens (and at least "
        "--max-query-tokens): no document is cut",
    )
    parser.add_argument("--bert-learning-rate", type=float, default=3e-4)
    parser.add_argument("--pretrain-epochs", type=int, default=1)
    parser.add_argument(
        "--pretrain-sentences",
        type=int,
        default=None,
        help="sentences a pretraining segment; defaults to 3 (review_polarity) or "
        "1 (ag_news)",
    )
    parser.add_argument("--pretrain-learning-rate", type=float, default=1e-3)
    parser.add_argument("--validation", action="store_true")
    parser.add_argument("--documents", type=int, default=None)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    args.encoder = list(dict.fromkeys(args.encoder))
    args.head = list(dict.fromkeys(args.head))
    if args.pretrain_sentences is None:
        args.pretrain_sentences = PRETRAIN_SENTENCES[args.dataset]
    if args.bert_length is None:
        args.bert_length = max(args.max_document_tokens, args.max_query_tokens)
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
        name = (
            "AoA reader on cloze questions"
            if (args.encoder, args.head) == (["gru"], ["aoa"])
            else "Cloze readers: GRU and BERT encoders, AoA and dot-product heads"
        )
        if args.validation:
            name += " (validation)"
        write_section(name, body, command.strip())


if __name__ == "__main__":
    main()
