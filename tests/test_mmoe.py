"""MMoE and PLE: both gate kinds, custom experts, golden values, gate weights."""

import math

import numpy as np
import pytest

from keras_attn.backend import keras
from keras_attn.layers import PLE, MMoE
from tests.harness import run_layer_test

pytestmark = pytest.mark.generation_neutral

TASKS = ["income", "marital"]


def _x(batch=8, dim=6, seed=0):
    return np.random.default_rng(seed).normal(size=(batch, dim)).astype("float32")


def _softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def _np(v):
    return np.asarray(v)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_harness_softmax_gate_with_gate_weights():
    run_layer_test(
        MMoE,
        {"tasks": TASKS, "num_experts": 3, "expert_units": (8, 4)},
        {"inputs": _x()},
        expected_output_shape=(
            {"income": (8, 4), "marital": (8, 4)},
            {"income": (8, 3), "marital": (8, 3)},
        ),
        expected_num_trainable_weights=6,
        call_kwargs={"return_gate_weights": True},
    )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_harness_attention_gate():
    run_layer_test(
        MMoE,
        {
            "tasks": TASKS,
            "num_experts": 4,
            "expert_units": (8,),
            "gate": "attention",
            "gate_score": "general",
            "dropout": 0.1,
        },
        {"inputs": _x()},
        expected_output_shape={"income": (8, 8), "marital": (8, 8)},
        # expert kernel + bias, context, key projection, the bilinear score's kernel
        expected_num_trainable_weights=5,
    )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_harness_custom_expert_layer():
    run_layer_test(
        MMoE,
        {
            "tasks": ["ctr"],
            "num_experts": 2,
            "expert": keras.layers.Dense(5, activation="tanh"),
            "gate": "attention",
        },
        {"inputs": _x()},
        expected_output_shape={"ctr": (8, 5)},
        expected_num_trainable_weights=2 * 2 + 2,
    )


def test_golden_softmax_gate():
    layer = MMoE(TASKS, num_experts=3, expert_units=(5, 4))
    x = _x(batch=4)
    outputs, gates = layer(x, return_gate_weights=True)
    # Ma et al.: f_k(x) = sum_i softmax(W_gk x)_i f_i(x), experts relu MLPs.
    h = x[:, None, :]
    for kernel, bias in layer.expert_layers:
        h = np.maximum(np.einsum("bed,edu->beu", h, _np(kernel)) + _np(bias), 0)
    for t, task in enumerate(TASKS):
        g = _softmax(x @ _np(layer.gate_kernels[t]))
        np.testing.assert_allclose(_np(gates[task]), g, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            _np(outputs[task]), np.einsum("be,beu->bu", g, h), rtol=1e-5, atol=1e-6
        )
    # The two tasks' gates are different functions of x.
    assert not np.allclose(_np(gates["income"]), _np(gates["marital"]))


