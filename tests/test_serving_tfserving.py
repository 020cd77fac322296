"""Serving as TF Serving users work: warm-up records, REST/gRPC requests, explain
signatures, bad requests, `keras-attn predict` and `keras-attn inspect`.

One CTR export (MMoE + an AutoInt layer) and two text exports (HAN, `[CLS]`
Transformer) are written once per module; one TensorFlow-only subprocess replays
their warm-up files, decodes the REST bodies the way TF Serving's REST API defines
them, runs the gRPC requests and the bad requests, and reports back.
"""

import base64
import io
import json

import numpy as np
import pandas as pd
import pytest

from keras_attn.backend import tf
from keras_attn.cli import main
from keras_attn.datasets import census_features, census_tasks, load_census_sample
from keras_attn.models import build_ctr_model, gate_weights_model
from keras_attn.models.text import (
    build_han_classifier,
    build_text_serving_model,
    build_transformer_classifier,
    han_attention_model,
    wide_layer,
)
from keras_attn.serving import (
    export,
    export_text_classifier,
    grpc_request,
    parse_rest_response,
    read_warmup,
    rest_request,
    signature_dtypes,
    to_arrays,
)
from keras_attn.text import (
    HashedNgrams,
    SentenceTokenizer,
    Tokenizer,
    build_vocabulary,
)
from tests.harness import run_isolated

# The module fixture makes three exports (explain signatures, warm-up records) and
# serves them: more than the 300 s default on a slow day under tf_keras.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# The TensorFlow-only side: TensorFlow, tensorflow-text (the text exports' ops) and
# the tensorflow-serving-api protos; neither Keras nor keras_attn.
_SERVER = r"""
import base64, json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2
def _keras():
    return {m for m in sys.modules if m.split(".")[0] in ("keras", "tf_keras")}
baseline = _keras()
plan = json.load(open(sys.argv[1], encoding="utf-8"))

def plain(outputs):
    out = {}
    for k, v in outputs.items():
        v = v.numpy()
        out[k] = [b.decode() for b in v.ravel()] if v.dtype == object else v.tolist()
    return out

def call(fn, feeds):
    try:
        return {"outputs": plain(fn(**feeds))}
    except Exception as e:  # what a server would answer, by kind and message
        return {"error": type(e).__name__, "message": str(e)}

def input_dtypes(fn):
    return {k: v.dtype for k, v in fn.structured_input_signature[1].items()}

# TF Serving's REST API: a JSON string is a DT_STRING element ({"b64": ...} for
# bytes), a number is converted to the input's dtype (NaN/Infinity tokens allowed).
def rest_value(v):
    if isinstance(v, dict) and set(v) == {"b64"}:
        return base64.b64decode(v["b64"])
    return v

def rest_tensors(body, dtypes):
    if "instances" in body:  # row form: one object per instance, stacked per input
        rows = body["instances"]
        cols = {n: [rest_value(r[n]) for r in rows] for n in rows[0]}
    else:  # columnar form: input name -> its (batch-first) list
        cols = {n: [rest_value(x) for x in v] for n, v in body["inputs"].items()}
    return {n: tf.constant(v, dtype=dtypes[n]) for n, v in cols.items()}

def rest_answer(body, outputs):  # TF Serving's answer to that body
    if "instances" in body:
        n = len(next(iter(outputs.values())))
        rows = [{k: v[i] for k, v in outputs.items()} for i in range(n)]
        return {"predictions": rows}
    return {"outputs": outputs}

report = {}
for key, job in plan.items():
    loaded = tf.saved_model.load(job["export"])
    out = report[key] = {"signatures": sorted(loaded.signatures)}
    out["warmup"] = []
    path = job["export"] + "/assets.extra/tf_serving_warmup_requests"
    for record in tf.data.TFRecordDataset(path) if job["warmup"] else []:
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        request = log.predict_log.request
        fn = loaded.signatures[request.model_spec.signature_name]
        feeds = {k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()}
        out["warmup"].append(
            {"signature": request.model_spec.signature_name,
             "model": request.model_spec.name, **call(fn, feeds)}
        )
    out["rest"] = []
    for body in job["rest"]:
        fn = loaded.signatures[body.get("signature_name", "serving_default")]
        result = call(fn, rest_tensors(body, input_dtypes(fn)))
        if "outputs" in result:
            result["answer"] = json.dumps(rest_answer(body, result["outputs"]))
        out["rest"].append(result)
    out["grpc"] = []
    for blob in job["grpc"]:
        request = predict_pb2.PredictRequest.FromString(base64.b64decode(blob))
        fn = loaded.signatures[request.model_spec.signature_name]
        feeds = {k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()}
        out["grpc"].append(call(fn, feeds))
    out["bad"] = {}
    for name, case in job["bad"].items():
        fn = loaded.signatures[case.get("signature", "serving_default")]
        feeds = {k: tf.constant(v["values"], dtype=v["dtype"])
                 for k, v in case["inputs"].items()}
        out["bad"][name] = call(fn, feeds)
ours = [m for m in sys.modules if m.split(".")[0] == "keras_attn"]
forbidden = sorted(_keras() - baseline) + ours
report["forbidden"] = forbidden[:5]
json.dump(report, open(sys.argv[2], "w"))
"""

