"""What an export takes, returns and needs: `inspect_export`.

The signatures (inputs and outputs with dtype and shape), the feature specs, the
warm-up records, the ops the graph uses and the lowest TF Serving release that
loads it (`keras-attn inspect` is its command line).
"""

from __future__ import annotations

import json
from pathlib import Path

from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import dtypes

from keras_attn.backend import tf
from keras_attn.serving.export import read_features_json, resolve_export
from keras_attn.serving.warmup import WARMUP_FILE

__all__ = ["TF_SERVING_TEXT_OPS", "inspect_export"]

#: The tf-text ops that TF Serving links into its model server, and the first TF
#: Serving release that has them (see the README's serving part).
TF_SERVING_TEXT_OPS = {
    "FastBertNormalize": "2.20",
    "FastWordpieceTokenizeWithOffsets": "2.20",
}


def _graph(export_dir: Path):
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    return proto.meta_graphs[0]


def _tensor_info(info) -> dict:
    shape = None
    if not info.tensor_shape.unknown_rank:
        shape = [None if d.size < 0 else d.size for d in info.tensor_shape.dim]
    return {"dtype": dtypes.as_dtype(info.dtype).name, "shape": shape}


def _version(text: str) -> tuple[int, int]:
    major, minor = (int(p) for p in text.split(".")[:2])
    return major, minor


def inspect_export(path) -> dict:
    """What an export takes, returns and needs.

    Args:
        path: the export's base or version folder.

    Returns:
        A dict: `export`, `signatures` (`{name: {"inputs": {name: {dtype, shape}},
        "outputs": ...}}`), `features` (the feature specs JSON, parsed, or None),
        `warmup_records`, `ops` (sorted), `core_ops`, `tf_text_ops` (those TF Serving
        links), `unknown_ops` (neither: TF Serving cannot load the export),
        `written_by` (the TensorFlow version) and `min_tf_serving` (the lowest TF
        Serving release that loads it, with `min_tf_serving_reason`).
    """
    export_dir = resolve_export(path)
    meta = _graph(export_dir)
    signatures = {
        name: {
            "inputs": {k: _tensor_info(v) for k, v in sorted(sig.inputs.items())},
            "outputs": {k: _tensor_info(v) for k, v in sorted(sig.outputs.items())},
        }
        for name, sig in sorted(meta.signature_def.items())
        if not name.startswith("__")
    }
    ops = {n.op for n in meta.graph_def.node}
    for fn in meta.graph_def.library.function:
        ops |= {n.op for n in fn.node_def}
    library = {fn.signature.name for fn in meta.graph_def.library.function}
    ops -= library  # calls of the graph's own functions
    core = sorted(op for op in ops if hasattr(tf.raw_ops, op))
    text = sorted(op for op in ops if op in TF_SERVING_TEXT_OPS)
    unknown = sorted(ops - set(core) - set(text))
    writer = meta.meta_info_def.tensorflow_version or tf.__version__
    floor, reasons = (
        _version(writer),
        [
            f"written by TensorFlow {writer}: a TF Serving release bundles its "
            "TensorFlow and loads graphs of that version or older"
        ],
    )
    for op in text:
        if _version(TF_SERVING_TEXT_OPS[op]) > floor:
            floor = _version(TF_SERVING_TEXT_OPS[op])
        reasons.append(f"{op} is linked from TF Serving {TF_SERVING_TEXT_OPS[op]}")
    specs = read_features_json(export_dir)
    warmup = export_dir / "assets.extra" / WARMUP_FILE
    return {
        "export": str(export_dir),
        "signatures": signatures,
        "features": json.loads(specs) if specs is not None else None,
        "warmup_records": (
            sum(1 for _ in tf.data.TFRecordDataset(str(warmup)))
            if warmup.exists()
            else 0
        ),
        "ops": sorted(ops),
        "core_ops": core,
        "tf_text_ops": text,
        "unknown_ops": unknown,
        "written_by": writer,
        "min_tf_serving": None if unknown else f"{floor[0]}.{floor[1]}",
        "min_tf_serving_reason": (
            f"ops {unknown} are neither TensorFlow core nor linked by TF Serving"
            if unknown
            else "; ".join(reasons)
        ),
    }
