"""Custom training loops for tf.distribute clusters: parameter servers
(`ClusterCoordinator`) and multi-worker all-reduce where Keras' `fit` cannot.

`fit_multi_worker` trains under `MultiWorkerMirroredStrategy` with a
`tf.train.Checkpoint` backup per epoch: Keras 3.15's `fit` fails there with two
workers or more (its `_maybe_symbolic_build` calls `strategy.reduce` on the whole
nested first batch: "Attempt to convert a value ({...: PerReplica...}) with an
unsupported type (<class 'dict'>) to a Tensor"); tf_keras' `fit` trains.

The rest of this module is parameter-server training. Keras 3 has no
parameter-server support: its `fit` does not take a `ParameterServerStrategy`,
its variables hide a `ShardedVariable` behind `.value` (so
`GradientTape.gradient` on them fails: "'ShardedVariable' object has no
attribute 'handle'"), and its optimizers cannot create slots for one
("ShardedVariable doesn't support being used as a reference"). tf_keras' `fit`
documents support for it (through `DatasetCreator`; not tried here). So that one
loop runs under both generations, this module holds a custom training loop: the
coordinator schedules one training step per closure on whichever worker is free;
each step computes the gradients with respect to the variables' shards (on the
parameter servers) and applies `ShardedAdagrad`, an Adagrad written in TensorFlow
ops on those shards (Adagrad, as the usual optimizer of big embedding tables: its
sparse update touches only the rows a batch reads).

Keras 3's export cannot save a `ShardedVariable` either: export `local_copy(model)`,
a copy outside the strategy with the trained weights.

Every wait is bounded (`timeout`): a parameter server that dies makes the
coordinator raise; a worker that dies has its closures rescheduled on the others
(TensorFlow's fault tolerance), and if none is left the timeout ends the wait.

Example (in a coordinator process whose `TF_CONFIG` names a chief, workers and
parameter servers):

    strategy = keras_attn.distribute.get_strategy("parameter_server")
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = build_ctr_model(specs, tasks, shared_table=True)
    losses = fit_ctr_with_coordinator(model, specs, tasks, df, coordinator,
                                      steps=100)
    keras_attn.serving.export(local_copy(model), "saved_models/ctr")
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import pandas as pd

from keras_attn._validation import check_positive_int
from keras_attn.backend import keras, tf
from keras_attn.features.dataset import count_batches, to_dataset
from keras_attn.models.ctr import as_tasks, split_ctr_model

__all__ = [
    "ShardedAdagrad",
    "fit_ctr_with_coordinator",
    "fit_multi_worker",
    "fit_with_coordinator",
    "local_copy",
    "shard_variables",
    "wait_for_coordinator",
]


#: TensorFlow's class of a partitioned variable (not exported under `tf.distribute`).
ShardedVariable = tf.__internal__.distribute.ShardedVariable


def _tf_variable(variable):
    # Keras 3 variables hold the TensorFlow variable (maybe a ShardedVariable) in
    # `.value`; tf_keras variables are TensorFlow variables.
    if isinstance(variable, (tf.Variable, ShardedVariable)):
        return variable
    return variable.value


def shard_variables(variables) -> list:
    """The TensorFlow variables that hold `variables`' values: each shard of a
    `ShardedVariable` on its own, in order, under both Keras generations."""
    out = []
    for variable in variables:
        inner = _tf_variable(variable)
        out.extend(inner.variables if isinstance(inner, ShardedVariable) else [inner])
    return out


class ShardedAdagrad:
    """Adagrad on TensorFlow variables and shards, dense or sparse gradients.

    `accumulator += g**2; variable -= learning_rate * g / sqrt(accumulator + eps)`,
    the update of `keras.optimizers.Adagrad`. A sparse gradient (`IndexedSlices`,
    from a gather) first sums the rows of repeated ids, then updates only the rows
    it holds, so it equals the dense update. The accumulators are created beside
    their variables (on the same parameter server).

    Args:
        variables: the TensorFlow variables to train (see `shard_variables`); create
            the optimizer inside the strategy's scope.
        learning_rate: float. Defaults to 0.05.
        initial_accumulator_value: float. Defaults to 0.1.
        epsilon: float. Defaults to 1e-7.
    """

    def __init__(
        self,
        variables,
        learning_rate: float = 0.05,
        initial_accumulator_value: float = 0.1,
        epsilon: float = 1e-7,
    ):
        for name, value in (
            ("learning_rate", learning_rate),
            ("initial_accumulator_value", initial_accumulator_value),
            ("epsilon", epsilon),
        ):
            if not value > 0:
                raise ValueError(
                    f"`{name}` must be positive. Received: {name}={value!r}"
                )
        self.variables = list(variables)
        self.learning_rate = float(learning_rate)
        self.epsilon = float(epsilon)
        strategy = tf.distribute.get_strategy()
        self.accumulators = []
        for v in self.variables:
            with strategy.extended.colocate_vars_with(v):
                self.accumulators.append(
                    tf.Variable(
                        tf.fill(v.shape, tf.cast(initial_accumulator_value, v.dtype)),
                        trainable=False,
                        name=v.name.split(":")[0].replace("/", "_") + "_accumulator",
                    )
                )

    def apply(self, gradients) -> None:
        """Applies one gradient per variable (None leaves the variable alone)."""
        for g, v, acc in zip(gradients, self.variables, self.accumulators):
            if g is None:
                continue
            lr = tf.cast(self.learning_rate, v.dtype)
            if isinstance(g, tf.IndexedSlices):
                ids, position = tf.unique(g.indices)
                rows = tf.math.unsorted_segment_sum(
                    g.values, position, tf.shape(ids)[0]
                )
                acc.scatter_add(tf.IndexedSlices(tf.square(rows), ids))
                step = lr * rows * tf.math.rsqrt(tf.gather(acc, ids) + self.epsilon)
                v.scatter_sub(tf.IndexedSlices(step, ids))
            else:
                acc.assign_add(tf.square(g))
                v.assign_sub(lr * g * tf.math.rsqrt(acc + self.epsilon))


def local_copy(model):
    """A copy of `model` outside any strategy, holding its current weights.

    Export this copy of a parameter-server model: Keras 3's export cannot save a
    `ShardedVariable` ("'ShardedVariable' object has no attribute 'device'"); the
    copy's variables are whole, on the coordinator, and its predictions are the
    model's.

    Args:
        model: a functional Keras model (e.g. trained with
            `fit_ctr_with_coordinator`). Call this outside the strategy's scope.

    Returns:
        A new model of the same configuration with the same weights.
    """
    if tf.distribute.has_strategy():
        raise ValueError(
            "`local_copy` must be called outside a strategy's scope (the copy's "
            f"variables would be the strategy's). Received a call inside "
            f"{type(tf.distribute.get_strategy()).__name__}'s scope"
        )
    copy = keras.models.clone_model(model)
    copy.set_weights(_whole_weights(model))
    return copy


def _whole_weights(model) -> list:
    """`model.get_weights()` with each split variable joined again.

    tf_keras lists a `ShardedVariable`'s shards as separate weights (each one knows
    its container); Keras 3 lists the variable that holds it.
    """
    values, seen = [], set()
    for weight in model.weights:
        container = getattr(weight, "_sharded_container", None)
        if container is None:
            values.append(weight.numpy())
            continue
        sharded = container()
        if id(sharded) not in seen:
            seen.add(id(sharded))
            values.append(tf.convert_to_tensor(sharded).numpy())
    return values


def wait_for_coordinator(coordinator, timeout: float, poll: float = 0.05) -> None:
    """Waits until every scheduled closure is done, at most `timeout` seconds.

    Raises the first closure's error (e.g. a parameter server's `UnavailableError`),
    or `TimeoutError` when closures are still pending at the deadline (e.g. every
    worker is gone: the coordinator itself would wait for them forever).
    """
    deadline = time.monotonic() + timeout
    while not coordinator.done():  # raises a failed closure's error
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"The cluster did not finish its scheduled steps within {timeout} s "
                "(are its workers alive?)"
            )
        time.sleep(poll)


def fit_with_coordinator(
    model,
    loss_fn: Callable,
    dataset_fn: Callable,
    coordinator,
    steps: int,
    learning_rate: float = 0.05,
    timeout: float = 600,
    optimizer: ShardedAdagrad | None = None,
) -> list[float]:
    """Trains `model` for `steps` steps scheduled by a `ClusterCoordinator`.

    Args:
        model: a Keras model built inside the `ParameterServerStrategy`'s scope.
        loss_fn: `loss_fn(y_true, y_pred) -> scalar`, the per-replica batch loss
            (the model's `losses`, e.g. regularizers, are added).
        dataset_fn: a function of no argument returning the `tf.data.Dataset` of
            `(x, y)` batches each worker reads (it should repeat).
        coordinator: the `tf.distribute.coordinator.ClusterCoordinator`.
        steps: int. Training steps, in all.
        learning_rate: float. `ShardedAdagrad`'s learning rate. Defaults to 0.05.
        timeout: float. Seconds to wait for all the steps. Defaults to 600.
        optimizer: a `ShardedAdagrad` to reuse (continuing a training); by default
            a new one on the model's trainable variables.

    Returns:
        The loss of each step, in the order they were scheduled.
    """
    check_positive_int("steps", steps)
    strategy = coordinator.strategy
    variables = shard_variables(model.trainable_variables)
    if optimizer is None:
        with strategy.scope():
            optimizer = ShardedAdagrad(variables, learning_rate=learning_rate)

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            predictions = model(x, training=True)
            loss = loss_fn(y, predictions)
            if model.losses:
                loss += tf.add_n([tf.cast(x, loss.dtype) for x in model.losses])
        optimizer.apply(tape.gradient(loss, variables))
        return loss

    @tf.function
    def train_step(iterator):
        x, y = next(iterator)
        return strategy.run(replica_step, args=(x, y))

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    results = [coordinator.schedule(train_step, args=(iterator,)) for _ in range(steps)]
    wait_for_coordinator(coordinator, timeout)
    return [float(r.fetch()) for r in results]


def fit_ctr_with_coordinator(
    model,
    features,
    tasks: Sequence,
    data,
    coordinator,
    steps: int,
    batch_size: int = 512,
    learning_rate: float = 0.05,
    seed: int | None = None,
    timeout: float = 600,
) -> list[float]:
    """Trains a `CTRModel` on a parameter-server cluster.

    The DataFrame is encoded once in the coordinator by the model's preprocessing
    (`split_ctr_model`); each worker reads shuffled, repeated batches of the encoded
    rows, and the core (which shares the model's weights) trains with
    `fit_with_coordinator`. Afterwards `model` takes raw values and can be
    exported from the coordinator (`keras_attn.serving.export`).

    Args:
        model: a `CTRModel` (from `build_ctr_model`), built inside the strategy's
            scope.
        features: its feature specs.
        tasks: its tasks (`Task`s or names); the loss is the sum of each task's
            loss times its `loss_weight`.
        data: a DataFrame with the feature and label columns.
        coordinator: the `ClusterCoordinator`.
        steps: int. Training steps in all (over all workers).
        batch_size: int. Rows per step. Defaults to 512.
        learning_rate: float. Defaults to 0.05.
        seed: int. Shuffle seed of every worker's stream.
        timeout: float. Seconds to wait for all the steps. Defaults to 600.

    Returns:
        The loss of each step.
    """
    tasks = as_tasks(tasks)
    if not isinstance(data, pd.DataFrame):
        # A CSV path's len() would be the length of its name.
        raise ValueError(
            "`data` must be a DataFrame (encoded once in the coordinator). "
            f"Received: data of type {type(data).__name__}"
        )
    count_batches(data, batch_size)
    preprocessor, core = split_ctr_model(model)
    # One batch of every row: the encoded columns, as tensors in the coordinator.
    encoded = to_dataset(
        data, features, tasks, batch_size=len(data), preprocessor=preprocessor
    ).get_single_element()
    encoded = tf.nest.map_structure(lambda t: t.numpy(), encoded)
    n = len(data)

    def dataset_fn():
        ds = tf.data.Dataset.from_tensor_slices(encoded)
        return ds.shuffle(n, seed=seed).repeat().batch(batch_size, drop_remainder=True)

    losses = {t.name: (keras.losses.get(t.loss), t.loss_weight) for t in tasks}

    def loss_fn(y_true, y_pred):
        return tf.add_n(
            [
                weight * tf.reduce_mean(fn(y_true[name], y_pred[name]))
                for name, (fn, weight) in losses.items()
            ]
        )

    return fit_with_coordinator(
        core,
        loss_fn,
        dataset_fn,
        coordinator,
        steps,
        learning_rate=learning_rate,
        timeout=timeout,
    )


def fit_multi_worker(
    model,
    loss_fn: Callable,
    dataset_fn: Callable,
    strategy,
    epochs: int,
    steps_per_epoch: int,
    global_batch_size: int,
    optimizer,
    backup_dir=None,
) -> list[float]:
    """Trains `model` under a multi-worker (or any all-reduce) strategy, resumably.

    Each epoch reads `dataset_fn(epoch, batch_size, input_context)` in every input
    pipeline (at the per-replica batch size; its batches are then split between the
    pipelines), runs `steps_per_epoch` steps and, with `backup_dir`, saves the model,
    the optimizer and the epoch count: the chief in `backup_dir`, the other workers
    beside it (`<backup_dir>.worker_<id>`, removed at the end), as tf_keras'
    `BackupAndRestore` does. A job started again with the same arguments (all its
    workers: an all-reduce job cannot go on without one) restores the chief's last
    save and goes on with the next epoch; with the same data order per epoch it
    ends with the weights of an uninterrupted run. The backups are removed when
    training ends.

    Args:
        model: a Keras model built inside `strategy.scope()`.
        loss_fn: `loss_fn(y_true, y_pred) -> (batch,)`, the loss of each example
            (averaged over the global batch here; the model's `losses` are added,
            divided by the replicas).
        dataset_fn: `(epoch, batch_size, input_context) -> tf.data.Dataset` of
            `(x, y)` batches; give each epoch its own, reproducible order.
        strategy: the `tf.distribute.Strategy` the model was built under.
        epochs: int. Epochs in all (a resumed job runs the ones left).
        steps_per_epoch: int. Global steps per epoch.
        global_batch_size: int. Examples per step over all replicas.
        optimizer: a Keras optimizer, made inside `strategy.scope()`.
        backup_dir: str. Folder shared by the workers for the backups; None: none.

    Returns:
        The mean loss of each epoch this call ran.
    """
    import shutil

    for name, value in (
        ("epochs", epochs),
        ("steps_per_epoch", steps_per_epoch),
        ("global_batch_size", global_batch_size),
    ):
        check_positive_int(name, value)
    with strategy.scope():
        optimizer.build(model.trainable_variables)  # slots exist before a restore
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
    manager = None
    if backup_dir is not None:
        backup_dir = str(backup_dir)
        chief = getattr(strategy.extended, "should_checkpoint", True)
        resolver = getattr(strategy, "cluster_resolver", None)
        task = getattr(resolver, "task_id", None)
        write_dir = backup_dir if chief else f"{backup_dir}.worker_{task}"
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch)
        latest = tf.train.latest_checkpoint(backup_dir)
        if latest is not None:
            # `restore`, not `read`: it makes the save counter now, so the counter
            # is restored now too. With `read` it was restored at the first save,
            # from a file the chief's save of that epoch may have removed
            # (max_to_keep=1): a worker started again failed with NotFound.
            checkpoint.restore(latest).expect_partial()
        manager = tf.train.CheckpointManager(checkpoint, write_dir, max_to_keep=1)

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            predictions = model(x, training=True)
            loss = tf.nn.compute_average_loss(
                loss_fn(y, predictions), global_batch_size=global_batch_size
            )
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        variables = model.trainable_variables
        # The optimizer sums the gradients of all replicas.
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    @tf.function
    def train_step(iterator):
        x, y = next(iterator)
        losses = strategy.run(replica_step, args=(x, y))
        return strategy.reduce("SUM", losses, axis=None)

    history = []
    while int(epoch.numpy()) < epochs:
        current = int(epoch.numpy())

        def make(context, current=current):
            size = context.get_per_replica_batch_size(global_batch_size)
            ds = dataset_fn(current, size, context)
            return ds.shard(context.num_input_pipelines, context.input_pipeline_id)

        iterator = iter(strategy.distribute_datasets_from_function(make))
        total = 0.0
        for _ in range(steps_per_epoch):
            total += float(train_step(iterator))
        history.append(total / steps_per_epoch)
        epoch.assign_add(1)
        if manager is not None:
            manager.save()  # every worker saves (the chief's copy is the one read)
    if manager is not None:
        shutil.rmtree(manager.directory, ignore_errors=True)
    return history