TEXTS = ["A wonderful, moving film. I loved it!", "Dull and far too long. I hated it."]
NAMES = ["neg", "pos"]
SENTENCE = "Dull and far too long. "
MAX_SENTENCES, MAX_WORDS = 3, 6


def _ctr_rows(df):
    """Raw rows: as they come, then the edge cases named by their index."""
    rows = df.iloc[:8].reset_index(drop=True).copy()
    rows[["age", "wage_per_hour"]] = rows[["age", "wage_per_hour"]].astype(float)
    rows.loc[3, "education"] = "Doctorate from Mars"  # unseen category
    rows.loc[3, "country_self"] = "Atlantis"
    rows.loc[4, "age"] = np.nan  # missing number
    rows.loc[5, "age"] = np.inf  # infinite numbers: rows 5 and 6 mirror row 4
    rows.loc[6, "age"] = -np.inf
    rows.loc[6, "wage_per_hour"] = np.inf
    rows.loc[4, "wage_per_hour"] = np.nan
    rows.loc[7, "education"] = "x" * 1_000_000  # a 1 MB string
    for i in (5, 6):
        for c in df.columns:
            if c not in ("age", "wage_per_hour"):
                rows.loc[i, c] = rows.loc[4, c]
    rows.loc[5, "wage_per_hour"] = np.nan
    return rows


def _feeds_json(arrays):
    """`to_arrays` output as the subprocess plan's `{name: {dtype, values}}`."""
    out = {}
    for name, a in arrays.items():
        if a.dtype == object:
            out[name] = {"dtype": "string", "values": [v.decode() for v in a]}
        else:
            out[name] = {"dtype": a.dtype.name, "values": a.tolist()}
    return out


def _direct(model, arrays):
    out = model({k: tf.constant(v) for k, v in arrays.items()})
    return {k: np.asarray(v) for k, v in out.items()}


