"""Whole suites on Dask (issue 36, docs/suites.md): the corpus's suites run by `ncet.run_suite`
on a LocalCluster of 1 and of 2 worker processes, the speedup (target >= 1.6 on this 2-core
machine), and the scheduler's overhead per row against the work.

Each cluster is started and warmed (ncet, onnx and onnxruntime imported on every worker)
before the clock starts; the time is run_suite's wall time from its call to its table. The
work is the tasks' own seconds (each network's import and certificate once, each row's
stages); the overhead per row is (wall x workers - work) / rows, the time a worker was not
working on a row (scheduling, transfers, and the last rows' imbalance); the no-op round trip
is the wall time per task of 500 empty tasks on the same cluster.

Usage: python benchmarks/suite.py [--corpus ../shared/vnncomp] [--suites acasxu,mnist_fc]
       [--splits 16] [--workers 1,2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = (ROOT / ".." / "shared" / "vnncomp").resolve()
NOOPS = 500


def _warm() -> bool:
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401

    import ncet.suites.work  # noqa: F401
    return True


def _noop(i: int) -> int:
    return i


def measure(rows, workers: int, splits: int) -> dict:
    import logging

    from distributed import Client, LocalCluster

    import ncet

    start = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        client.run(_warm)
        started = time.perf_counter() - start
        begin = time.perf_counter()
        client.gather(client.map(_noop, range(NOOPS), pure=False))
        noop = (time.perf_counter() - begin) / NOOPS
        begin = time.perf_counter()
        table = ncet.run_suite(rows, client=client, splits=splits, progress=False)
        wall = time.perf_counter() - begin
    networks = table.drop_duplicates("onnx")
    work = float(table["seconds"].sum() + networks["seconds_import"].sum()
                 + networks["seconds_check"].fillna(0).sum())
    return {"workers": workers, "rows": len(table), "wall": wall, "work": work,
            "overhead_per_row": (wall * workers - work) / len(table),
            "noop_round_trip": noop, "cluster_start": started,
            "outcomes": table["outcome"].value_counts().to_dict()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--suites", default="acasxu,mnist_fc")
    parser.add_argument("--splits", type=int, default=16)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    from ncet.suites import read_instances

    rows = [r for s in args.suites.split(",")
            for r in read_instances(args.corpus / s / "instances_included.csv")]
    print(f"{len(rows)} instances of {args.suites}, splits {args.splits}")
    results = []
    for workers in (int(w) for w in args.workers.split(",")):
        result = measure(rows, workers, args.splits)
        results.append(result)
        print(f"{workers} worker(s): wall {result['wall']:.1f} s, work {result['work']:.1f} s, "
              f"overhead per row {result['overhead_per_row']:.3f} s, no-op round trip "
              f"{1000 * result['noop_round_trip']:.2f} ms, cluster start "
              f"{result['cluster_start']:.1f} s, {result['outcomes']}")
    if len(results) > 1:
        speedup = results[0]["wall"] / results[-1]["wall"]
        print(f"speedup {results[-1]['workers']} vs {results[0]['workers']} worker(s): "
              f"{speedup:.2f} (target >= 1.6 for 2)")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
