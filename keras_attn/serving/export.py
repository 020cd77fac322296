"""Export for TF Serving: versioned SavedModels with a named `serving_default`.

`export(model, "saved_models/census_mmoe", version=1)` writes
`saved_models/census_mmoe/1/{saved_model.pb, variables/, assets/}`. The
`serving_default` signature takes each raw feature by its input name (a batch of
scalars: strings, floats, ints) and returns each output by its name (the task
names of a CTR model). The same files load with `tf.saved_model.load` in a process
that imports neither Keras nor keras_attn. A text classifier
(`export_text_classifier`, or `export` of the `TextClassifier` that
`fit_text_classifier` returns) is exported with its tokenizer in front: raw strings
in.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from keras_attn._publish import (
    check_export_target,
    latest_version,
    new_temp_folder,
    place_version,
    version_problem,
)
from keras_attn.backend import tf, variables_to_constants, write_saved_model
from keras_attn.features.specs import features_to_json
from keras_attn.models.base import output_tensors
from keras_attn.models.ctr import CTRModel, split_ctr_model
from keras_attn.models.text import build_text_serving_model
from keras_attn.models.text_classifier import TextClassifier
from keras_attn.serving.ctr_core import folded_ctr_core
from keras_attn.serving.ctr_lookups import fused_ctr_preprocessing
from keras_attn.serving.explain import ctr_explain_fn, text_explain_fn
from keras_attn.serving.requests import to_arrays
from keras_attn.serving.warmup import write_warmup

__all__ = [
    "check_export_target",
    "export",
    "export_text_classifier",
    "latest_version",
    "load_serving_fn",
    "read_features_json",
    "resolve_export",
]

_SPECS_FILE = "keras_attn_features.json"


def resolve_export(path) -> Path:
    """A loadable version folder: `path` itself, or the highest version under it.

    Raises:
        ValueError: `path` is neither, or the version is incomplete (TF Serving,
            which loads the highest version, could not load it).
    """
    path = Path(path)
    if (path / "saved_model.pb").exists() or (
        path.name.isdigit() and path.is_dir() and latest_version(path) is None
    ):
        version = path  # a version folder (perhaps an incomplete one)
    else:
        number = latest_version(path)
        if number is None:
            raise ValueError(
                "`--model` must be an export's version folder (with saved_model.pb) "
                f"or its base folder (with numbered versions). Received: {str(path)!r}"
            )
        version = path / str(number)
    problem = version_problem(version)
    if problem:
        raise ValueError(
            f"Version folder {str(version)!r} is not loadable: {problem}. TF Serving "
            "loads the highest version of a base folder and would fail on it: "
            "export again, or remove the folder"
        )
    return version


def _input_names(model) -> list[str]:
    names = getattr(model, "input_names", None)
    if names:
        return list(names)
    return [t.name.split(":")[0] for t in model.inputs]


def _outputs_dict(model, outputs) -> dict:
    if isinstance(outputs, dict):
        return dict(outputs)
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    names = list(getattr(model, "output_names", None) or [])
    if len(names) != len(outputs):
        names = [f"output_{i}" for i in range(len(outputs))]
    return dict(zip(names, outputs))


def _batch_check(inputs: dict):
    """The `Assert` op that fails a request whose inputs have different batch
    sizes, naming the first input whose size differs; None for fewer than two.

    One assertion for all the inputs (a CTR export has dozens): at batch 1 the
    graph's time is mostly per-node overhead: one check per input cost ~6 nodes
    each, and this runs eight whatever the number of inputs.
    """
    names = sorted(inputs)
    if len(names) < 2:
        return None
    values = [inputs[name] for name in names]
    # The shapes by one op per dtype (ShapeN takes one dtype), concatenated in
    # the names' order; the batch sizes picked by one gather at the static
    # offsets of the first dimensions: (inputs,).
    shapes = {}
    for dtype in sorted({v.dtype for v in values}, key=lambda d: d.name):
        group = [name for name, v in zip(names, values) if v.dtype == dtype]
        shapes.update(zip(group, tf.shape_n([inputs[name] for name in group])))
    offsets = np.cumsum([0] + [v.shape.rank for v in values[:-1]])
    sizes = tf.gather(tf.concat([shapes[name] for name in names], axis=0), offsets)
    differs = tf.not_equal(sizes, sizes[0])
    first = tf.argmax(tf.cast(differs, tf.int32))
    # Backticks: the Assert op escapes quotes in its message.
    message = tf.strings.join(
        [
            "Input `",
            tf.gather(tf.constant(names), first),
            f"` must have the batch size of input `{names[0]}`",
        ]
    )
    return tf.debugging.Assert(tf.logical_not(tf.reduce_any(differs)), [message])


def _behind(check, values: list) -> list:
    """`values` as tensors that exist only once `check` (an op or None) has
    passed."""
    if check is None:
        return list(values)
    with tf.control_dependencies([check]):
        return tf.identity_n(values)


def _same_batch(inputs: dict) -> dict:
    """The inputs, behind `_batch_check`: a request whose inputs have different
    batch sizes fails with InvalidArgument naming the first input whose size
    differs, before any layer sees it."""
    names = sorted(inputs)
    values = _behind(_batch_check(inputs), [inputs[name] for name in names])
    return dict(zip(names, values))


# A CTR model's weights are folded into its serving graph up to this many bytes
# (a GraphDef holds at most 2 GB); a larger model serves its variables as they are.
FOLD_LIMIT = 256 * 2**20


def _ctr_core(model, parts, trusted_ids=True):
    """`(encoded dict -> outputs, {key: TensorSpec})` of a `CTRModel`'s core as the
    export serves it; `parts`: `split_ctr_model(model)`.

    The core's weights are constants, so that TF Serving's graph optimizer
    computes once, at load, what no request changes: the weight reads and casts,
    the fused expert kernel's transpose, the attention gate's key projection
    folded with its task contexts. The census quickstart export's request took
    ~10 % less CPU time at batch 1 and 512 (`benchmarks/RESULTS.md`,
    bench_serving). A plain MMoE model's core is served with its field embeddings
    folded into the experts' and gates' first layer
    (`keras_attn.serving.ctr_core`; `trusted_ids`: the ids come from the export's
    own lookups). Models whose weights exceed `FOLD_LIMIT` run their core as it is.
    """
    preprocessor, core = parts
    specs = {
        name: tf.TensorSpec([None, *t.shape[1:]], t.dtype, name=name)
        for name, t in output_tensors(preprocessor).items()
    }
    size = sum(int(np.prod(w.shape)) * tf.as_dtype(w.dtype).size for w in model.weights)
    if size > FOLD_LIMIT:
        return (lambda encoded: core(encoded, training=False)), specs
    plan = folded_ctr_core(model, trusted_ids) or (lambda x: core(x, training=False))
    traced = tf.function(plan).get_concrete_function(specs)
    folded = variables_to_constants(traced)

    def call(encoded):
        flat = folded(*tf.nest.flatten(encoded))  # the dict's values by sorted key
        return tf.nest.pack_sequence_as(traced.structured_outputs, flat)

    return call, specs


def _serving_call(model, parts=None):
    """`(inputs -> outputs, resources)` of `model` as the export serves it, the
    inputs' batch sizes checked (`_batch_check`): a `CTRModel` (`parts`:
    `split_ctr_model(model)`) runs its preprocessing (lookup tables,
    standardization; its categorical fields by one lookup,
    `keras_attn.serving.ctr_lookups`), then its core as `_ctr_core` serves it;
    other models `model(inputs)`. `resources`: what the SavedModel must hold
    besides the model (the fused lookup's table). The SavedModel keeps the
    variables too, for its other signatures."""
    if parts is None:
        return (lambda inputs: model(_same_batch(inputs), training=False)), []
    core = _ctr_core(model, parts)[0]
    preprocessor = parts[0]
    fused = fused_ctr_preprocessing(model, preprocessor)
    if fused is None:
        return (
            lambda inputs: core(preprocessor(_same_batch(inputs), training=False))
        ), []
    encode, table = fused

    def call(inputs):
        # The strings' fingerprints (one column each, whatever the other
        # columns' sizes) run beside the check, which guards what combines
        # columns: at batch 1 it no longer waits before every other op.
        check = _batch_check(inputs)
        return core(encode(inputs, guard=lambda values: _behind(check, values)))

    return call, [table]


def export(
    model,
    base_dir: str | Path,
    version: int | None = None,
    features=None,
    overwrite: bool = False,
    warmup=None,
    explain=False,
    encoded=False,
) -> Path:
    """Writes `model` for TF Serving as `base_dir/<version>/`.

    Args:
        model: a Keras model with named inputs (e.g. a `CTRModel`), or a
            `TextClassifier` (from `fit_text_classifier`: exported with its
            preprocessor, see `export_text_classifier`).
        base_dir: the model's folder, e.g. "saved_models/census_mmoe".
        version: int. The version folder. Defaults to one more than the highest
            version present when the export is moved in (1 for a new folder): two
            exports at once get two versions.
        features: optional feature specs, written as JSON to
            `<version>/assets.extra/keras_attn_features.json`.
        overwrite: bool. Replace an existing version (swapped in whole; the old
            one is removed after). Defaults to False.
        warmup: optional raw rows (a DataFrame, a list of dicts, or for a text
            export a list of strings): written as TF Serving's warm-up records to
            `<version>/assets.extra/tf_serving_warmup_requests`, for every signature.
        explain: False, True or a function `inputs dict -> outputs dict`. Adds an
            "explain" signature on the same inputs. True builds it for a
            `CTRModel` (`keras_attn.serving.explain.ctr_explain_fn`: the outputs
            plus each task's gate weights and AutoInt's attention) and for a
            `TextClassifier` (`text_explain_fn`). Defaults to False.
        encoded: bool. Adds, for a `CTRModel`, an "encoded" signature on the
            values its preprocessing makes (what `split_ctr_model(model)[0]`
            returns, by the same keys: `categorical_ids` `(batch, fields)`,
            `numeric_preprocessing` standardized numbers, a history's ids and
            mask), for callers whose feature store encodes beforehand; the same
            named outputs. An id outside its field's range reads a zero vector,
            as in the model. Warm-up records cover the raw-value signatures only.
            Defaults to False.

    Returns:
        The path of the version folder.

    Example:

    >>> import tempfile
    >>> from keras_attn.backend import keras
    >>> x = keras.Input(shape=(), dtype="float32", name="x")
    >>> y = keras.layers.Reshape((1,))(x)
    >>> model = keras.Model({"x": x}, {"y": keras.layers.Dense(1, name="y")(y)})
    >>> path = export(model, tempfile.mkdtemp() + "/demo", version=3)
    >>> path.name
    '3'
    """
    if isinstance(model, TextClassifier):
        return export_text_classifier(
            model.model,
            model.preprocessor,
            base_dir,
            version=version,
            class_names=model.class_names,
            overwrite=overwrite,
            warmup=warmup,
            explain=explain,
        )
    base = Path(base_dir)
    # Before the slow save: a taken version, a file in the way, no permission.
    check_export_target(base, version, overwrite)
    names = _input_names(model)
    if len(names) != len(model.inputs):
        raise ValueError(f"Model {model.name!r}: cannot name its inputs ({names})")
    signature = {
        n: tf.TensorSpec([None, *list(t.shape[1:])], tf.as_dtype(t.dtype), name=n)
        for n, t in zip(names, model.inputs)
    }

    # The CTR model's preprocessing and core, cut once for every signature.
    parts = split_ctr_model(model) if isinstance(model, CTRModel) else None
    call, resources = _serving_call(model, parts)

    def serve(inputs):
        return _outputs_dict(model, call(inputs))

    endpoints = {"serving_default": serve}
    if explain is True:
        explain = ctr_explain_fn(model)
    if callable(explain):
        explain_fn = explain

        def serve_explain(inputs):
            return dict(explain_fn(_same_batch(inputs)))

        endpoints["explain"] = serve_explain
    elif explain is not False and explain is not None:
        raise ValueError(
            "`explain` must be False, True or a function of the inputs dict. "
            f"Received: explain={explain!r}"
        )

    signatures = {}
    if not isinstance(encoded, bool) and encoded is not None:
        raise ValueError(f"`encoded` must be True or False. Received: {encoded!r}")
    if encoded:
        if not isinstance(model, CTRModel):
            raise ValueError(
                "`encoded=True` needs a `CTRModel` (its preprocessing makes the "
                f"encoded values). Received: a {type(model).__name__}"
            )
        core, specs = _ctr_core(model, parts, trusted_ids=False)

        def serve_encoded(values):
            return _outputs_dict(model, core(_same_batch(values)))

        endpoints["encoded"] = serve_encoded
        signatures["encoded"] = [specs]

    if warmup is not None:
        # Checked (and converted) before the slow save.
        dtypes = {n: spec.dtype.name for n, spec in signature.items()}
        warmup = to_arrays(warmup, dtypes, features)
        if not len(next(iter(warmup.values()), [])):
            raise ValueError("`warmup` must hold at least one row. Received: 0 rows")

    # Written beside the target and moved in whole (keras_attn._publish):
    # TF Serving polls the folder and must never see a half-written version.
    tmp = new_temp_folder(base)
    try:
        out = tmp / "model"
        write_saved_model(
            model, str(out), endpoints, [signature], signatures, resources
        )
        if features is not None:
            extra = out / "assets.extra"
            extra.mkdir(exist_ok=True)
            (extra / _SPECS_FILE).write_text(features_to_json(features))
        if warmup is not None:
            raw = tuple(n for n in endpoints if n not in signatures)
            write_warmup(out, warmup, dtypes, raw, base.name)
        target = place_version(out, base, version, overwrite)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def export_text_classifier(
    classifier,
    tokenizer,
    base_dir,
    version=None,
    class_names=None,
    overwrite=False,
    warmup=None,
    explain=False,
):
    """Exports a classifier for TF Serving with raw strings in.

    `serving_default` takes `text` (a batch of strings) and returns `probabilities`
    and `label` (the model of `keras_attn.models.build_text_serving_model`).
    Written with `export` as `base_dir/<version>/`; it loads in TensorFlow +
    tensorflow-text alone (`import tensorflow_text` registers the tokenizer ops),
    and in TF Serving 2.20 or newer. `warmup` (a list of strings) writes TF
    Serving's warm-up records; `explain=True` adds an "explain" signature with the
    attention weights (`keras_attn.serving.explain.text_explain_fn`).

    Returns:
        The path of the version folder.
    """
    model = build_text_serving_model(classifier, tokenizer, class_names)
    if explain is True:
        explain = text_explain_fn(classifier, tokenizer, class_names)
    return export(
        model,
        base_dir,
        version=version,
        overwrite=overwrite,
        warmup=warmup,
        explain=explain,
    )


# The tf-text ops a text export's graph uses; their kernels are registered by
# importing tensorflow_text before the graph is loaded.
_TEXT_OPS = (b"FastBertNormalize", b"FastWordpieceTokenizeWithOffsets")


def load_serving_fn(path: str | Path, signature: str = "serving_default"):
    """A signature function of an export (TensorFlow alone, plus tensorflow-text
    for a text export, imported here when its graph needs it)."""
    graph = (Path(path) / "saved_model.pb").read_bytes()
    if any(op in graph for op in _TEXT_OPS):
        import tensorflow_text  # noqa: F401  (registers the ops)
    loaded = tf.saved_model.load(str(path))
    fn = loaded.signatures[signature]
    fn._keras_attn_owner = loaded  # keep the loaded object (and its tables) alive
    return fn


def read_features_json(path: str | Path) -> str | None:
    """The feature specs JSON written next to an export, or None."""
    p = Path(path) / "assets.extra" / _SPECS_FILE
    return p.read_text() if p.exists() else None
