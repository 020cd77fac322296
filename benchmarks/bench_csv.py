"""The CSV path's wall time: reading, the pass before training, a fit, `predict`.

One process, the census file written as a plain CSV (../shared/data/census_income's
dev file, 70,000 rows; without it the shipped 5,000-row sample 14 times): rows/s of
`pandas.read_csv` (the reference parser), of `keras_attn.features.iter_csv_frames`
(the reader every CSV path uses) and of the pass `fit_ctr_model` makes before
training (every record read and converted by the specs, the labels counted); then
the wall time of `fit_ctr_model` on the file and on the DataFrame (its
`pandas.read_csv` included), the two alternating, and `predict_file` over the
file. Each figure is the median of `--rounds` runs.

    python -m benchmarks.bench_csv [--epochs 2] [--rounds 2] [--no-write]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._results import machine, write_section

ROOT = Path(__file__).resolve().parents[1]
CENSUS_DEV = (
    ROOT.parent / "shared" / "data" / "census_income" / "census_income_dev.csv.gz"
)


def _data(folder: Path) -> tuple[Path, str]:
    import pandas as pd

    from keras_attn.datasets import load_census_sample

    path = folder / "census.csv"
    if CENSUS_DEV.exists():
        with gzip.open(CENSUS_DEV, "rb") as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        return path, "the census dev file"
    pd.concat([load_census_sample()] * 14).to_csv(path, index=False)
    return path, "the shipped census sample, 14 times"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)

    import pandas as pd

    from keras_attn.datasets import census_features, census_tasks
    from keras_attn.features import count_rows, iter_csv_frames, read_header
    from keras_attn.features.dataset import _PASSES
    from keras_attn.models import build_ctr_model, fit_ctr_model
    from keras_attn.serving import export, predict_file

    loads = [os.getloadavg()[0]]
    folder = Path(tempfile.mkdtemp(prefix="bench_csv-"))
    try:
        path, what = _data(folder)
        frame = pd.read_csv(path)
        rows = len(frame)
        specs, tasks = census_features(frame), census_tasks()
        times = {k: [] for k in ("pandas", "reader", "pass", "csv", "frame", "pred")}

        def timed(key, fn):
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
            loads.append(os.getloadavg()[0])

        header = read_header(path)
        model = build_ctr_model(specs, tasks, gate="attention")
        exported = export(model, folder / "exp", features=specs)
        for r in range(args.rounds):
            timed("pandas", lambda: pd.read_csv(path))
            timed("reader", lambda: sum(len(f) for f in iter_csv_frames(path, header)))
            _PASSES.clear()  # the pass is kept per file: time it afresh
            timed("pass", lambda: count_rows(path, tasks, specs))

            def fit(data):
                _PASSES.clear()
                model = build_ctr_model(specs, tasks, gate="attention")
                fit_ctr_model(
                    model,
                    specs,
                    tasks,
                    data() if callable(data) else data,
                    epochs=args.epochs,
                    batch_size=512,
                    seed=0,
                    verbose=0,
                )
                return model

            order = [("csv", path), ("frame", lambda: pd.read_csv(path))]
            for key, data in order if r % 2 == 0 else order[::-1]:
                timed(key, lambda d=data: fit(d))
            out = folder / "predicted.csv"
            timed(
                "pred",
                lambda o=out: predict_file(exported, path, output=o, progress=False),
            )
        med = {k: statistics.median(v) for k, v in times.items()}
        body = (
            f"{what} ({rows:,} rows, {len(header)} columns, "
            f"{path.stat().st_size / 1e6:.1f} MB), the census MMoE (attention gate), "
            f"batch 512, {args.epochs} epochs; medians of {args.rounds} rounds. "
            f"{machine(loads)}\n\n"
            "| step | wall time | rows/s |\n|---|---|---|\n"
            f"| `pandas.read_csv` (typed) | {med['pandas']:.2f} s | "
            f"{rows / med['pandas']:,.0f} |\n"
            f"| `iter_csv_frames` (text, every column) | {med['reader']:.2f} s | "
            f"{rows / med['reader']:,.0f} |\n"
            f"| the pass before training (read, convert, count labels) | "
            f"{med['pass']:.2f} s | {rows / med['pass']:,.0f} |\n"
            f"| `fit_ctr_model` on the CSV file (pass included) | {med['csv']:.1f} s "
            "| |\n"
            f"| `fit_ctr_model` on the DataFrame (`read_csv` included) | "
            f"{med['frame']:.1f} s | |\n"
            f"| `predict_file` over the file (CSV out, export loaded) | "
            f"{med['pred']:.2f} s | {rows / med['pred']:,.0f} |\n\n"
            f"CSV fit / DataFrame fit: {med['csv'] / med['frame']:.2f}x."
        )
        print(body)
        if not args.no_write:
            write_section("bench_csv", body, "python -m benchmarks.bench_csv")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
