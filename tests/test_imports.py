"""What importing the public modules pulls in, in fresh processes.

A CTR user's imports load no tensorflow-text (its ops are needed only to tokenize),
and no public module loads a heavy package beyond what TensorFlow and Keras
themselves load (Keras 3 imports matplotlib and scikit-learn when they are
installed: that baseline is measured, not assumed).
"""

import json
import subprocess
import sys

import pytest

HEAVY = ("tensorflow_text", "tensorflow_recommenders", "sklearn", "matplotlib")
PROBE = """
import json, sys
heavy = {heavy}
def loaded():
    return sorted(m for m in heavy if m in sys.modules)
import keras_attn.backend  # TensorFlow and Keras: the baseline
report = {{"baseline": loaded()}}
for module in {modules}:
    __import__(module)
    report[module] = loaded()
print(json.dumps(report))
"""
# Imported one after the other in one process each; a package appearing after a
# module's import was loaded by that module (or one before it in the list).
CTR_SIDE = [
    "keras_attn.layers",
    "keras_attn.features",
    "keras_attn.models.ctr",
    "keras_attn.datasets",
    "keras_attn.serving",
    "keras_attn.models",
    "keras_attn.models.retrieval",  # TFRS only when a retrieval model is built
]
TEXT_SIDE = ["keras_attn.text"]


def _report(modules):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY, modules=modules)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("modules", [CTR_SIDE, TEXT_SIDE], ids=["ctr", "text"])
def test_public_modules_load_no_heavy_package_beyond_tensorflow(modules):
    report = _report(modules)
    baseline = set(report.pop("baseline"))
    assert "tensorflow_text" not in baseline
    extra = {m: sorted(set(got) - baseline) for m, got in report.items()}
    assert not any(extra.values()), f"heavy packages loaded on import: {extra}"


def test_building_a_tokenizer_loads_tensorflow_text():
    from keras_attn.text import Tokenizer

    Tokenizer("bert-base-uncased", sequence_length=8)
    assert "tensorflow_text" in sys.modules
