"""Calls a SavedModel signature in a fresh process that imports TensorFlow alone.

For exports whose signature the harness cannot feed from NumPy arrays (strings in,
several outputs by name): the child loads `export_dir`, calls the signature with the
given feeds and asserts that neither keras, tf_keras nor keras_attn got imported.
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np

from tests.harness import require_both_generations, run_isolated

_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf
def _keras_modules():
    return {m for m in sys.modules if m.split(".")[0] in ("keras", "tf_keras")}
baseline = _keras_modules()
export_dir, signature, inputs_path, outputs_path = sys.argv[1:5]
serve = tf.saved_model.load(export_dir).signatures[signature]
with np.load(inputs_path) as data:
    feeds = {k: tf.constant(data[k]) for k in data.files}
outputs = serve(**feeds)
# Strings come back as fixed-width bytes: object arrays would need pickle.
arrays = {k: v.numpy() for k, v in outputs.items()}
arrays = {k: v.astype(bytes) if v.dtype == object else v for k, v in arrays.items()}
np.savez(outputs_path, **arrays)
forbidden = sorted(_keras_modules() - baseline) + sorted(
    m for m in sys.modules if m.split(".")[0] == "keras_attn"
)
print(json.dumps({"forbidden_modules": forbidden[:5]}))
"""


def call_in_tensorflow_only_process(
    export_dir: str, feeds: dict, signature: str = "serving_default", tf_text=False
) -> dict:
    """Returns the signature's outputs as NumPy arrays, computed in a child process
    (which imports tensorflow-text too with `tf_text`, for exports that tokenize)."""
    require_both_generations("a SavedModel reload")
    with tempfile.TemporaryDirectory() as tmp:
        in_path, out_path = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(in_path, **{k: np.asarray(v) for k, v in feeds.items()})
        # Registers the tokenizer ops before the graph is loaded.
        script = ("import tensorflow_text\n" if tf_text else "") + _SCRIPT
        proc = run_isolated(script, export_dir, signature, in_path, out_path, cwd=tmp)
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        assert report["forbidden_modules"] == [], report
        with np.load(out_path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}


__all__ = ["call_in_tensorflow_only_process"]
