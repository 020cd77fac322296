"""The shared layer harness: one call checks every contract a keras_attn layer keeps.

`run_layer_test` checks, for one layer configuration:
config round trip and registered serialization; eager and symbolic (functional) output
shapes; trainable/non-trainable weight counts; one `fit` step that changes weights;
`mixed_float16` and `mixed_bfloat16` (finite outputs and gradients, masks included); a
training step under `jit_compile=True`; `.keras` save and reload with equal outputs; and
a SavedModel export reloaded in a subprocess that imports only TensorFlow (it asserts
that neither keras, tf_keras nor keras_attn got imported) and gives the same outputs.

`run_model_test` is the model harness beside it (after KerasHub's
`run_backbone_test`/`run_task_test`): `.keras` round trip, both mixed policies,
the SavedModel reloaded by TensorFlow alone, and one XLA training step, for a model
class.

`assert_mask_invariant` checks that values at padded positions change nothing.
"""

from __future__ import annotations

import atexit
import inspect
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from keras_attn.backend import export_saved_model, keras, tf
from keras_attn.precision import model_policy, policy_scope

# Set by tests/conftest.py before each test: True when the test is marked
# `generation_neutral` and not `generation_specific`, so the CI tier runs it under
# Keras 3 only.
ONE_GENERATION_ONLY = False


def require_both_generations(what: str) -> None:
    """Fails a test marked generation-neutral that runs `what`: the layer harness and
    exports are what differs between the Keras generations, so a test that runs them
    must be marked `generation_specific` (python -m tests runs it under both)."""
    assert not ONE_GENERATION_ONLY, (
        f"{what} runs in a test marked generation_neutral: it checks what differs "
        "between the Keras generations; mark the test @pytest.mark.generation_specific"
    )


def _isolated_env() -> dict:
    """The environment of an isolated process: no PYTHONPATH (this checkout is not
    importable from a temporary working folder), TensorFlow's logs off."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    return env


# The child of `_IsolatedInterpreter`: it imports TensorFlow once, then runs each
# script it is sent as `python -c script args` would (its own globals, `sys.argv`,
# the working folder, stdout captured), and answers on its own pipe, so nothing the
# script or TensorFlow prints can garble the answer.
_INTERPRETER = r"""
import contextlib, io, json, os, sys, traceback
import tensorflow as tf
answers, with_text = os.fdopen(int(sys.argv[1]), "w"), sys.argv[2] == "1"
for line in sys.stdin:
    request = json.loads(line)
    os.chdir(request["cwd"])
    sys.argv = ["-c", *request["args"]]
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code_object = compile(request["script"], "<isolated>", "exec")
            exec(code_object, {"__name__": "__main__"})
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        stderr.write(traceback.format_exc())
        code = 1
    # No longer TensorFlow alone: this child ends, the next script gets a new one.
    closing = "tensorflow_text" in sys.modules and not with_text
    answers.write(json.dumps({
        "returncode": code,
        "stdout": stdout.getvalue(),
        "stderr": stderr.getvalue(),
        "closing": closing,
        "id": request["id"],
    }) + "\n")
    answers.flush()
    if closing:
        break
