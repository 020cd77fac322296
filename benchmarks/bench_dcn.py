"""DCN-v2 on Criteo: keras_attn (`CTRModel` with a `FeatureCross`, `fit_ctr_model`)
vs DeepCTR's `DCNMix`, on the same examples.

Data and split as bench_autoint: ../shared/data/criteo/criteo_8k.tsv.gz read by
`keras_attn.datasets.load_criteo` (the 13 integer features bucketed, all 39 fields
categorical; values seen fewer than twice in training share the OOV bucket); a
fixed permutation with seed 0, 6,400 rows to train and 1,600 to test, the test rows
used for the AUCs below and nothing else.

Both models as DeepCTR's `DCNMix` defaults where they meet (fixed beforehand, not
tuned): embeddings of 16 per field (normal, std 1e-4, L2 1e-5), two cross layers
of rank 32 on the flat field embeddings (L2 1e-5 on the cross kernels), a DNN of
256-128-64 ReLU units, one logit; Adam 1e-3, batch 256, 3 epochs. DeepCTR's
`DCNMix` runs the cross network (a mixture of 4 low-rank experts per layer) and
the DNN side by side on the embeddings and adds a linear part; keras_attn's model
is DCN-v2's stacked form: `FeatureCross(num_layers=2, projection_dim=32)` (one
low-rank cross per layer) in `CTRModel`'s `interaction` list, the DNN on its
output (the fields' rows in one table, `shared_table=True`, as bench_autoint).
DeepCTR's inputs are encoded with keras_attn's vocabularies (outside its timing).

Test AUC per initialization seed with its DeLong 95% interval, and the paired
DeLong interval of keras_attn's AUC minus DeepCTR's on the same seed; training
examples/s over the epochs after the first; the wall time of the fit call
(keras_attn's includes encoding the raw DataFrame and compiling) and its ratio to
DeepCTR's, seed by seed. Every run is a fresh process (DeepCTR needs Keras 2:
TF_USE_LEGACY_KERAS=1), the libraries alternate.

    python -m benchmarks.bench_dcn [--epochs 3] [--seeds 3] [--xla both|on|off]
        [--no-write]

DeepCTR (`pip install deepctr --no-deps`, in the Python that runs this script) is a
benchmark-only dependency: without it the DeepCTR row is left out. Reads
../shared/data/criteo (see DATA.md).
"""

from __future__ import annotations

import sys

from benchmarks._ctr_runs import timed_fit_ctr, timed_fit_deepctr
from benchmarks.bench_autoint import _encode, criteo_main, load

CONFIG = dict(
    embedding_dim=16,
    cross_layers=2,
    rank=32,
    num_experts=4,  # DeepCTR's mixture only
    dnn=(256, 128, 64),
    lr=1e-3,
    batch=256,
    init_std=1e-4,
    l2_embedding=1e-5,
    l2_cross=1e-5,
)
DEEPCTR = "DeepCTR DCNMix (tf_keras)"
KERAS_ATTN = {
    True: "keras_attn DCN-v2, fit_ctr_model (XLA)",
    False: "keras_attn DCN-v2, fit_ctr_model (no XLA)",
}


def run_keras_attn(out_dir: str, seed: int, epochs: int, jit: bool) -> dict:
    from keras_attn.backend import keras
    from keras_attn.layers import FeatureCross
    from keras_attn.models import CTRModel, Task

    keras.utils.set_random_seed(seed)
    train, test, specs = load()
    tasks = [Task("click", label="label", metrics=[])]  # no metrics while training
    model = CTRModel(
        specs,
        tasks,
        embedding_dim=CONFIG["embedding_dim"],
        shared_table=True,
        interaction=[
            FeatureCross(
                num_layers=CONFIG["cross_layers"],
                projection_dim=CONFIG["rank"],
                kernel_regularizer=keras.regularizers.L2(CONFIG["l2_cross"]),
            )
        ],
        multitask=keras.Sequential(
            [keras.layers.Dense(units, activation="relu") for units in CONFIG["dnn"]],
            name="dnn",
        ),
        embeddings_initializer=keras.initializers.RandomNormal(
            stddev=CONFIG["init_std"]
        ),
        embeddings_regularizer=keras.regularizers.L2(CONFIG["l2_embedding"]),
    )
    return timed_fit_ctr(
        out_dir,
        f"keras_attn_{seed}_{jit}",
        model,
        specs,
        tasks,
        train,
        test,
        CONFIG,
        seed,
        epochs,
        jit,
    )


def run_deepctr(out_dir: str, seed: int, epochs: int) -> dict:
    import tensorflow as tf
    from deepctr.feature_column import SparseFeat
    from deepctr.models import DCNMix

    tf.keras.utils.set_random_seed(seed)
    train, test, specs = load()
    columns = [
        SparseFeat(f.name, f.vocabulary_size, embedding_dim=CONFIG["embedding_dim"])
        for f in specs
    ]
    model = DCNMix(
        columns,
        columns,
        cross_num=CONFIG["cross_layers"],
        dnn_hidden_units=CONFIG["dnn"],
        low_rank=CONFIG["rank"],
        num_experts=CONFIG["num_experts"],
        l2_reg_embedding=CONFIG["l2_embedding"],
        l2_reg_cross=CONFIG["l2_cross"],
        seed=seed,
    )
    return timed_fit_deepctr(
        out_dir,
        f"deepctr_{seed}",
        model,
        _encode(train, specs),
        train["label"].to_numpy("float32"),
        _encode(test, specs),
        CONFIG,
        epochs,
    )


def main(argv=None) -> int:
    return criteo_main(argv, "bench_dcn", __doc__, DEEPCTR, KERAS_ATTN, "off")


if __name__ == "__main__":
    sys.exit(main())
