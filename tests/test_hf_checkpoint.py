"""BertBackbone / BertClassifier `from_pretrained` and `save_pretrained` on tiny
Hugging Face folders (bert, distilbert, albert) written by the tests, against the
architectures' forward pass written out in NumPy (tests/hf_folders.py)."""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from keras_attn.models import BertBackbone, BertClassifier, BertPreprocessor
from tests import hf_folders
from tests.hf_folders import POSITIONS, V

TYPES = ("bert", "distilbert", "albert")
IDS = np.array([[2, 7, 9, 11, 3, 0, 0, 0], [2, 5, 3, 8, 8, 12, 3, 0]], "int32")
SEGMENTS = np.array([[0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1, 1, 0]], "int32")
REAL = IDS != 0


def _inputs():
    return {"token_ids": IDS, "segment_ids": SEGMENTS}


@pytest.mark.parametrize("model_type", TYPES)
def test_backbone_gives_the_architectures_outputs(model_type, tmp_path):
    w = hf_folders.write_folder(tmp_path, model_type)
    backbone = BertBackbone.from_pretrained(tmp_path, sequence_length=8)
    assert backbone.position_embedding.sequence_length == POSITIONS
    assert backbone.token_embedding.input_dim == V
    out = backbone(_inputs(), training=False)
    expected = hf_folders.forward(w, model_type, IDS, SEGMENTS)
    np.testing.assert_allclose(
        out["sequence_output"].numpy()[REAL],
        expected["sequence_output"][REAL],
        atol=2e-5,
    )
    if model_type != "distilbert":
        np.testing.assert_allclose(
            out["pooled_output"], expected["pooled_output"], atol=2e-5
        )


def test_config_sets_activation_epsilon_and_sharing(tmp_path):
    hf_folders.write_folder(
        tmp_path / "b",
        "bert",
        config_changes={"hidden_act": "gelu_new", "layer_norm_eps": 1e-7},
    )
    bert = BertBackbone.from_pretrained(tmp_path / "b")
    assert bert.activation == "gelu_approximate"
    assert bert.transformer_layers[0].layer_norm_epsilon == pytest.approx(1e-7)
    assert bert.sequence_length == POSITIONS  # default: the position count
    hf_folders.write_folder(tmp_path / "a", "albert")
    albert = BertBackbone.from_pretrained(tmp_path / "a", sequence_length=8)
    assert albert.share_layers and len(albert.transformer_layers) == 1
    assert albert.num_layers == 3 and albert.embedding_dim == hf_folders.EMBED
    hf_folders.write_folder(tmp_path / "d", "distilbert")
    distil = BertBackbone.from_pretrained(tmp_path / "d", sequence_length=8)
    assert distil.segment_embedding is None and distil.pooler_activation == "relu"


@pytest.mark.parametrize("model_type", TYPES)
def test_classifier_loads_the_folders_head(model_type, tmp_path):
    w = hf_folders.write_folder(tmp_path, model_type, num_labels=3)
    model = BertClassifier.from_pretrained(tmp_path, sequence_length=8)
    assert model.num_classes == 3
    assert model.class_names == ["class_0", "class_1", "class_2"]
    expected = hf_folders.forward(w, model_type, IDS, SEGMENTS)
    out = model(_inputs(), training=False)
    np.testing.assert_allclose(
        out["probabilities"], expected["probabilities"], atol=2e-5
    )
    assert out["label"].numpy().tolist() == [
        f"class_{i}".encode() for i in expected["probabilities"].argmax(-1)
    ]


def test_classifier_makes_a_new_head_without_one(tmp_path):
    w = hf_folders.write_folder(tmp_path, "bert")
    model = BertClassifier.from_pretrained(tmp_path, num_classes=4, sequence_length=8)
    assert model.num_classes == 4
    np.testing.assert_array_equal(
        model.backbone.token_embedding.embeddings.numpy(),
        w["embeddings.word_embeddings.weight"],
    )
    with pytest.raises(ValueError, match="num_classes.*no classifier head"):
        BertClassifier.from_pretrained(tmp_path)


def test_classifier_num_classes_must_match_the_head(tmp_path):
    hf_folders.write_folder(tmp_path, "bert", num_labels=3)
    with pytest.raises(ValueError, match="must be the 3 labels"):
        BertClassifier.from_pretrained(tmp_path, num_classes=5)