def test_golden_attention_gate_scaled_dot():
    layer = MMoE(
        TASKS,
        num_experts=3,
        expert_units=(4,),
        gate="attention",
        gate_score="scaled_dot",
    )
    x = _x(batch=4)
    outputs, gates = layer(x, return_gate_weights=True)
    kernel, bias = layer.expert_layers[0]
    h = np.maximum(np.einsum("bd,edu->beu", x, _np(kernel)) + _np(bias), 0)
    keys = h @ _np(layer.gate_key_kernel)  # (batch, experts, att)
    context = _np(layer.gate_context)  # (tasks, att)
    for t, task in enumerate(TASKS):
        # Query: the task's context vector; keys: projected experts; values: experts.
        scores = np.einsum("a,bea->be", context[t], keys) / math.sqrt(keys.shape[-1])
        g = _softmax(scores)
        np.testing.assert_allclose(_np(gates[task]), g, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            _np(outputs[task]), np.einsum("be,beu->bu", g, h), rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize("score", ["dot", "scaled_dot", "general"])
def test_golden_attention_gate_linear_scores(score):
    # These scores run folded (contexts through the key projection); the golden
    # forms the keys and scores them as the paper's attention does.
    layer = MMoE(
        TASKS, num_experts=3, expert_units=(6, 4), gate="attention", gate_score=score
    )
    x = _x(batch=5, seed=1)
    outputs, gates = layer(x, return_gate_weights=True)
    h = x[:, None, :]
    for kernel, bias in layer.expert_layers:
        h = np.maximum(np.einsum("bed,edu->beu", h, _np(kernel)) + _np(bias), 0)
    keys = h @ _np(layer.gate_key_kernel)  # (batch, experts, att)
    for t, task in enumerate(TASKS):
        query = _np(layer.gate_context)[t]
        if score == "general":
            query = query @ _np(layer.gate_scorer.kernel)
        scores = np.einsum("a,bea->be", query, keys)
        if score == "scaled_dot":
            scores /= math.sqrt(keys.shape[-1])
        g = _softmax(scores)
        np.testing.assert_allclose(_np(gates[task]), g, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            _np(outputs[task]), np.einsum("be,beu->bu", g, h), rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize(
    "dim, experts, units",
    [(6, 3, 5), (512, 2, 520)],  # first-layer kernel below / above the fusing bound
)
def test_experts_fused_or_separate_match_per_expert_formula(dim, experts, units):
    from keras_attn.layers.mmoe import _FUSED_FIRST_LAYER

    assert (dim * experts * units <= _FUSED_FIRST_LAYER) == (dim == 6)
    layer = MMoE(["a"], num_experts=experts, expert_units=(units, 3))
    x = _x(batch=4, dim=dim, seed=2)
    outputs, gates = layer(x, return_gate_weights=True)
    (k0, b0), (k1, b1) = [(_np(k), _np(b)) for k, b in layer.expert_layers]
    per_expert = np.stack(
        [
            np.maximum(np.maximum(x @ k0[i] + b0[i], 0) @ k1[i] + b1[i], 0)
            for i in range(experts)
        ],
        axis=1,
    )  # (batch, experts, 3)
    np.testing.assert_allclose(
        _np(outputs["a"]),
        np.einsum("be,beu->bu", _np(gates["a"]), per_expert),
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.parametrize("score", ["dot", "general", "additive", "cosine", "location"])
def test_attention_gate_accepts_every_score(score):
    layer = MMoE(
        TASKS, num_experts=3, expert_units=(4,), gate="attention", gate_score=score
    )
    _, gates = layer(_x(), return_gate_weights=True)
    np.testing.assert_allclose(_np(gates["marital"]).sum(-1), 1.0, rtol=1e-5)


def test_experts_start_different():
    layer = MMoE(["a"], num_experts=3, expert_units=(4,))
    layer(_x())
    kernel = _np(layer.expert_layers[0][0])
    assert not np.allclose(kernel[0], kernel[1])
    custom = MMoE(["a"], num_experts=2, expert=keras.layers.Dense(3))
    custom(_x())
    names = [e.name for e in custom.experts]
    assert names == ["expert_0", "expert_1"]
    assert not np.allclose(_np(custom.experts[0].kernel), _np(custom.experts[1].kernel))


@pytest.mark.generation_specific
def test_custom_expert_config_round_trip():
    layer = MMoE(["a", "b"], num_experts=2, expert=keras.layers.Dense(3, name="e"))
    config = layer.get_config()
    assert config["expert"]["config"]["units"] == 3
    revived = MMoE.from_config(config)
    assert revived.get_config() == config
    assert revived(_x())["b"].shape == (8, 3)


def _ple_np(layer, x):
    """PLE from Tang et al.: per level, task experts + shared experts, task gates over
    [own, shared], a shared gate over all (not on the last level)."""
    tasks, m_t = len(layer.tasks), layer.num_task_experts
    assert layer.gate_score in ("dot", "scaled_dot")  # the forms written out below
    att = layer.gate_units or layer.expert_units[-1]  # the keys' size
    scale = 1 / math.sqrt(att) if layer.gate_score == "scaled_dot" else 1.0
    task_in = [x] * tasks
    shared_in = x
    first = None
    for level, weights in enumerate(layer.levels):
        last = level == layer.num_levels - 1

        def mlp(h, params, index):
            for kernel, bias in params:
                k, b = _np(kernel)[index], _np(bias)[index]
                h = np.maximum(h @ k + b, 0)
            return h

        own = [
            [mlp(task_in[t], weights["task"], (t, i)) for i in range(m_t)]
            for t in range(tasks)
        ]
        shared = [
            mlp(shared_in, weights["shared"], i)
            for i in range(layer.num_shared_experts)
        ]
        new_task = []
        for t in range(tasks):
            cands = np.stack(own[t] + shared, axis=1)  # (batch, n, units)
            if layer.gate == "softmax":
                g = _softmax(task_in[t] @ _np(weights["task_gate"])[t])
            else:
                keys = cands @ _np(weights["key_kernel"])
                c = _np(weights["task_context"])[t]
                g = _softmax(keys @ c * scale)
            new_task.append(np.einsum("be,beu->bu", g, cands))
            first = g if t == 0 else first
        if not last:
            cands = np.stack([e for row in own for e in row] + shared, axis=1)
            if layer.gate == "softmax":
                g = _softmax(shared_in @ _np(weights["shared_gate"]))
            else:
                keys = cands @ _np(weights["key_kernel"])
                c = _np(weights["shared_context"])[0]
                g = _softmax(keys @ c * scale)
            shared_in = np.einsum("be,beu->bu", g, cands)
        task_in = new_task
    return task_in, first


@pytest.mark.parametrize(
    "gate, score",
    [("softmax", "dot"), ("attention", "dot"), ("attention", "scaled_dot")],
)
def test_golden_ple(gate, score):
    layer = PLE(
        ["a", "b", "c"],
        num_shared_experts=2,
        num_task_experts=1,
        num_levels=2,
        expert_units=(5, 4),
        gate=gate,
        gate_score=score,
    )
    x = _x(batch=4)
    outputs, gates = layer(x, return_gate_weights=True)
    expected, first_gate = _ple_np(layer, x)
    for t, task in enumerate(["a", "b", "c"]):
        np.testing.assert_allclose(
            _np(outputs[task]), expected[t], rtol=1e-4, atol=1e-5
        )
    np.testing.assert_allclose(_np(gates["a"]), first_gate, rtol=1e-4, atol=1e-6)
    assert gates["b"].shape == (4, 3)


@pytest.mark.generation_specific
@pytest.mark.slow
@pytest.mark.parametrize("gate", ["softmax", "attention"])
def test_harness_ple(gate):
    levels = 2
    per_level = 2 * 2 + 2 * 2  # task and shared experts: kernel + bias per depth
    if gate == "softmax":
        expected = per_level * levels + 2 + 1  # task gates per level, shared gate once
    else:
        expected = per_level * levels + 2 * levels + 1  # key, task context; shared
    run_layer_test(
        PLE,
        {"tasks": TASKS, "expert_units": (6, 4), "num_levels": levels, "gate": gate},
        {"inputs": _x()},
        expected_output_shape=(
            {"income": (8, 4), "marital": (8, 4)},
            {"income": (8, 4), "marital": (8, 4)},
        ),
        expected_num_trainable_weights=expected,
        call_kwargs={"return_gate_weights": True},
    )


def test_cgc_is_one_level():
    layer = PLE(TASKS, num_levels=1, expert_units=(4,))
    outputs = layer(_x())
    assert sorted(outputs) == sorted(TASKS)
    assert not any("shared_gate" in w.name for w in layer.weights)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tasks": [], "num_experts": 2}, "tasks=\\[\\]"),
        ({"tasks": ["a", "a"], "num_experts": 2}, "distinct"),
        ({"tasks": "a", "num_experts": 2}, "tasks='a'"),
        ({"tasks": ["a"], "num_experts": 0}, "num_experts=0"),
        ({"tasks": ["a"], "num_experts": 2, "gate": "topk"}, "gate='topk'"),
        ({"tasks": ["a"], "num_experts": 2, "gate_score": "x"}, "gate_score='x'"),
        ({"tasks": ["a"], "num_experts": 2, "expert_units": []}, "expert_units"),
        ({"tasks": ["a"], "num_experts": 2, "expert": "dense"}, "expert='dense'"),
        ({"tasks": ["a"], "num_experts": 2, "dropout": 1.5}, "dropout=1.5"),
        (
            {"tasks": ["a"], "num_experts": 2, "expert_activation": "nope"},
            "`expert_activation` must be a Keras activation.*expert_activation='nope'",
        ),
    ],
)
def test_mmoe_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MMoE(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_levels": 0}, "num_levels=0"),
        ({"num_task_experts": -1}, "num_task_experts=-1"),
        ({"num_shared_experts": 0}, "num_shared_experts=0"),
        ({"gate": "max"}, "gate='max'"),
    ],
)
def test_ple_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PLE(TASKS, **kwargs)


def test_input_rank_error():
    with pytest.raises(ValueError, match=r"inputs.shape=\(2, 3, 4\)"):
        MMoE(TASKS, num_experts=2)(np.ones((2, 3, 4), "float32"))
