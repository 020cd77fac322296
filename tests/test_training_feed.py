"""keras_attn.training.feed_epochs: in-memory rows fed to `fit` with several steps
per execution whatever the number of steps per epoch, each epoch the batches of
`epoch_batches`; build_training_state: one trace of the step."""

import numpy as np
import pytest

from keras_attn import training
from keras_attn.backend import KERAS_3, keras, tf

ROWS, BATCH, EPOCHS = 30, 4, 3  # 7 steps per epoch (a prime), 2 rows left out


class _Seen(keras.layers.Layer):
    """Counts the rows (their ids, the input) each training step reads."""

    def build(self, input_shape):
        self.seen = self.add_weight(
            shape=(ROWS,), initializer="zeros", trainable=False, name="seen"
        )
        self.scale = self.add_weight(shape=(1,), initializer="ones", name="scale")

    def call(self, ids, training=None):
        if training:
            rows = tf.reshape(tf.cast(ids, tf.int32), [-1, 1])
            self.seen.assign(
                tf.tensor_scatter_nd_add(self.seen, rows, tf.ones([tf.shape(rows)[0]]))
            )
        return tf.cast(ids, "float32")[:, None] * self.scale


def _model():
    ids = keras.Input((), dtype="int64")
    model = keras.Model(ids, _Seen()(ids))
    return model


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_feed_gives_each_epoch_its_batches_and_no_more(steps_per_execution):
    model = _model()
    rows = (tf.range(ROWS, dtype=tf.int64), tf.zeros([ROWS, 1]))
    feed = training.feed_epochs(
        rows, ROWS, BATCH, tf.distribute.get_strategy(), steps_per_execution, seed=5
    )
    assert feed.steps_per_execution == steps_per_execution
    model.compile("sgd", "mse", steps_per_execution=feed.steps_per_execution)
    per_epoch = []

    class Snapshot(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            per_epoch.append(model.layers[-1].seen.numpy().copy())

    model.fit(
        feed.dataset,
        epochs=EPOCHS,
        steps_per_epoch=feed.steps_per_epoch,
        callbacks=[Snapshot(), *feed.callbacks],
        verbose=0,
    )
    steps = ROWS // BATCH
    assert int(model.optimizer.iterations) == EPOCHS * steps
    # Epoch e read exactly the rows of epoch_batches' epoch e, once each.
    expected = training.epoch_batches(
        tf.range(ROWS, dtype=tf.int64), ROWS, BATCH, seed=5
    )
    batches = [b.numpy() for b in expected.take(EPOCHS * steps)]
    before = np.zeros(ROWS)
    for e, after in enumerate(per_epoch):
        want = np.zeros(ROWS)
        np.add.at(want, np.concatenate(batches[e * steps : (e + 1) * steps]), 1)
        np.testing.assert_array_equal(after - before, want)
        before = after
    assert not np.array_equal(per_epoch[0], per_epoch[1] - per_epoch[0])  # reshuffled


@pytest.mark.skipif(not KERAS_3, reason="Keras 3 traces the step; tf_keras differs")
def test_prebuilt_state_traces_the_step_once():
    traces = []
    model = _model()

    original = model.train_step

    def train_step(data):
        traces.append(1)
        return original(data)

    model.train_step = train_step
    model.compile(keras.optimizers.Adam(), "mse")
    rows = (tf.range(ROWS, dtype=tf.int64), tf.zeros([ROWS, 1]))
    feed = training.feed_epochs(rows, ROWS, BATCH, tf.distribute.get_strategy(), 4)
    training.build_training_state(model, tf.zeros([BATCH, 1]))
    model.fit(feed.dataset, epochs=1, callbacks=feed.callbacks, verbose=0)
    assert len(traces) == 1