"""


class _IsolatedInterpreter:
    """One long-lived child interpreter with TensorFlow imported, for the many
    "reload this SavedModel with TensorFlow alone" checks: a fresh process per check
    spent most of its time importing TensorFlow. Like a fresh process it cannot import
    this checkout (no PYTHONPATH, a temporary working folder); each script still
    asserts that loading its export imports neither keras nor keras_attn. Scripts
    that import tensorflow_text (a line `import tensorflow_text`) get their own child
    (`_interpreter`), and the other child ends once anything imported it, so an
    export that needs the tf-text ops without importing them still fails."""

    def __init__(self, with_text: bool):
        self._requests = 0
        self._answers, write = os.pipe()
        self._folder = tempfile.mkdtemp(prefix="keras_attn_isolated_")
        # What the child itself prints (TensorFlow's C++ logs, a crash): for the
        # message when it gives no answer.
        self._log = os.path.join(self._folder, "interpreter.log")
        with open(self._log, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _INTERPRETER, str(write), str(int(with_text))],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                env=_isolated_env(),
                cwd=self._folder,
                pass_fds=(write,),
                text=True,
            )
        os.close(write)
        self._reader = os.fdopen(self._answers, "r")

    def run(self, script: str, args: list[str], cwd, timeout: float) -> dict:
        self._requests += 1
        request = {"script": script, "args": args, "cwd": str(cwd)}
        request["id"] = self._requests
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            ready, _, _ = select.select([self._reader], [], [], timeout)
            line = self._reader.readline() if ready else ""
        except BaseException:
            # Interrupted (pytest-timeout, Ctrl-C): the child may still answer this
            # request later, and that answer must never reach the next caller.
            self.close()
            raise
        if not line:
            with open(self._log, errors="replace") as log:
                tail = log.read()[-3000:]
            self.close()
            raise AssertionError(
                f"isolated interpreter gave no answer within {timeout:.0f} s "
                f"(exit code {self.process.poll()}):\n{tail}"
            )
        answer = json.loads(line)
        if answer["closing"] or answer["id"] != request["id"]:
            self.close()
        assert answer["id"] == request["id"], (answer["id"], request["id"])
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._reader.close()
        shutil.rmtree(self._folder, ignore_errors=True)


_INTERPRETERS: dict[bool, _IsolatedInterpreter] = {}


def _interpreter(script: str) -> _IsolatedInterpreter:
    with_text = re.search(r"^import tensorflow_text\b", script, re.M) is not None
    child = _INTERPRETERS.get(with_text)
    if child is None or child.process.poll() is not None:
        child = _INTERPRETERS[with_text] = _IsolatedInterpreter(with_text)
    return child


@atexit.register
def _close_interpreters() -> None:
    for child in _INTERPRETERS.values():
        child.close()
    _INTERPRETERS.clear()


def run_isolated(
    script: str, *args, cwd, fresh: bool = False, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Runs `script` as `python -c script *args` would, in a process that cannot
    import this checkout: no PYTHONPATH, and `cwd` (a temporary folder) instead of the
    repo root as its first path entry; TensorFlow's logs off. By default the script
    runs in a long-lived child interpreter that imports only TensorFlow (see
    `_IsolatedInterpreter`); `fresh=True` starts a new process for it. Fails the
    calling test with the script's stderr tail when it exits non-zero."""
    args = [str(a) for a in args]
    if fresh:
        proc = subprocess.run(
            [sys.executable, "-c", script, *args],
            capture_output=True,
            text=True,
            env=_isolated_env(),
            cwd=cwd,
            timeout=timeout,
        )
    else:
        answer = _interpreter(script).run(script, args, cwd, timeout)
        proc = subprocess.CompletedProcess(
            ["-c", "<script>", *args],
            answer["returncode"],
            answer["stdout"],
            answer["stderr"],
        )
    assert proc.returncode == 0, f"isolated process failed:\n{proc.stderr[-3000:]}"
    return proc


# Runs in a fresh interpreter: loads the SavedModel with TensorFlow alone.
_RELOAD_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf
for module in sys.argv[4:]:  # op libraries a server links (e.g. tensorflow_text)
    __import__(module)
# `import tensorflow` itself pulls in parts of keras (its tf.keras lazy loader): what
# counts is that loading and serving the model imports nothing more of them.
def _keras_modules():
    return {m for m in sys.modules if m.split(".")[0] in ("keras", "tf_keras")}
baseline = _keras_modules()
export_dir, inputs_path, outputs_path = sys.argv[1:4]
loaded = tf.saved_model.load(export_dir)
serve = loaded.signatures["serving_default"]
with np.load(inputs_path) as data:
    feeds = {k: tf.constant(data[k]) for k in data.files}
