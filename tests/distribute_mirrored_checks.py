"""Checks run in one subprocess on two logical CPU devices (by
tests/test_distribute_mirrored.py): the logical devices must be configured before
TensorFlow initialises, which the test process has already done.

Each check trains under `MirroredStrategy(["/cpu:0", "/cpu:1"])` and, where it says
so, compares one SGD step's updated weights with the same step on one device at the
same global batch. Prints one JSON line: `{check: {"ok": bool, ...}}`.
"""

import json
import sys
import traceback

import tensorflow as tf

_CPU = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    _CPU, [tf.config.LogicalDeviceConfiguration()] * 2
)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from keras_attn.backend import KERAS_3, keras  # noqa: E402

RTOL, ATOL = 1e-5, 1e-6  # float32 sums in another order: a few ulps
GLOBAL_BATCH = 16


_MIRRORED = []


def mirrored():
    # One strategy for the process: two would share collective instance keys.
    if not _MIRRORED:
        _MIRRORED.append(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    return _MIRRORED[0]


def max_relative_gap(a, b):
    """max |a - b| / (atol + rtol |b|) over all weights: <= 1 within tolerance."""
    gaps = [
        float(np.max(np.abs(x - y) / (ATOL + RTOL * np.abs(y)))) for x, y in zip(a, b)
    ]
    return max(gaps)


def moved(before, after):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(before, after))


def compare(build, train):
    """One step on one device and under MirroredStrategy from the same weights."""
    keras.utils.set_random_seed(0)
    single = build()
    start = single.get_weights()
    train(single, None)
    strategy = mirrored()
    with strategy.scope():
        replicated = build()
    replicated.set_weights(start)
    train(replicated, strategy)
    a, b = replicated.get_weights(), single.get_weights()
    gap = max_relative_gap(a, b)
    worst = int(np.argmax([max_relative_gap([x], [y]) for x, y in zip(a, b)]))
    return {
        "worst_weight": worst,
        "worst_shape": list(np.shape(a[worst])),
        "ok": bool(gap <= 1.0 and moved(start, b) > 1e-4),
        "relative_gap_over_tolerance": gap,
        "moved": moved(start, b),
    }


def ctr_frame(n=GLOBAL_BATCH, history=False):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "item": rng.choice(["i1", "i2", "i3", "i4"], n),
            "city": rng.choice(list("abcde"), n),
            "age": rng.normal(40, 10, n),
            "click": rng.integers(0, 2, n),
            "buy": rng.integers(0, 2, n),
        }
    )
    if history:
        df["hist_item"] = [
            "|".join(rng.choice(["i1", "i2", "i3", "i4"], rng.integers(0, 4)))
            for _ in range(n)
        ]
    return df


def ctr_check(gate, history=False):
    from keras_attn.features import SequenceFeature, infer_features
    from keras_attn.models import build_ctr_model, fit_ctr_model

    df = ctr_frame(history=history)
    columns = df.drop(columns=["hist_item"]) if history else df
    specs = infer_features(columns, labels=["click", "buy"])
    if history:
        specs.append(SequenceFeature("hist_item", shares="item", max_len=3))
    tasks = ["click", "buy"]

    def build():
        return build_ctr_model(
            specs,
            tasks,
            num_experts=2,
            expert_units=(8,),
            tower_units=(4,),
            gate=gate,
            din_hidden_units=(8,),
            embedding_dim=4,
        )

    def train(model, strategy):
        fit_ctr_model(
            model,
            df,
            batch_size=GLOBAL_BATCH,
            shuffle=False,
            optimizer=keras.optimizers.SGD(0.5),
            jit_compile=False,
            verbose=0,
            strategy=strategy,
        )

    result = compare(build, train)
    # The trained model still takes raw values (and gives finite outputs).
    strategy = mirrored()
    with strategy.scope():
        model = build()
    fit_ctr_model(model, df, batch_size=8, verbose=0, jit_compile=False)
    raw = {c: tf.constant(df[c].to_numpy()) for c in df if c not in tasks}
    raw["age"] = tf.cast(raw["age"], tf.float32)
    out = model(raw)
    result["raw_outputs_finite"] = bool(
        all(np.isfinite(v.numpy()).all() for v in out.values())
    )
    result["ok"] = result["ok"] and result["raw_outputs_finite"]
    return result