def _text_bad_cases():
    long_doc = SENTENCE * (1_000_000 // len(SENTENCE) + 1)  # > 1 MB
    words = " ".join(f"w{i % 50}" for i in range(100_000))  # one 100,000-word sentence
    return {
        "missing_input": {},
        "wrong_dtype": {"text": {"dtype": "float32", "values": [1.0, 2.0]}},
        "empty_batch": {"text": {"dtype": "string", "values": []}},
        "one_megabyte": {"text": {"dtype": "string", "values": [long_doc]}},
        "one_megabyte_prefix": {
            "text": {"dtype": "string", "values": [SENTENCE * MAX_SENTENCES]}
        },
        "hundred_thousand_words": {"text": {"dtype": "string", "values": [words]}},
        "hundred_thousand_words_prefix": {
            "text": {
                "dtype": "string",
                "values": [" ".join(words.split()[:MAX_WORDS])],
            }
        },
        "unseen_words": {"text": {"dtype": "string", "values": ["zorblax quuxly"]}},
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serving")
    df = load_census_sample().iloc[:300]
    specs = census_features(df)
    tasks = census_tasks()
    ctr = build_ctr_model(
        specs,
        tasks,
        embedding_dim=4,
        num_experts=2,
        expert_units=(8,),
        tower_units=(4,),
        gate="attention",
        interacting_layers=1,
        key_dim=4,
    )
    ctr_path = export(
        ctr,
        tmp / "census",
        version=1,
        features=specs,
        warmup=df.iloc[:3],
        explain=True,
    )
    rows = _ctr_rows(df)
    dtypes = signature_dtypes(ctr_path)
    arrays = to_arrays(rows, dtypes, specs)

    tokenizer = SentenceTokenizer(
        build_vocabulary(TEXTS), max_sentences=MAX_SENTENCES, max_words=MAX_WORDS
    )
    han = build_han_classifier(
        tokenizer.vocabulary_size,
        2,
        MAX_SENTENCES,
        MAX_WORDS,
        embedding_dim=8,
        units=4,
        attention_units=8,
        # The wide part, as fit_text_classifier's default HAN has it: the served
        # model hashes n-grams from the raw string too.
        wide={"num_buckets": 64, "max_ngrams": 32},
    )
    han_path = export_text_classifier(
        han,
        tokenizer,
        tmp / "han",
        version=1,
        class_names=NAMES,
        warmup=TEXTS,
        explain=True,
    )
    bert_tokenizer = Tokenizer("bert-base-uncased", sequence_length=12)
    transformer = build_transformer_classifier(
        bert_tokenizer.vocabulary_size,
        2,
        12,
        hidden_dim=8,
        num_heads=2,
        intermediate_dim=16,
        pooling="cls",
    )
    transformer_path = export_text_classifier(
        transformer, bert_tokenizer, tmp / "transformer", version=1, explain=True
    )

    ctr_bad = {
        "missing_feature": {k: v for k, v in _feeds_json(arrays).items() if k != "age"},
        "wrong_dtype": {
            **_feeds_json(arrays),
            "wage_per_hour": {"dtype": "string", "values": ["39"] * len(rows)},
        },
        "empty_batch": _feeds_json({k: v[:0] for k, v in arrays.items()}),
        "different_batch_sizes": {
            **_feeds_json(arrays),
            "wage_per_hour": {"dtype": "float32", "values": [30.0, 40.0]},
        },
        "rows": _feeds_json(arrays),
    }
    rest_rows = rows.iloc[:5]
    plan = {
        "ctr": {
            "export": str(ctr_path),
            "warmup": True,
            "rest": [
                rest_request(rest_rows, ctr_path, format=f, features=specs)
                for f in ("instances", "inputs")
            ]
            + [rest_request(rest_rows, ctr_path, "explain", "inputs", specs)],
            "grpc": [
                base64.b64encode(
                    grpc_request(
                        rest_rows, ctr_path, "census", version=1, features=specs
                    ).SerializeToString()
                ).decode()
            ],
            "bad": {k: {"inputs": v} for k, v in ctr_bad.items()},
        },
        "han": {
            "export": str(han_path),
            "warmup": True,
            "rest": [
                rest_request(TEXTS + [""], han_path, format=f)
                for f in ("instances", "inputs")
            ]
            + [rest_request(TEXTS + [""], han_path, "explain", "inputs")],
            "grpc": [
                base64.b64encode(
                    grpc_request(TEXTS, han_path, "han").SerializeToString()
                ).decode()
            ],
            "bad": {k: {"inputs": v} for k, v in _text_bad_cases().items()},
        },
        "transformer": {
            "export": str(transformer_path),
            "warmup": False,
            "rest": [rest_request(TEXTS + [""], transformer_path, "explain", "inputs")]
            + [rest_request(TEXTS + [""], transformer_path, format="inputs")],
            "grpc": [],
            "bad": {},
        },
    }
    plan_path, report_path = tmp / "plan.json", tmp / "report.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    run_isolated(_SERVER, str(plan_path), str(report_path), cwd=tmp)
    report = json.loads(report_path.read_text())
    return {
        "report": report,
        "ctr": ctr,
        "specs": specs,
        "df": df,
        "rows": rows,
        "arrays": arrays,
        "dtypes": dtypes,
        "ctr_path": ctr_path,
        "han": han,
        "tokenizer": tokenizer,
        "han_path": han_path,
        "transformer_path": transformer_path,
        "han_serving": build_text_serving_model(han, tokenizer, NAMES),
        "tmp": tmp,
    }


def _close(served_outputs, expected, atol=1e-5):
    assert set(served_outputs) >= set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(
            np.asarray(served_outputs[name], dtype=value.dtype).reshape(value.shape),
            value,
            atol=atol,
            err_msg=name,
        )


def _text_expected(served, texts):
    out = served["han_serving"]({"text": tf.constant(texts)})
    return {"probabilities": np.asarray(out["probabilities"])}


def test_the_reload_is_tensorflow_only(served):
    report = served["report"]
    assert report["forbidden"] == []
    assert report["ctr"]["signatures"] == ["explain", "serving_default"]
    assert report["han"]["signatures"] == ["explain", "serving_default"]


# ------------------------------------------------------------------------ warm-up


def test_ctr_warmup_records_replay_through_the_export(served):
    warm = served["report"]["ctr"]["warmup"]
    # One record per row (batch 1) and one of all three rows, for each signature.
    assert [w["signature"] for w in warm] == ["serving_default"] * 4 + ["explain"] * 4
    assert {w["model"] for w in warm} == {"census"}
    arrays = to_arrays(served["df"].iloc[:3], served["dtypes"], served["specs"])
    full = _direct(served["ctr"], arrays)
    for i, w in enumerate(warm):
        assert "outputs" in w, w
        rows = slice(i % 4, i % 4 + 1) if i % 4 < 3 else slice(0, 3)
        expected = {k: v[rows] for k, v in full.items()}
        _close(w["outputs"], expected)
        for v in w["outputs"].values():
            assert np.isfinite(np.asarray(v, dtype=float)).all()
    # The file reads back in this process too, as the same requests.
    requests = read_warmup(served["ctr_path"])
    assert len(requests) == 8
    np.testing.assert_array_equal(
        tf.make_ndarray(requests[3].inputs["age"]), arrays["age"]
    )


def test_text_warmup_records_replay_through_the_export(served):
    warm = served["report"]["han"]["warmup"]
    assert [w["signature"] for w in warm] == ["serving_default"] * 3 + ["explain"] * 3
    full = _text_expected(served, TEXTS)["probabilities"]
    for i, w in enumerate(warm):
        rows = slice(i % 3, i % 3 + 1) if i % 3 < 2 else slice(0, 2)
        _close(w["outputs"], {"probabilities": full[rows]})
        assert all(v in NAMES for v in w["outputs"]["label"])


def test_warmup_needs_rows(served, tmp_path):
    with pytest.raises(ValueError, match="at least one row"):
        export(served["ctr"], tmp_path / "m", warmup=served["df"].iloc[:0])


# ------------------------------------------------------------------------ requests


def test_rest_bodies_decoded_as_tf_serving_does_give_the_model_outputs(served):
    rest = served["report"]["ctr"]["rest"]
    arrays = {k: v[:5] for k, v in served["arrays"].items()}
    expected = _direct(served["ctr"], arrays)
    for result in rest[:2]:  # row and columnar forms
        assert "outputs" in result, result
        _close(result["outputs"], expected)
    han = served["report"]["han"]["rest"]
    texts = TEXTS + [""]
    for result in han[:2]:
        _close(result["outputs"], _text_expected(served, texts))


def test_rest_request_forms_and_json_types(served):
    rows = served["rows"].iloc[4:6]
    body = rest_request(rows, served["ctr_path"], features=served["specs"])
    assert body["signature_name"] == "serving_default"
    assert len(body["instances"]) == 2 and set(body["instances"][0]) == set(
        served["dtypes"]
    )
    assert isinstance(body["instances"][0]["education"], str)
    assert np.isnan(body["instances"][0]["age"])
    text = json.dumps(body)  # NaN / Infinity tokens, as TF Serving reads them
    assert "NaN" in text and "Infinity" in text
    columnar = rest_request(rows, served["ctr_path"], format="inputs")
    assert set(columnar["inputs"]) == set(served["dtypes"])
    assert len(columnar["inputs"]["age"]) == 2
    binary = rest_request([b"\xff\xfe"], {"text": "string"})
    assert binary["instances"] == [
        {"text": {"b64": base64.b64encode(b"\xff\xfe").decode()}}
    ]
    with pytest.raises(ValueError, match="`format` must be one of"):
        rest_request(rows, served["ctr_path"], format="rows")


def test_parse_rest_response_reads_both_answer_forms(served):
    rest = served["report"]["ctr"]["rest"]
    arrays = {k: v[:5] for k, v in served["arrays"].items()}
    expected = _direct(served["ctr"], arrays)
    row_answer = parse_rest_response(rest[0]["answer"])
    columnar_answer = parse_rest_response(rest[1]["answer"].encode())
    assert json.loads(rest[0]["answer"]).keys() == {"predictions"}
    assert json.loads(rest[1]["answer"]).keys() == {"outputs"}
    for answer in (row_answer, columnar_answer):
        _close(answer, expected)
        assert answer["income"].shape == (5, 1)
    han = parse_rest_response(served["report"]["han"]["rest"][0]["answer"])
    assert (
        han["label"].tolist() == served["report"]["han"]["rest"][0]["outputs"]["label"]
    )
    single = parse_rest_response({"predictions": [1.5, 2.5]}, output_name="y")
    np.testing.assert_array_equal(single["y"], [1.5, 2.5])
    assert parse_rest_response({"outputs": {"b": [{"b64": "AA=="}]}})["b"][0] == b"\0"
    with pytest.raises(ValueError, match="TF Serving answered an error: boom"):
        parse_rest_response('{"error": "boom"}')
    with pytest.raises(ValueError, match="`response` must hold"):
        parse_rest_response({"result": []})


def test_grpc_request_round_trips_through_make_ndarray(served):
    rows = served["rows"].iloc[:5]
    request = grpc_request(
        rows, served["ctr_path"], "census", version=3, features=served["specs"]
    )
    assert request.model_spec.name == "census"
    assert request.model_spec.version.value == 3
    assert request.model_spec.signature_name == "serving_default"
    arrays = {k: v[:5] for k, v in served["arrays"].items()}
    assert set(request.inputs) == set(arrays)
    for name, value in arrays.items():
        back = tf.make_ndarray(request.inputs[name])
        if value.dtype == object:
            assert back.tolist() == value.tolist()
        else:
            assert back.dtype == value.dtype
            np.testing.assert_array_equal(back, value)
    served_out = served["report"]["ctr"]["grpc"][0]
    _close(served_out["outputs"], _direct(served["ctr"], arrays))
    han = served["report"]["han"]["grpc"][0]
    _close(han["outputs"], _text_expected(served, TEXTS))
    with pytest.raises(ValueError, match="`model_name` must be a non-empty"):
        grpc_request(rows, served["ctr_path"], "")


def test_request_builders_name_what_is_wrong(served):
    rows = served["rows"].iloc[:2].drop(columns=["age"])
    with pytest.raises(ValueError, match=r"Missing: \['age'\]"):
        rest_request(rows, served["ctr_path"])
    bad = served["rows"].iloc[:2].copy()
    bad["age"] = ["old", "young"]
    with pytest.raises(ValueError, match="'age' takes float32 numbers"):
        grpc_request(bad.to_dict("records"), served["ctr_path"], "census")
    with pytest.raises(ValueError, match="`signature` must be one of"):
        signature_dtypes(served["ctr_path"], "nope")
    with pytest.raises(ValueError, match="same number of rows"):
        to_arrays({"a": ["x"], "b": [1.0, 2.0]}, {"a": "string", "b": "float32"})


# ------------------------------------------------------------------------ explain


def test_ctr_explain_returns_the_gate_weights_and_field_attention(served):
    result = served["report"]["ctr"]["rest"][2]
    assert "outputs" in result, result
    out = {k: np.asarray(v) for k, v in result["outputs"].items()}
    arrays = {k: v[:5] for k, v in served["arrays"].items()}
    gates = _direct(gate_weights_model(served["ctr"]), arrays)
    for task in ("income", "marital"):
        weights = out[f"{task}_gate_weights"]
        assert weights.shape == (5, 2)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        np.testing.assert_allclose(weights, gates[task], atol=1e-6)
    _close(out, _direct(served["ctr"], arrays))  # the predictions are the plain ones
    fields = out["field_attention_0"]  # (batch, heads, fields, fields)
    assert fields.shape[:2] == (5, 2) and fields.shape[2] == fields.shape[3]
    np.testing.assert_allclose(fields.sum(-1), 1.0, atol=1e-5)


def test_han_explain_returns_word_and_sentence_attention(served):
    result = served["report"]["han"]["rest"][2]
    out = {k: np.asarray(v) for k, v in result["outputs"].items()}
    texts = TEXTS + [""]
    strings = tf.constant(texts)
    reference = han_attention_model(served["han"])(
        {
            "token_ids": served["tokenizer"](strings),
            "ngram_ids": HashedNgrams.matching(wide_layer(served["han"]))(strings),
        }
    )
    np.testing.assert_allclose(
        out["word_attention"], reference["word_attention"], atol=1e-6
    )
    np.testing.assert_allclose(
        out["sentence_attention"], reference["sentence_attention"], atol=1e-6
    )
    np.testing.assert_allclose(out["sentence_attention"][:2].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(out["sentence_attention"][2], 0.0)  # no sentence
    _close(out, _text_expected(served, texts))


def test_transformer_explain_returns_the_cls_attention(served):
    explain, plain = served["report"]["transformer"]["rest"]
    out = {k: np.asarray(v) for k, v in explain["outputs"].items()}
    attention = out["cls_attention"]  # (batch, heads, sequence_length)
    assert attention.shape == (3, 2, 12)
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
    ids = Tokenizer("bert-base-uncased", sequence_length=12)
    ids = ids(tf.constant(TEXTS + [""])).numpy()
    padded = ids == 0
    assert padded.any()
    assert np.all(attention[np.broadcast_to(padded[:, None], attention.shape)] < 1e-6)
    np.testing.assert_allclose(
        out["probabilities"], np.asarray(plain["outputs"]["probabilities"]), atol=1e-6
    )


def test_explain_is_refused_where_there_is_nothing_to_explain(tmp_path):
    from keras_attn.features import infer_features

    df = pd.DataFrame({"c": ["a", "b"], "x": [1.0, 2.0], "y": [0, 1]})
    specs = infer_features(df, labels=["y"])
    model = build_ctr_model(
        specs, ["y"], embedding_dim=2, bottom_units=(2,), tower_units=()
    )
    with pytest.raises(ValueError, match="nothing for an explain model or signature"):
        export(model, tmp_path / "m", explain=True)
    with pytest.raises(ValueError, match="`explain` must be False, True or"):
        export(model, tmp_path / "m", explain="yes")


# ------------------------------------------------------------------- bad requests


def _bad(served, kind, name):
    return served["report"][kind]["bad"][name]


@pytest.mark.parametrize("kind", ["ctr", "han"])
def test_a_missing_input_is_an_error_naming_it(served, kind):
    result = _bad(served, kind, "missing_input" if kind == "han" else "missing_feature")
    assert "error" in result
    assert ("'age'" if kind == "ctr" else "'text'") in result["message"]


@pytest.mark.parametrize("kind", ["ctr", "han"])
def test_a_wrong_dtype_is_an_error_naming_the_input_by_position(served, kind):
    # The signature's own type check answers before the graph runs; it names the
    # input by its position among the sorted input names (README, serving part).
    result = _bad(served, kind, "wrong_dtype")
    assert result["error"] == "InvalidArgumentError", result
    if kind == "ctr":
        position = sorted(served["dtypes"]).index("wage_per_hour")
        wanted = f"input #{position}(zero-based) was expected to be a float tensor"
    else:
        wanted = "input #0(zero-based) was expected to be a string tensor"
    assert wanted in result["message"]


@pytest.mark.parametrize("kind", ["ctr", "han"])
def test_an_empty_batch_gives_empty_outputs(served, kind):
    out = _bad(served, kind, "empty_batch")["outputs"]
    if kind == "ctr":
        assert out == {"income": [], "marital": []}
    else:
        assert out == {"probabilities": [], "label": []}


def test_different_batch_sizes_are_invalid_argument_naming_the_input(served):
    result = _bad(served, "ctr", "different_batch_sizes")
    assert result["error"] == "InvalidArgumentError"
    wanted = "Input `wage_per_hour` must have the batch size of input `age`"
    assert wanted in result["message"]


def test_nan_unseen_categories_and_a_1mb_string_give_finite_model_outputs(served):
    out = {k: np.asarray(v) for k, v in _bad(served, "ctr", "rows")["outputs"].items()}
    expected = _direct(served["ctr"], served["arrays"])
    finite = [0, 1, 2, 3, 4, 7]  # as they come, unseen, NaN, 1 MB string
    for name in ("income", "marital"):
        assert np.isfinite(out[name][finite]).all()
        assert ((out[name][finite] > 0) & (out[name][finite] < 1)).all()
        np.testing.assert_allclose(out[name][finite], expected[name][finite], atol=1e-5)
    # Unseen and 1 MB strings both land in the one OOV bucket of `education`.
    one_row = {k: v[[3]] for k, v in served["arrays"].items()}
    one_row["education"] = np.array([b"x" * 1_000_000], dtype=object)
    np.testing.assert_allclose(
        _direct(served["ctr"], one_row)["income"],
        _direct(served["ctr"], {k: v[[3]] for k, v in served["arrays"].items()})[
            "income"
        ],
        atol=1e-6,
    )


def test_infinite_numbers_are_served_as_missing(served):
    # NumericFeature(non_finite="missing"), the default (issue 18).
    out = {k: np.asarray(v) for k, v in _bad(served, "ctr", "rows")["outputs"].items()}
    for name in ("income", "marital"):
        assert np.isfinite(out[name][[5, 6]]).all()
        np.testing.assert_allclose(out[name][5], out[name][4], atol=1e-6)
        np.testing.assert_allclose(out[name][6], out[name][4], atol=1e-6)


def test_text_long_and_unseen_inputs_give_defined_probabilities(served):
    def probabilities(name):
        return np.asarray(_bad(served, "han", name)["outputs"]["probabilities"])

    for name in ("one_megabyte", "hundred_thousand_words", "unseen_words"):
        p = probabilities(name)
        assert np.isfinite(p).all() and np.allclose(p.sum(-1), 1.0, atol=1e-5)
    # Documented: a document keeps its first max_sentences sentences and each
    # sentence its first max_words tokens.
    np.testing.assert_allclose(
        probabilities("one_megabyte"), probabilities("one_megabyte_prefix"), atol=1e-6
    )
    np.testing.assert_allclose(
        probabilities("hundred_thousand_words"),
        probabilities("hundred_thousand_words_prefix"),
        atol=1e-6,
    )


# ----------------------------------------------------------------------------- CLI


def test_predict_streams_a_csv_through_the_export_in_batches(served, capsys):
    tmp = served["tmp"]
    rows = served["rows"].iloc[[0, 1, 2, 3, 4]].copy()
    rows.insert(0, "row_id", [f"r{i}" for i in range(5)])
    data, output = tmp / "rows.csv", tmp / "predicted.csv"
    rows.to_csv(data, index=False)
    code = main(
        [
            "predict",
            "--model",
            str(served["ctr_path"].parent),  # the base folder: its latest version
            "--data",
            str(data),
            "--output",
            str(output),
            "--batch-size",
            "2",
            "--keep",
            "row_id",
        ]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "5 rows" in err and "rows/s" in err
    got = pd.read_csv(output)
    assert list(got.columns) == ["row_id", "income", "marital"]
    assert got["row_id"].tolist() == [f"r{i}" for i in range(5)]
    arrays = to_arrays(
        pd.read_csv(data, keep_default_na=False, na_values=[""]),
        served["dtypes"],
        served["specs"],
    )
    expected = _direct(served["ctr"], arrays)
    for name in ("income", "marital"):
        np.testing.assert_allclose(got[name], expected[name][:, 0], atol=1e-6)


def test_predict_writes_jsonl_to_stdout_for_a_text_export(served, capsys):
    data = served["tmp"] / "texts.jsonl"
    data.write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in TEXTS + [""]), encoding="utf-8"
    )
    assert main(["predict", "--model", str(served["han_path"]), "--data", str(data),
                 "--quiet"]) == 0  # fmt: skip
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = [json.loads(line) for line in io.StringIO(captured.out)]
    expected = _text_expected(served, TEXTS + [""])["probabilities"]
    assert len(lines) == 3
    np.testing.assert_allclose(
        [line["probabilities"] for line in lines], expected, atol=1e-6
    )
    assert all(line["label"] in NAMES for line in lines)


def test_predict_refuses_what_it_cannot_read(served, tmp_path, capsys):
    # The CLI turns an input error into one line on stderr and exit status 2;
    # --debug raises it with its traceback.
    argv = ["predict", "--model", str(served["ctr_path"]), "--data", "x.parquet"]
    assert main(argv) == 2
    assert "`--data` must be a .csv or .jsonl" in capsys.readouterr().err
    with pytest.raises(ValueError, match="`--data` must be a .csv or .jsonl"):
        main(argv + ["--debug"])
    assert main(["predict", "--model", str(tmp_path), "--data", "x.csv"]) == 2
    assert "`--model` must be an export's version" in capsys.readouterr().err


def test_inspect_tells_signatures_specs_ops_and_the_tf_serving_floor(served, capsys):
    assert main(["inspect", str(served["ctr_path"].parent), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["export"] == str(served["ctr_path"])
    inputs = info["signatures"]["serving_default"]["inputs"]
    assert {k: v["dtype"] for k, v in inputs.items()} == served["dtypes"]
    assert inputs["age"]["shape"] == [None]
    assert set(info["signatures"]["explain"]["outputs"]) >= {
        "income_gate_weights",
        "field_attention_0",
    }
    assert [f["name"] for f in info["features"]["features"]] == [
        f.name for f in served["specs"]
    ]
    assert info["warmup_records"] == 8
    assert info["unknown_ops"] == [] and info["tf_text_ops"] == []
    assert "LookupTableFindV2" in info["core_ops"]
    assert info["min_tf_serving"] == ".".join(tf.__version__.split(".")[:2])

    assert main(["inspect", str(served["han_path"])]) == 0
    text = capsys.readouterr().out
    assert "Signature 'serving_default'" in text
    assert "text                     string   (None)" in text
    assert "Feature specs: none written with the export" in text
    assert "Lowest TF Serving version: 2." in text
