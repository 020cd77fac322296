"""CTR training throughput under MultiWorkerMirroredStrategy: 1 worker vs 2 workers.

Each round starts a local cluster of worker processes on 127.0.0.1
(`tests/cluster.py`, running `tests/distributed_worker.py mwms`) that trains the
census CTR model (`build_ctr_model` defaults, the shipped 5,000-row sample) with
`fit_ctr_model(strategy=MultiWorkerMirroredStrategy)` at one global batch, without
XLA and one step per execution (as the cluster tests do). The figure is the
examples per second of the epochs after the first (the first compiles), median over
them, read from worker 0; the two cluster sizes alternate round by round.

Runs under tf_keras (`TF_USE_LEGACY_KERAS=1` is set for the workers): Keras 3.15's
`fit` fails under MultiWorkerMirroredStrategy with two workers (see
tests/test_distribute_cluster.py).

    python -m benchmarks.bench_distribute [--rounds 2] [--epochs 4] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from tests.cluster import LocalCluster

ROWS = 5000
BATCH = 512


def run_cluster(workers: int, epochs: int, batch: int, timeout: float) -> dict:
    """Trains once on `workers` worker processes; returns worker 0's record."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        with LocalCluster(
            {"worker": workers}, out / "logs", env={"TF_USE_LEGACY_KERAS": "1"}
        ) as cluster:
            for i in range(workers):
                cluster.start(
                    "worker",
                    i,
                    [
                        "mwms",
                        "--out",
                        out,
                        "--models",
                        "ctr",
                        "--rows",
                        ROWS,
                        "--batch",
                        batch,
                        "--epochs",
                        epochs,
                    ],
                )
            cluster.wait_all(timeout)
        return json.loads((out / "ctr_worker0.json").read_text())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    examples = (ROWS // args.batch) * args.batch
    rates = {1: [], 2: []}
    for _ in range(args.rounds):
        for workers in (1, 2):
            record = run_cluster(workers, args.epochs, args.batch, args.timeout)
            seconds = record["history"]["epoch_seconds"][1:]
            rate = examples / statistics.median(seconds)
            rates[workers].append(rate)
            print(f"{workers} worker(s): {rate:,.0f} examples/s {seconds}", flush=True)
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    body = (
        "Census CTR model (`build_ctr_model` defaults, 5,000-row shipped sample), "
        "`fit_ctr_model` under MultiWorkerMirroredStrategy, global batch "
        f"{args.batch}, "
        "no XLA, one step per execution, tf_keras, worker processes on 127.0.0.1 of "
        "this 2-core machine, shared with other jobs while measured (noisy). "
        f"Examples/s of epochs 2-{args.epochs}, median over {args.rounds} rounds "
        "(alternating):\n\n"
        "| workers | examples/s | rounds |\n|---|---|---|\n"
        f"| 1 | {one:,.0f} | {', '.join(f'{r:,.0f}' for r in rates[1])} |\n"
        f"| 2 | {two:,.0f} | {', '.join(f'{r:,.0f}' for r in rates[2])} |\n\n"
        f"2 workers / 1 worker: {two / one:.2f}x. Two processes on two shared cores "
        "add an all-reduce over gRPC per step and halve each one's batch: no "
        "speed-up is expected here; the figure shows the cost of the collectives."
    )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        write_section(
            "bench_distribute",
            body,
            "python -m benchmarks.bench_distribute "
            f"--rounds {args.rounds} --epochs {args.epochs}",
        )


if __name__ == "__main__":
    main()
