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
import os
import statistics
import tempfile
from pathlib import Path

from tests.cluster import LocalCluster

ROWS = 5000
BATCH = 512


def run_cluster(
    workers: int, epochs: int, batch: int, timeout: float, pack: bool = False
) -> dict:
    """Trains once on `workers` worker processes; returns worker 0's record.
    `pack` asks for 64 MiB packs (`CommunicationOptions.bytes_per_pack`): all the
    gradients in one all-reduce; otherwise TensorFlow chooses."""
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
                        *(["--pack"] if pack else []),
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
    configs = {"1": (1, False), "2": (2, False), "2, packed": (2, True)}
    rates = {name: [] for name in configs}
    outside = {name: [] for name in configs}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for name, (workers, pack) in configs.items():
            record = run_cluster(workers, args.epochs, args.batch, args.timeout, pack)
            seconds = record["history"]["epoch_seconds"][1:]
            in_steps = record["history"]["step_seconds"][1:]
            rate = examples / statistics.median(seconds)
            rates[name].append(rate)
            # Share of the epoch spent outside the calls of the compiled step.
            outside[name].append(1 - sum(in_steps) / sum(seconds))
            loads.append(os.getloadavg()[0])
            print(
                f"{name} worker(s): {rate:,.0f} examples/s {seconds}, "
                f"outside the step {outside[name][-1]:.1%}",
                flush=True,
            )
    median = {name: statistics.median(r) for name, r in rates.items()}
    share = {name: statistics.median(r) for name, r in outside.items()}
    body = (
        "Census CTR model (`build_ctr_model` defaults, 5,000-row shipped sample), "
        "`fit_ctr_model` under MultiWorkerMirroredStrategy, global batch "
        f"{args.batch}, "
        "no XLA, one step per execution, tf_keras, worker processes on 127.0.0.1 of "
        "this 2-core machine. "
        f"Examples/s of epochs 2-{args.epochs}, median over {args.rounds} rounds "
        '(alternating); "outside the step": the share of those epochs\' wall time '
        "spent outside the calls of the compiled train function (`fit`'s Python "
        "loop, callbacks, logs), read from worker 0 with batch begin/end callbacks; "
        "each call includes the next batch from the prefetched dataset and the "
        "all-reduce:\n\n"
        "| workers | examples/s | rounds | outside the step |\n|---|---|---|---|\n"
        + "".join(
            f"| {name} | {median[name]:,.0f} | "
            f"{', '.join(f'{r:,.0f}' for r in rates[name])} | {share[name]:.1%} |\n"
            for name in configs
        )
        + "\n2 workers / 1 worker: "
        f"{median['2'] / median['1']:.2f}x (packed: "
        f'{median["2, packed"] / median["1"]:.2f}x). "packed" asks for '
        "packs of 64 MiB (`CommunicationOptions(bytes_per_pack=...)`: all "
        "gradients in one all-reduce), the default lets TensorFlow choose. Two "
        "processes on two cores add gRPC all-reduces to every step and halve "
        "each one's batch: no speed-up is expected here; the figure is the "
        "collectives' cost. Load average (1 min) at the start and after each "
        f"cluster: {', '.join(f'{x:.1f}' for x in loads)} on 2 cores."
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