def han_check():
    from keras_attn.models.text import build_han_classifier

    rng = np.random.default_rng(1)
    ids = rng.integers(0, 30, (GLOBAL_BATCH, 3, 5)).astype("int32")
    ids[::3, 2] = 0  # padded sentences
    y = rng.integers(0, 2, GLOBAL_BATCH).astype("int32")

    def build():
        return build_han_classifier(
            30,
            2,
            3,
            5,
            embedding_dim=8,
            units=4,
            attention_units=4,
            dropout=0.0,
            embedding_dropout=0.0,
        )

    def train(model, strategy):
        model.compile(
            optimizer=keras.optimizers.SGD(0.5),
            loss={"probabilities": "sparse_categorical_crossentropy"},
        )
        ds = tf.data.Dataset.from_tensor_slices((ids, {"probabilities": y}))
        model.fit(ds.batch(GLOBAL_BATCH), epochs=1, verbose=0)

    return compare(build, train)


def fit_text_check():
    from keras_attn.models import fit_text_classifier

    texts = ["good fine nice. very good.", "bad awful. not good at all."] * 8
    labels = ["pos", "neg"] * 8
    result = fit_text_classifier(
        texts,
        labels,
        model="han",
        epochs=1,
        batch_size=8,
        max_sentences=2,
        max_words=4,
        min_count=1,
        strategy=mirrored(),
        embedding_dim=8,
        units=4,
        attention_units=4,
    )
    loss = result.history.history["loss"][-1]
    same = result.model.distribute_strategy.num_replicas_in_sync == 2
    return {"ok": bool(np.isfinite(loss) and same), "loss": loss}


def bert_pretrainer_check():
    from keras_attn.models import build_bert, build_bert_pretrainer
    from keras_attn.models.bert_pretraining import (
        compile_bert_pretrainer,
        fit_bert_pretrainer,
    )

    rng = np.random.default_rng(2)
    n, length, preds = GLOBAL_BATCH, 8, 3
    x = {
        "token_ids": rng.integers(1, 40, (n, length)).astype("int32"),
        "segment_ids": np.zeros((n, length), "int32"),
        "masked_positions": rng.integers(1, length, (n, preds)).astype("int32"),
    }
    mlm = rng.integers(1, 40, (n, preds)).astype("int32")
    mlm[: n // 2, 1:] = 0  # the first replica's half has fewer masked slots
    y = {"mlm": mlm, "nsp": rng.integers(0, 2, n).astype("int32")}

    def build():
        bert = build_bert(
            40,
            sequence_length=length,
            hidden_dim=8,
            num_layers=1,
            num_heads=2,
            dropout=0.0,
        )
        model = build_bert_pretrainer(bert)
        model({k: v[:2] for k, v in x.items()})  # tf_keras makes weights on a call
        return model

    def train(model, strategy):
        # tf_keras wants the metrics made in the model's scope.
        with (strategy or tf.distribute.get_strategy()).scope():
            compile_bert_pretrainer(model, optimizer=keras.optimizers.SGD(0.5))
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
        fit_bert_pretrainer(model, ds, epochs=1, strategy=strategy)

    result = compare(build, train)

    # One input pipeline per worker (`distribute_datasets_from_function`).
    strategy = mirrored()
    with strategy.scope():
        model = build()

    def data(batch_size, context):
        assert batch_size == GLOBAL_BATCH // 2
        return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch_size)

    history = fit_bert_pretrainer(
        model, data, batch_size=GLOBAL_BATCH, steps_per_epoch=2, strategy=strategy
    )
    result["per_pipeline_loss"] = history.history["loss"][-1]
    result["ok"] = result["ok"] and bool(np.isfinite(result["per_pipeline_loss"]))
    try:
        fit_bert_pretrainer(model, data, batch_size=GLOBAL_BATCH + 1)
        result["ok"] = False
    except ValueError as error:
        result["odd_batch_error"] = str(error)
        result["ok"] = result["ok"] and "multiple of the 2 replicas" in str(error)
    return result


