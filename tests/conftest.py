"""Test configuration: quiet TensorFlow, seeded randomness, and the shared data
folder."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from keras_attn.backend import KERAS_3, keras, tf  # noqa: E402

#: `../shared/data` beside the repository: real data for slow tests and benchmarks.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data(relative: str) -> Path:
    """Path of a file under ../shared/data, or skip the test when it is absent."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"{path} is absent: this test reads ../shared/data (see DATA.md)")
    return path


def pytest_runtest_setup(item):
    # The harness refuses to run inside a test the CI tier runs under one generation.
    from tests import harness

    harness.ONE_GENERATION_ONLY = (
        item.get_closest_marker("generation_neutral") is not None
        and item.get_closest_marker("generation_specific") is None
    )


@pytest.fixture(autouse=True)
def _seed_and_policy():
    keras.utils.set_random_seed(0)
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture
def text_fit_spy(monkeypatch):
    """`keras_attn.models.fit_text_classifier` replaced by a spy, for CLI tests: the
    returned dict gets the keyword arguments of the last call and its `texts`; the
    fit returns an untrained `TextClassifier` of the labels' classes."""
    from keras_attn import models

    received = {}

    def fit(texts, labels, **kwargs):
        received.update(kwargs, texts=texts)
        return models.TextClassifier(None, None, sorted(set(map(str, labels))))

    monkeypatch.setattr(models, "fit_text_classifier", fit)
    return received


def pytest_report_header(config):
    return f"keras_attn under {'Keras 3' if KERAS_3 else 'tf_keras (Keras 2)'}: " + (
        f"keras {keras.__version__}, tensorflow {tf.__version__}"
    )


rng = np.random.default_rng