@pytest.mark.parametrize("model_type", TYPES)
def test_save_pretrained_round_trip(model_type, tmp_path):
    hf_folders.write_folder(tmp_path / "in", model_type, num_labels=2)
    model = BertClassifier.from_pretrained(tmp_path / "in", sequence_length=8)
    preprocessor = BertPreprocessor.from_pretrained(tmp_path / "in", 8)
    model.save_pretrained(tmp_path / "out", preprocessor=preprocessor)
    written = load_file(str(tmp_path / "out" / "model.safetensors"))
    original = load_file(str(tmp_path / "in" / "model.safetensors"))
    assert sorted(written) == sorted(original)
    for name, value in original.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["model_type"] == model_type
    assert config["id2label"] == {"0": "class_0", "1": "class_1"}
    again = BertClassifier.from_pretrained(tmp_path / "out", sequence_length=8)
    np.testing.assert_allclose(
        again(_inputs())["probabilities"], model(_inputs())["probabilities"], atol=1e-6
    )
    assert (tmp_path / "out" / "vocab.txt").read_text() == (
        tmp_path / "in" / "vocab.txt"
    ).read_text()
    assert not list((tmp_path / "out").glob(".*partial"))


def test_backbone_save_pretrained_writes_a_bare_model(tmp_path):
    w = hf_folders.write_folder(tmp_path / "in", "bert")
    BertBackbone.from_pretrained(tmp_path / "in").save_pretrained(tmp_path / "out")
    written = load_file(str(tmp_path / "out" / "model.safetensors"))
    assert sorted(written) == sorted(w)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["architectures"] == ["BertModel"]
    assert config["hidden_act"] == "gelu" and config["max_position_embeddings"] == 12


def test_sharded_checkpoint_and_legacy_layer_norm_names(tmp_path):
    w = hf_folders.weights("bert")
    # Older files call LayerNorm's weights gamma and beta.
    renamed = {
        n.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta"
        ): v
        for n, v in w.items()
    }
    names = sorted(renamed)
    shards = {
        "model-00001-of-00002.safetensors": names[::2],
        "model-00002-of-00002.safetensors": names[1::2],
    }
    for file, part in shards.items():
        save_file({n: renamed[n] for n in part}, str(tmp_path / file))
    index = {"weight_map": {n: f for f, part in shards.items() for n in part}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "config.json").write_text(json.dumps(hf_folders.config("bert")))
    backbone = BertBackbone.from_pretrained(tmp_path, sequence_length=8)
    expected = hf_folders.forward(w, "bert", IDS, SEGMENTS)
    np.testing.assert_allclose(
        backbone(_inputs())["pooled_output"], expected["pooled_output"], atol=2e-5
    )


def _rewrite(path, change):
    tensors = load_file(str(path / "model.safetensors"))
    change(tensors)
    save_file(tensors, str(path / "model.safetensors"))


def test_errors_name_the_file_and_the_weight(tmp_path):
    hf_folders.write_folder(tmp_path, "bert")
    weights = tmp_path / "model.safetensors"
    name = "encoder.layer.1.attention.self.key.weight"

    _rewrite(tmp_path, lambda t: t.pop(name))
    with pytest.raises(ValueError, match=f"{weights}.*lacks the weight '{name}'"):
        BertBackbone.from_pretrained(tmp_path)

    hf_folders.write_folder(tmp_path, "bert")
    _rewrite(tmp_path, lambda t: t.update({name: np.zeros((8, 4), "float32")}))
    with pytest.raises(ValueError, match=rf"'{name}' has shape \(8, 4\).*\(8, 8\)"):
        BertBackbone.from_pretrained(tmp_path)

    hf_folders.write_folder(tmp_path, "bert")
    _rewrite(
        tmp_path, lambda t: t.update({"encoder.layer.9.output.dense.weight": t[name]})
    )
    with pytest.raises(
        ValueError, match=f"{weights} holds the weight 'encoder.layer.9"
    ):
        BertBackbone.from_pretrained(tmp_path)

    # Heads of other tasks and the position_ids buffer are known, not errors.
    hf_folders.write_folder(tmp_path, "bert")
    _rewrite(
        tmp_path,
        lambda t: t.update(
            {
                "cls.predictions.bias": np.zeros(V, "float32"),
                "embeddings.position_ids": np.arange(12)[None],
            }
        ),
    )
    BertBackbone.from_pretrained(tmp_path, sequence_length=8)