def fit_helpers_check():
    """`fit_seq2seq`, `fit_retrieval_model` and `fit_aoa_reader` (which builds its
    reader in the strategy's scope) train under the strategy: the batches split
    over both replicas (a last, smaller batch of pairs left out), finite losses,
    the weights move."""
    from keras_attn.models import (
        Seq2Seq,
        build_character_vocabulary,
        build_sequential_retrieval,
        fit_aoa_reader,
        fit_retrieval_model,
        fit_seq2seq,
    )
    from keras_attn.text.cloze import ClozeQuestion

    strategy = mirrored()
    result = {}
    words = ["abcd", "dcb", "bad", "cab", "acdc", "dab", "bcd", "cd", "ab"]
    vocabulary = build_character_vocabulary(words)
    rng = np.random.default_rng(3)
    with strategy.scope():
        seq2seq = Seq2Seq(
            source_vocabulary=vocabulary,
            target_vocabulary=vocabulary,
            units=4,
            embedding_dim=4,
        )
        retrieval = build_sequential_retrieval(
            12, num_genres=2, history_length=4, embedding_dim=8, num_layers=1
        )
        retrieval.candidate_embeddings()
    models = {"seq2seq": seq2seq, "retrieval": retrieval}
    before = {name: [w.copy() for w in m.get_weights()] for name, m in models.items()}
    histories = {
        # 9 pairs, batch 4: two full batches per epoch (4 pairs per replica each).
        "seq2seq": fit_seq2seq(
            seq2seq, words, [w[::-1] for w in words], batch_size=4, epochs=1
        ),
        "retrieval": fit_retrieval_model(
            retrieval,
            {
                "history": rng.integers(0, 13, (32, 4)).astype("int32"),
                "item": rng.integers(1, 13, 32).astype("int32"),
            },
            epochs=1,
            batch_size=8,
            verbose=0,
            jit_compile=False,
        ),
    }
    tokens = ["[PAD]", "[UNK]", "@placeholder"] + [f"w{i}" for i in range(20)]
    questions = [
        ClozeQuestion(
            document=[f"w{(i + j) % 20}" for j in range(8)],
            query=["w1", "@placeholder", "w3"],
            candidates=[f"w{i % 20}", f"w{(i + 1) % 20}"],
            answer=0,
        )
        for i in range(8)
    ]
    aoa = fit_aoa_reader(
        questions,
        questions[:4],
        tokens,
        epochs=1,
        batch_size=4,
        embedding_dim=4,
        units=4,
        strategy=strategy,
        jit_compile=False,
    )
    histories["aoa"] = aoa.history
    result["aoa_replicas"] = aoa.model.distribute_strategy.num_replicas_in_sync
    for name, history in histories.items():
        result[f"{name}_loss"] = float(history.history["loss"][-1])
    for name, m in models.items():
        result[f"{name}_moved"] = moved(before[name], m.get_weights())
    result["ok"] = bool(
        all(np.isfinite(result[f"{name}_loss"]) for name in histories)
        and all(result[f"{name}_moved"] > 0 for name in models)
        and result["aoa_replicas"] == 2
    )
    return result


def raw_fit_check():
    """`model.fit`, `evaluate` and `predict` of a CTR model on raw rows under the
    strategy (Keras 3.15 built it from the first batch averaged over the replicas,
    which has no kernel for strings; keras_attn's models build from one replica's)."""
    from keras_attn.features import infer_features, to_dataset
    from keras_attn.models import build_ctr_model

    df = ctr_frame(n=4 * GLOBAL_BATCH)
    specs = infer_features(df, labels=["click", "buy"])
    strategy = mirrored()
    with strategy.scope():
        model = build_ctr_model(specs, ["click", "buy"], num_experts=2)
        model.compile(optimizer="sgd")
    data = to_dataset(df, specs, ["click", "buy"], batch_size=GLOBAL_BATCH)
    before = [w.copy() for w in model.get_weights()]
    try:
        history = model.fit(data, epochs=1, verbose=0)
        scores = model.evaluate(data, verbose=0, return_dict=True)
        predictions = model.predict(data.map(lambda x, y: x), verbose=0)
    except tf.errors.OpError as error:
        return {"ok": False, "error": str(error)[:300]}
    loss = history.history["loss"][-1]
    shapes = {k: list(v.shape) for k, v in predictions.items()}
    return {
        "ok": bool(np.isfinite(loss) and np.isfinite(scores["loss"]))
        and moved(before, model.get_weights()) > 0
        and shapes == {"click": [len(df), 1], "buy": [len(df), 1]},
        "loss": float(loss),
        "shapes": shapes,
    }


CHECKS = {
    "ctr_mmoe_softmax": lambda: ctr_check("softmax"),
    "ctr_mmoe_attention_din": lambda: ctr_check("attention", history=True),
    "han": han_check,
    "fit_text_classifier": fit_text_check,
    "bert_pretrainer": bert_pretrainer_check,
    "fit_helpers": fit_helpers_check,
    "raw_fit": raw_fit_check,
}

if __name__ == "__main__":
    names = sys.argv[1:] or list(CHECKS)
    results = {"keras_3": KERAS_3}
    import time

    for name in names:
        start = time.perf_counter()
        try:
            results[name] = CHECKS[name]()
        except Exception:  # reported to the test, which fails with the trace
            results[name] = {"ok": False, "trace": traceback.format_exc()[-3000:]}
        results[name]["seconds"] = round(time.perf_counter() - start, 1)
        print(f"{name}: {results[name]}", file=sys.stderr, flush=True)
    print("RESULTS " + json.dumps(results))
