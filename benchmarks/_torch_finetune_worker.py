"""The PyTorch + transformers side of bench_finetune, run in its own process (the
benchmark venv's Python) so the keras_attn process never imports torch.

Reads commands from stdin, one JSON object per line, and answers one JSON line each:
`{"op": "load", "checkpoint": dir, "batch": npz, "precision": p}` builds
`BertForSequenceClassification` (a fresh 4-class head) and AdamW and answers the load
time; `{"op": "steps", "n": k, "threads": t}` runs k training steps (forward,
backward, AdamW update) on t intra-op threads and answers each one's seconds;
`{"op": "whole", "checkpoint": dir, "data": json, "epochs": e, "batch": b,
"length": n, "learning_rate": lr, "warmup": fraction, "threads": t}` fine-tunes a
fresh classifier on the file's training texts from raw strings (the checkpoint's
fast tokenizer, padded to `length`; AdamW without decay on biases and LayerNorm,
linear warm-up then decay; dropout on) and answers its wall time, tokenization
and load included, and its test accuracy; `{"op": "quit"}` ends.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch
import transformers


def whole(command) -> dict:
    """The whole fine-tune of `command` (see the module docstring)."""
    torch.manual_seed(0)
    torch.set_num_threads(command["threads"])
    start = time.perf_counter()
    with open(command["data"], encoding="utf-8") as f:
        data = json.load(f)
    classes = sorted(set(data["train_labels"]))
    tokenizer = transformers.AutoTokenizer.from_pretrained(command["checkpoint"])

    def encode(texts):
        return tokenizer(
            texts,
            max_length=command["length"],
            padding="max_length",
            truncation=True,
            return_tensors="pt",
        )

    train = encode(data["train_texts"])
    labels = torch.tensor([classes.index(y) for y in data["train_labels"]])
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        command["checkpoint"], num_labels=len(classes)
    )
    model.train()
    no_decay = [
        p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n
    ]
    decay = [
        p for n, p in model.named_parameters() if not any(p is q for q in no_decay)
    ]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": 0.01},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=command["learning_rate"],
    )
    batch = command["batch"]
    steps = -(-len(labels) // batch) * command["epochs"]
    schedule = transformers.get_linear_schedule_with_warmup(
        optimizer, int(command["warmup"] * steps), steps
    )
    generator = torch.Generator().manual_seed(0)
    for _ in range(command["epochs"]):
        order = torch.randperm(len(labels), generator=generator)
        for i in range(0, len(labels), batch):
            rows = order[i : i + batch]
            optimizer.zero_grad(set_to_none=True)
            loss = model(
                input_ids=train["input_ids"][rows],
                token_type_ids=train["token_type_ids"][rows],
                attention_mask=train["attention_mask"][rows],
                labels=labels[rows],
            ).loss
            loss.backward()
            optimizer.step()
            schedule.step()
    seconds = time.perf_counter() - start
    model.eval()
    test = encode(data["test_texts"])
    predicted = []
    with torch.no_grad():
        for i in range(0, len(data["test_texts"]), 128):
            logits = model(**{k: v[i : i + 128] for k, v in test.items()}).logits
            predicted += [classes[j] for j in logits.argmax(-1).tolist()]
    right = [p == y for p, y in zip(predicted, data["test_labels"])]
    return {
        "seconds": seconds,
        "accuracy": sum(right) / len(right),
        "steps": steps,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def main():
    torch.manual_seed(0)
    model = optimizer = batch = None
    precision = "float32"
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "quit":
            break
        if command["op"] == "whole":
            print(json.dumps(whole(command)), flush=True)
            continue
        if command["op"] == "load":
            start = time.perf_counter()
            data = np.load(command["batch"])
            batch = {
                "input_ids": torch.tensor(data["token_ids"], dtype=torch.long),
                "token_type_ids": torch.tensor(data["segment_ids"], dtype=torch.long),
                "attention_mask": torch.tensor(
                    data["token_ids"] != 0, dtype=torch.long
                ),
                "labels": torch.tensor(data["labels"], dtype=torch.long),
            }
            model = transformers.AutoModelForSequenceClassification.from_pretrained(
                command["checkpoint"], num_labels=4
            )
            model.train()
            optimizer = torch.optim.AdamW(
                model.parameters(), lr=2e-5, weight_decay=0.01
            )
            precision = command["precision"]
            answer = {
                "load_seconds": time.perf_counter() - start,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "threads": torch.get_num_threads(),
            }
        else:
            torch.set_num_threads(command["threads"])
            times = []
            for _ in range(command["n"]):
                start = time.perf_counter()
                optimizer.zero_grad(set_to_none=True)
                with torch.autocast(
                    "cpu", dtype=torch.bfloat16, enabled=precision == "mixed_bfloat16"
                ):
                    loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                times.append(time.perf_counter() - start)
            answer = {"seconds": times, "loss": float(loss.detach())}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