def test_config_errors_name_the_file_and_the_key(tmp_path):
    config_file = tmp_path / "config.json"
    hf_folders.write_folder(tmp_path, "bert", config_changes={"model_type": "roberta"})
    with pytest.raises(ValueError, match=f"{config_file}: `model_type` must be one of"):
        BertBackbone.from_pretrained(tmp_path)
    hf_folders.write_folder(tmp_path, "bert", config_changes={"hidden_act": "swish"})
    with pytest.raises(ValueError, match="`hidden_act` must be one of.*'swish'"):
        BertBackbone.from_pretrained(tmp_path)
    hf_folders.write_folder(tmp_path, "albert", config_changes={"num_hidden_groups": 2})
    with pytest.raises(ValueError, match="`num_hidden_groups` must be 1"):
        BertBackbone.from_pretrained(tmp_path)
    hf_folders.write_folder(tmp_path, "bert", config_changes={"vocab_size": 38})
    with pytest.raises(
        ValueError, match=r"word_embeddings.weight' has shape \(40, 8\)"
    ):
        BertBackbone.from_pretrained(tmp_path)
    hf_folders.write_folder(tmp_path, "bert")
    (tmp_path / "vocab.txt").write_text("".join(f"t{i}\n" for i in range(V + 1)))
    with pytest.raises(ValueError, match=f"vocab.txt has {V + 1} tokens, more than"):
        BertBackbone.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="at most the checkpoint's 12 positions"):
        hf_folders.write_folder(tmp_path, "bert")
        BertBackbone.from_pretrained(tmp_path, sequence_length=13)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="holds neither model.safetensors"):
        BertBackbone.from_pretrained(tmp_path)


def test_a_failed_load_leaves_no_weight_changed(tmp_path):
    hf_folders.write_folder(tmp_path, "bert")
    backbone = BertBackbone.from_pretrained(tmp_path, sequence_length=8)
    before = [w.numpy().copy() for w in backbone.weights]
    _rewrite(tmp_path, lambda t: t.pop("pooler.dense.bias"))
    from keras_attn.models.hf_checkpoint import HFCheckpoint

    with pytest.raises(ValueError, match="pooler.dense.bias"):
        HFCheckpoint(tmp_path).load_backbone(backbone)
    for old, new in zip(before, backbone.weights):
        np.testing.assert_array_equal(old, new.numpy())


def test_architecture_settings_are_checked():
    with pytest.raises(ValueError, match="`factorize` must be one of"):
        BertBackbone(10, 4, hidden_dim=4, num_heads=1, factorize="some")
    with pytest.raises(ValueError, match="needs `embedding_dim`"):
        BertBackbone(10, 4, hidden_dim=4, num_heads=1, factorize="all")
    with pytest.raises(
        ValueError, match="`max_sequence_length` must be an integer >= 8"
    ):
        BertBackbone(10, 8, hidden_dim=4, num_heads=1, max_sequence_length=4)
    with pytest.raises(ValueError, match="`pooler_activation` must be one of"):
        BertBackbone(10, 4, hidden_dim=4, num_heads=1, pooler_activation="gelu")
    plain = BertBackbone(10, 4, hidden_dim=4, num_heads=1, share_layers=True)
    with pytest.raises(ValueError, match="shared layers exist there only in ALBERT"):
        plain.save_pretrained("unused")


def test_new_settings_survive_the_config_round_trip():
    backbone = BertBackbone(
        20,
        6,
        hidden_dim=8,
        num_layers=2,
        num_heads=2,
        embedding_dim=4,
        share_layers=True,
        factorize="all",
        max_sequence_length=10,
        type_vocabulary_size=0,
        pooler_activation="relu",
    )
    again = BertBackbone.from_config(backbone.get_config())
    assert again.get_config() == backbone.get_config()
    assert again.position_embedding.sequence_length == 10
    assert again.embeddings_projection is not None and again.segment_embedding is None
    assert len(again.weights) == len(backbone.weights)
