"""The PyTorch + transformers side of bench_finetune, run in its own process (the
benchmark venv's Python) so the keras_attn process never imports torch.

Reads commands from stdin, one JSON object per line, and answers one JSON line each:
`{"op": "load", "checkpoint": dir, "batch": npz, "precision": p}` builds
`BertForSequenceClassification` (a fresh 4-class head) and AdamW and answers the load
time; `{"op": "steps", "n": k, "threads": t}` runs k training steps (forward,
backward, AdamW update) on t intra-op threads and answers each one's seconds;
`{"op": "quit"}` ends.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch
import transformers


def main():
    torch.manual_seed(0)
    model = optimizer = batch = None
    precision = "float32"
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "quit":
            break
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