outputs = {k: v.numpy() for k, v in serve(**feeds).items()}
# Strings as bytes arrays: an object array would need pickling to be read back.
np.savez(outputs_path, **{
    k: v.astype(bytes) if v.dtype == object else v for k, v in outputs.items()
})
forbidden = sorted(_keras_modules() - baseline) + sorted(
    m for m in sys.modules if m.split(".")[0] == "keras_attn"
)
print(json.dumps({"forbidden_modules": forbidden[:5]}))
"""


def _flat_shapes(structure):
    """Flattens an expected-shape structure whose leaves are tuples of ints/None."""
    if isinstance(structure, dict):
        return [s for k in sorted(structure) for s in _flat_shapes(structure[k])]
    if (
        isinstance(structure, (list, tuple))
        and structure
        and all(isinstance(s, (list, tuple, dict)) for s in structure)
    ):
        return [s for item in structure for s in _flat_shapes(item)]
    return [tuple(structure)]


def _flat_outputs(outputs):
    if isinstance(outputs, dict):
        return [o for k in sorted(outputs) for o in _flat_outputs(outputs[k])]
    if isinstance(outputs, (list, tuple)):
        return [o for item in outputs for o in _flat_outputs(item)]
    return [outputs]


def _numpy(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def _assert_shape(name, got, expected, ignore_batch=False):
    got, expected = tuple(got), tuple(expected)
    if ignore_batch:
        got, expected = got[1:], expected[1:]
    assert got == expected, f"{name}: shape {got} != expected {expected}"


def _is_floating(array) -> bool:
    # NumPy calls bfloat16 (an ml_dtypes type) kind "V", not "f".
    return array.dtype.kind == "f" or array.dtype.name == "bfloat16"


def _assert_finite(name, values):
    for i, v in enumerate(values):
        v = _numpy(v)
        if _is_floating(v):
            assert np.all(np.isfinite(v.astype("float64"))), (
                f"{name}: output {i} ({v.dtype}) has NaN/inf"
            )


def _call(layer, inputs, call_kwargs, training=None):
    """Calls the layer: the first input positionally, the others by name."""
    names = list(inputs)
    kwargs = {k: inputs[k] for k in names[1:]}
    if training is not None and "training" in inspect.signature(layer.call).parameters:
        kwargs["training"] = training
    return layer(inputs[names[0]], **kwargs, **(call_kwargs or {}))


def _dtype_name(array) -> str:
    """The Keras dtype of an input array: strings (object or bytes) are "string"."""
    return "string" if array.dtype.kind in "OSU" else array.dtype.name


def _keras_inputs(inputs):
    return {
        name: keras.Input(shape=arr.shape[1:], dtype=_dtype_name(arr), name=name)
        for name, arr in inputs.items()
    }


def _assert_equal_outputs(got, expected, atol, what):
    """Numbers within `atol`; strings and booleans exactly."""
    for i, (g, e) in enumerate(zip(got, expected)):
        if e.dtype.kind in "OSUb":
            np.testing.assert_array_equal(
                g.astype(e.dtype), e, err_msg=f"{what} output {i}"
            )
        else:
            np.testing.assert_allclose(g, e, atol=atol, err_msg=f"{what} output {i}")


def _functional(layer, inputs, call_kwargs):
    symbolic = _keras_inputs(inputs)
    outputs = _call(layer, symbolic, call_kwargs)
    flat = _flat_outputs(outputs)
    return keras.Model(symbolic, flat if len(flat) > 1 else flat[0]), flat


def _fit_once(model, inputs, jit_compile=False, loss=None, targets=None):
    """One optimizer step (the whole batch) and its loss. By default an MSE to random
    targets on every float output (outputs that are not floats, masks and ids, get
    no loss); dict outputs get a dict of losses and targets. A model with its own
    `train_step` (one that computes its loss) is compiled without a loss and fed
    `inputs` alone."""
    own_loss = type(model).train_step is not keras.Model.train_step
    if loss is None and own_loss:
        targets = None
    elif loss is None:
        outputs = model(inputs)
        rng = np.random.default_rng(0)
        if isinstance(outputs, dict):
            floats = [k for k in sorted(outputs) if _is_floating(_numpy(outputs[k]))]
            loss = {k: "mse" for k in floats}
            targets = {
                k: rng.normal(size=outputs[k].shape).astype("float32") for k in floats
            }
        else:
            flat = [_numpy(o) for o in _flat_outputs(outputs)]
            targets = [rng.normal(size=o.shape).astype("float32") for o in flat]
            loss = ["mse" if _is_floating(o) else None for o in flat]
            if len(flat) == 1:
                loss, targets = loss[0], targets[0]
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2), loss=loss, jit_compile=jit_compile
    )
    first = next(iter(inputs.values())) if isinstance(inputs, dict) else inputs
    history = model.fit(
        inputs, targets, batch_size=len(first), epochs=1, shuffle=False, verbose=0
    )
    return history.history["loss"][-1]


def _run_under_policy(policy, layer_cls, init_kwargs, inputs, call_kwargs, losses):
    """A fresh layer made and called (training=True) under `policy`, its float
    inputs fed as float32 (as a model's inputs are). Its outputs and the gradients
    of their sum (plus the layer's own losses when `losses`) must be finite; returns
    the outputs. The global policy is float32 again afterwards."""
    keras.mixed_precision.set_global_policy(policy)
    try:
        layer = layer_cls(**init_kwargs)
        cast = {
            k: tf.constant(v) if v.dtype.kind != "f" else tf.constant(v, "float32")
            for k, v in inputs.items()
        }
        with tf.GradientTape() as tape:
            outputs = _flat_outputs(_call(layer, cast, call_kwargs, training=True))
            terms = [tf.reduce_sum(tf.cast(o, "float32")) for o in outputs]
            if losses:
                terms += [tf.cast(x, "float32") for x in layer.losses]
            loss = tf.add_n(terms)
        _assert_finite(f"{policy} outputs", outputs)
        grads = tape.gradient(loss, layer.trainable_weights)
        _assert_finite(f"{policy} gradients", [g for g in grads if g is not None])
        return outputs
    finally:
        keras.mixed_precision.set_global_policy("float32")


def _check_mixed_precision(layer_cls, init_kwargs, inputs, call_kwargs):
    for policy in ("mixed_float16", "mixed_bfloat16"):
        outputs = _run_under_policy(
            policy, layer_cls, init_kwargs, inputs, call_kwargs, losses=True
        )
        compute = tf.as_dtype(policy.split("_")[1])
        assert any(o.dtype == compute for o in outputs), (
            f"{policy}: no output in {compute.name}: {[o.dtype for o in outputs]}"
        )


def _check_saved_model(model, inputs, expected, atol, tmp, op_libraries=()):
    """Exports `model`, reloads it with TensorFlow alone and feeds it `inputs` (by
    name): its `serving_default` must give `expected`, a list in model order (served
    as output_0, output_1, ...) or a dict by output name."""
    require_both_generations("a SavedModel reload")
    export_dir = os.path.join(tmp, "export")
    export_saved_model(model, export_dir)
    in_path, out_path = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
    np.savez(
        in_path,
        **{k: v.astype(bytes) if v.dtype == object else v for k, v in inputs.items()},
    )
    proc = run_isolated(
        _RELOAD_SCRIPT, export_dir, in_path, out_path, *op_libraries, cwd=tmp
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["forbidden_modules"] == [], report
    with np.load(out_path) as data:
        served = {k: data[k] for k in data.files}
    if all(re.fullmatch(r"output_\d+", k) for k in served):
        # Outputs without names, in model order (a dict's sorted by key).
        got = [served[k] for k in sorted(served, key=lambda s: int(s[7:]))]
        if isinstance(expected, dict):
            expected = [expected[k] for k in sorted(expected)]
    else:
        assert isinstance(expected, dict), sorted(served)
        assert sorted(served) == sorted(expected), (sorted(served), sorted(expected))
        got = [served[k] for k in sorted(expected)]
        expected = [expected[k] for k in sorted(expected)]
    assert len(got) == len(expected), (len(got), len(expected))
    _assert_equal_outputs(got, expected, atol, "SavedModel")


def run_layer_test(
    layer_cls,
    init_kwargs: dict,
    inputs: dict[str, np.ndarray],
    expected_output_shape,
    expected_num_trainable_weights: int | None = None,
    expected_num_non_trainable_weights: int = 0,
    call_kwargs: dict | None = None,
    expected_num_losses: int = 0,
    run_fit: bool = True,
    run_mixed_precision: bool = True,
    run_xla: bool = True,
    run_saving: bool = True,
    run_saved_model: bool = True,
    op_libraries: tuple = (),
    atol: float = 1e-5,
):
    """Checks one layer configuration against every keras_attn contract.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        inputs: the call's tensor arguments by name, in call order; the first is passed
            positionally, the rest as keywords. Boolean arrays are masks.
        expected_output_shape: a shape tuple, or a list/dict of them for several outputs
            (batch dim included; it is ignored for symbolic outputs).
        expected_num_trainable_weights: after build. None skips the check.
        expected_num_non_trainable_weights: after build.
        call_kwargs: non-tensor call arguments (e.g. `return_attention_scores=True`).
        expected_num_losses: `layer.losses` after a call (regularizers, add_loss).
        op_libraries: modules the SavedModel's reloading process imports for their
            ops, as a server links them (e.g. "tensorflow_text").
    """
    require_both_generations("run_layer_test")
    inputs = {k: np.asarray(v) for k, v in inputs.items()}
    expected = _flat_shapes(expected_output_shape)

    # Config round trip, and registration under the package name.
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    revived = layer_cls.from_config(config)
    assert revived.get_config() == config, "get_config/from_config round trip differs"
    serialized = keras.saving.serialize_keras_object(layer)
    assert keras.saving.deserialize_keras_object(serialized).__class__ is layer_cls
    json.dumps(config)  # the config must be JSON-serializable

    # Eager call, output shapes, weight counts, losses.
    outputs = _flat_outputs(_call(layer, inputs, call_kwargs))
    assert len(outputs) == len(expected), f"{len(outputs)} outputs, {len(expected)}"
    for i, (o, e) in enumerate(zip(outputs, expected)):
        _assert_shape(f"eager output {i}", o.shape, e)
    _assert_finite("eager", outputs)
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights, [
            w.name for w in layer.trainable_weights
        ]
    assert len(layer.non_trainable_weights) == expected_num_non_trainable_weights, [
        w.name for w in layer.non_trainable_weights
    ]
    assert len(layer.losses) == expected_num_losses, layer.losses

    # Symbolic (functional) shapes.
    model, symbolic = _functional(layer_cls(**init_kwargs), inputs, call_kwargs)
    for i, (o, e) in enumerate(zip(symbolic, expected)):
        _assert_shape(f"symbolic output {i}", o.shape, e, ignore_batch=True)

    if run_fit and model.trainable_weights:
        before = [w.numpy().copy() for w in model.trainable_weights]
        loss = _fit_once(model, inputs)
        assert np.isfinite(loss), f"fit loss {loss}"
        changed = [
            not np.allclose(b, w.numpy())
            for b, w in zip(before, model.trainable_weights)
        ]
        assert any(changed), "one fit step changed no weight"

    if run_xla:
        xla_model, _ = _functional(layer_cls(**init_kwargs), inputs, call_kwargs)
        loss = _fit_once(xla_model, inputs, jit_compile=True)
        assert np.isfinite(loss), f"jit_compile fit loss {loss}"

    if run_mixed_precision:
        _check_mixed_precision(layer_cls, init_kwargs, inputs, call_kwargs)

    if run_saving or run_saved_model:
        expected_values = [_numpy(o) for o in _flat_outputs(model(inputs))]
        with tempfile.TemporaryDirectory() as tmp:
            if run_saving:
                path = os.path.join(tmp, "model.keras")
                model.save(path)
                reloaded = keras.models.load_model(path)
                got = [_numpy(o) for o in _flat_outputs(reloaded(inputs))]
                _assert_equal_outputs(got, expected_values, atol, ".keras reload")
            if run_saved_model:
                _check_saved_model(
                    model, inputs, expected_values, atol, tmp, op_libraries
                )
    return layer


#: How far a mixed policy's float outputs may be from float32's (same weights), as
#: a share of the float32 output's largest magnitude (at least 1): float16 keeps 11
#: significant bits, bfloat16 8. The worst of tests/test_model_harness.py's cases
#: was 2.2e-3 and 1.4e-2 (BertBackbone; an AMD EPYC with AVX512_BF16); a model whose
#: weights were not the float32 model's was off by 2.8e-2 to 1.5 in most cases.
MIXED_TOLERANCE = {"mixed_float16": 5e-3, "mixed_bfloat16": 3e-2}


def _json(config):
    # As a .keras file holds it (tuples become lists).
    return json.loads(json.dumps(config))


def _by_name(outputs) -> dict:
    """A model's outputs as NumPy arrays by name: a dict's keys, else output_0, ...
    (a SavedModel's names for outputs without one)."""
    if isinstance(outputs, dict):
        return {k: _numpy(v) for k, v in outputs.items()}
    return {f"output_{i}": _numpy(o) for i, o in enumerate(_flat_outputs(outputs))}


def _assert_same_outputs(got: dict, expected: dict, atol, what):
    assert sorted(got) == sorted(expected), f"{what}: outputs {sorted(got)}"
    names = sorted(expected)
    _assert_equal_outputs(
        [got[k] for k in names], [expected[k] for k in names], atol, what
    )


def _feeds(model, inputs) -> dict:
    """The inputs by name, as a serving signature takes them."""
    if isinstance(inputs, dict):
        return inputs
    names = getattr(model, "input_names", None) or [
        t.name.split(":")[0] for t in model.inputs
    ]
    assert len(names) == 1, names
    return {names[0]: inputs}


def _check_keras_file(model, inputs, expected, atol, tmp):
    """`from_config(get_config())` and a `.keras` save and load give the same class
    with the same config; the reloaded model gives the same outputs."""
    config = _json(model.get_config())
    again = type(model).from_config(model.get_config())
    assert type(again) is type(model), type(again)
    assert _json(again.get_config()) == config, "from_config(get_config()) differs"
    path = os.path.join(tmp, "model.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    assert type(reloaded) is type(model), type(reloaded)
    assert _json(reloaded.get_config()) == config, ".keras reload's config differs"
    _assert_same_outputs(_by_name(reloaded(inputs)), expected, atol, ".keras reload")


def _check_model_mixed_precision(build, weights, inputs, expected):
    """The model built under each mixed policy, given the float32 model's weights,
    computes in that policy and gives finite outputs close to float32's."""
    for policy in ("mixed_float16", "mixed_bfloat16"):
        with policy_scope(policy):
            mixed = build()
        assert model_policy(mixed) == policy, (
            f"built under {policy}, the model computes in {model_policy(mixed)}"
        )
        mixed(inputs)  # a subclassed model makes its weights on its first call
        mixed.set_weights(weights)
        got = _by_name(mixed(inputs))
        assert sorted(got) == sorted(expected), f"{policy}: outputs {sorted(got)}"
        _assert_finite(policy, list(got.values()))
        for name in sorted(expected):
            if not _is_floating(expected[name]):
                continue  # ids and labels may flip on a near tie
            scale = max(1.0, float(np.abs(expected[name]).max()))
            np.testing.assert_allclose(
                got[name].astype("float32"),
                expected[name],
                rtol=0,
                atol=MIXED_TOLERANCE[policy] * scale,
                err_msg=f"{policy} output {name!r} vs float32",
            )


def _jit_compiled(model) -> bool:
    return bool(getattr(model, "jit_compile", getattr(model, "_jit_compile", False)))


def _check_xla_step(model, inputs, loss, targets):
    """One training step compiled with XLA runs, gives a finite loss and changes
    the weights."""
    before = [w.numpy().copy() for w in model.trainable_weights]
    assert before, "the model has no trainable weight"
    value = _fit_once(model, inputs, jit_compile=True, loss=loss, targets=targets)
    assert _jit_compiled(model), "the train step was not compiled with XLA"
    assert np.isfinite(value), f"jit_compile step loss {value}"
    changed = [
        not np.allclose(b, w.numpy()) for b, w in zip(before, model.trainable_weights)
    ]
    assert any(changed), "one XLA train step changed no weight"


def run_model_test(
    build,
    inputs,
    *,
    loss=None,
    train_inputs=None,
    train_targets=None,
    xla_part=None,
    run_saving: bool = True,
    run_xla: bool = True,
    run_mixed_precision: bool = True,
    run_saved_model: bool = True,
    op_libraries: tuple = (),
    atol: float = 1e-5,
):
    """Checks one model configuration against the contracts of a keras_attn model.

    In order: (1) `from_config(get_config())` and a `.keras` save and load give the
    same class, config and outputs; (2) the model built again under
    `mixed_float16` and under `mixed_bfloat16`, with the same weights, computes in
    that policy and gives finite outputs within `MIXED_TOLERANCE` of float32's;
    (3) a SavedModel (`export_saved_model`) reloaded in a process that imports
    TensorFlow alone gives the same outputs; (4) one training step compiled with
    XLA (`jit_compile=True`) runs and changes the weights.

    Args:
        build: a function of no arguments that makes the model (called once per
            policy).
        inputs: what the model is called on: an array, or a dict by input name.
        loss: the XLA step's loss (with `train_targets`). By default an MSE of
            every float output to random targets, or, for a model with its own
            `train_step`, the loss that step computes.
        train_inputs: the XLA step's inputs. Defaults to `inputs`.
        train_targets: the XLA step's targets, with `loss`.
        xla_part: for a model holding ops XLA cannot compile (raw-string lookups):
            a function `(model, inputs) -> (part, part_inputs)` giving the part
            that shares its weights, and that part's inputs, for the XLA step.
        op_libraries: modules the SavedModel's reloading process imports for their
            ops (e.g. "tensorflow_text").
        atol: tolerance of the `.keras` and SavedModel outputs.

    Returns:
        The model (trained one step when `run_xla`).
    """
    require_both_generations("run_model_test")
    if isinstance(inputs, dict):
        inputs = {k: np.asarray(v) for k, v in inputs.items()}
    else:
        inputs = np.asarray(inputs)
    model = build()
    expected = _by_name(model(inputs))
    _assert_finite("float32", list(expected.values()))
    with tempfile.TemporaryDirectory() as tmp:
        if run_saving:
            _check_keras_file(model, inputs, expected, atol, tmp)
        if run_mixed_precision:
            _check_model_mixed_precision(build, model.get_weights(), inputs, expected)
        if run_saved_model:
            _check_saved_model(
                model, _feeds(model, inputs), expected, atol, tmp, op_libraries
            )
    if run_xla:
        part, part_inputs = model, inputs if train_inputs is None else train_inputs
        if xla_part is not None:
            part, part_inputs = xla_part(model, part_inputs)
        _check_xla_step(part, part_inputs, loss, train_targets)
    return model


def assert_mask_invariant(
    layer,
    inputs: dict[str, np.ndarray],
    target: str,
    padded: np.ndarray,
    call_kwargs: dict | None = None,
    seed: int = 0,
    atol: float = 1e-5,
):
    """Asserts that changing `inputs[target]` where `padded` is True changes nothing.

    `padded` has the shape of `inputs[target]` without its last axis.
    """
    base = [_numpy(o) for o in _flat_outputs(_call(layer, inputs, call_kwargs))]
    noisy = dict(inputs)
    rng = np.random.default_rng(seed)
    noise = rng.normal(scale=10.0, size=inputs[target].shape).astype(
        inputs[target].dtype
    )
    noisy[target] = np.where(padded[..., None], noise, inputs[target])
    got = [_numpy(o) for o in _flat_outputs(_call(layer, noisy, call_kwargs))]
    for i, (g, b) in enumerate(zip(got, base)):
        np.testing.assert_allclose(g, b, atol=atol, err_msg=f"output {i} moved")


POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")


def assert_masked_rows(
    layer_cls,
    init_kwargs: dict,
    inputs: dict[str, np.ndarray],
    zero_rows: dict[int, tuple],
    call_kwargs: dict | None = None,
    policies=POLICIES,
):
    """Under each policy: fully masked rows give exact zeros, and nothing is NaN.

    For every policy the layer is made afresh and called (training=True) on
    `inputs` (floats fed as float32, as a model's inputs are); its outputs and the
    gradients of their sum must be finite, and `outputs[i][zero_rows[i]]` must be
    exactly 0 for each output index `i` in `zero_rows` (the rows whose mask has no
    real position: their weights, and the pooled vectors of pooling layers).
    """
    for policy in policies:
        outputs = _run_under_policy(
            policy, layer_cls, init_kwargs, inputs, call_kwargs, losses=False
        )
        for i, index in zero_rows.items():
            got = _numpy(outputs[i])[index].astype("float32")
            assert np.all(got == 0), (
                f"{policy}: output {i} at fully masked rows {index} is not zero: "
                f"max |value| {np.abs(got).max()}"
            )


__all__ = [
    "MIXED_TOLERANCE",
    "POLICIES",
    "assert_mask_invariant",
    "assert_masked_rows",
    "require_both_generations",
    "run_layer_test",
    "run_model_test",
]
