"""`run_suite`: a suite's instances on Dask (docs/suites.md). One task per network imports and
certifies it; one task per instance, after its network's, reads the property, bounds the
margin, tightens and judges; rows are appended to the result file as they arrive."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from . import work
from .instances import Instance, read_instances
from .progress import progress_bar
from .table import COLUMNS, append_row, read_table

DEFAULT_SPLITS = 16
"""Pieces per box for each margin (`float_margin(splits=)`) whose property has at most
`ncet.regions.margin.SPLIT_DIMENSIONS` inputs (the others, as the margin's own default, are
not split): ACAS Xu's 36 instances take 146 s of margin work, where the margin's own default
(2,048 pieces on its 5 inputs) takes 28 s per instance."""

HARD_FACTOR, HARD_GRACE = 2.0, 30.0
"""A row still executing after HARD_FACTOR x its budget + HARD_GRACE seconds is abandoned as
a timeout row and its worker restarted (the budget itself is checked between stages)."""
POLL = 1.0
"""Seconds between two looks at the rows executing, when rows have a budget."""


def _default_client(workers: int | None):
    """A Client of a cluster started here: in this process (one worker, one thread) when
    `workers` is None, else a LocalCluster of that many worker processes of one thread."""
    import logging

    from distributed import Client, LocalCluster

    if workers is None:
        return Client(processes=False, n_workers=1, threads_per_worker=1,
                      dashboard_address=":0")
    if workers < 1:
        raise ValueError(f"workers must be at least 1; got {workers}")
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR)
    return Client(cluster)


@contextlib.contextmanager
def _connected(client, workers):
    """The Client to use, and the one to close afterwards (none when the caller gave it)."""
    if client is None:
        own = _default_client(workers)
    elif isinstance(client, str):
        from distributed import Client
        own = Client(client)
    else:
        yield client
        return
    try:
        yield own
    finally:
        cluster = own.cluster
        own.close()
        if cluster is not None:
            cluster.close()


def _failed_row(instance: Instance, error: BaseException) -> dict:
    """The row of an instance whose task itself failed (its worker died too often, or it
    was cancelled): an error row, not a dead run."""
    row = {c: None for c in COLUMNS}
    row.update(benchmark=instance.benchmark, onnx=instance.onnx, vnnlib=instance.vnnlib,
               timeout=instance.timeout, witnesses=0, verdicts={},
               **work.failure_of(error, "task"))
    return row


def run_suite(instances, *, client=None, out=None, results=None, timeout=None, progress=True,
              workers=None, samples=8, splits=DEFAULT_SPLITS, check=True, tightened=None,
              redo=()):
    """Run a suite: certify each network's import, and per instance read the property,
    bound the float32 margin, tighten the property and judge the counterexamples given for
    it, on Dask (docs/suites.md). Needs the `suite` extra (`pip install ncet[suite]`).

    Args:
        instances: A VNN-COMP `instances.csv` path (onnx,vnnlib,timeout rows, paths relative
            to its folder) or a list of (onnx, vnnlib[, timeout]) rows.
        client: None (a cluster started here and closed at the end: see `workers`), a
            `distributed.Client`, or a scheduler's address ("tcp://HOST:PORT").
        out: A JSON-lines file: each finished row is appended to it at once (and synced);
            rows it already holds are not computed again, and the whole table is returned.
        results: A folder of VNN-COMP counterexamples
            (`[<benchmark>/]<year>__<tool>__<onnx>_<vnnlib>.counterexample`), or None.
        timeout: Seconds per instance (its own stages; None: the CSV's timeout column). The
            budget is checked after each stage: a row over it is a "timeout" row.
        progress: Show a progress bar (a notebook's widget, else a line on stderr).
        workers: With `client=None`: None for one worker thread in this process, or the
            number of worker processes of a LocalCluster.
        samples: `check_onnx(samples_per_scale=)` for each network's certificate.
        splits: `float_margin(splits=)` for properties of at most 16 inputs (others: 1);
            None: the margin's own default.
        check: Certify each network's import (`check_onnx`); False skips it.
        tightened: A folder to write each tightened property to
            (`<onnx stem>_<vnnlib stem>.tightened.vnnlib`), or None.
        redo: Outcomes to compute again when `out` holds them, e.g. ("error", "timeout").

    Returns:
        A pandas DataFrame, one row per instance in the order given (columns:
        `ncet.suites.COLUMNS`, docs/suites.md).

    Raises:
        FileNotFoundError: No such instances file.
        ValueError: A malformed instances row, or an `out` that is not a suite's table.
        ImportError: dask, distributed or pandas is not installed.

    Example:
        >>> table = ncet.run_suite("vnncomp/acasxu/instances.csv", out="acasxu.jsonl")
        >>> table.groupby("outcome").size()
    """
    import pandas as pd

    rows = read_instances(instances)
    done = read_table(out) if out is not None else {}
    todo = [r for r in rows if r.key not in done or done[r.key].get("outcome") in redo]
    options = work.Options(samples=samples, splits=splits, check=check,
                           results=None if results is None else str(results),
                           tightened=None if tightened is None else str(tightened),
                           timeout=timeout)
    if todo:
        if out is not None:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
        bar = progress_bar(len(todo)) if progress else None
        try:
            with _connected(client, workers) as dask:
                _run(dask, todo, options, out, done, bar)
        finally:
            if bar is not None:
                bar.close()
    return pd.DataFrame([{c: done[r.key].get(c) for c in COLUMNS} for r in rows],
                        columns=list(COLUMNS))


def _executing(dask_worker) -> list[str]:
    """The keys a worker is executing now (run on each worker by `Client.run`)."""
    return [str(task.key) for task in dask_worker.state.executing]


def _run(dask, todo, options, out, done, bar) -> None:
    from distributed import wait

    networks = {}
    for instance in todo:
        if instance.onnx not in networks:
            networks[instance.onnx] = dask.submit(work.import_network, instance.onnx,
                                                  options, pure=False)
    which = {}
    for instance in todo:
        future = dask.submit(work.run_row, networks[instance.onnx], instance, options,
                             pure=False)
        which[future.key] = (future, instance)

    def record(instance: Instance, row: dict) -> None:
        if out is not None:
            append_row(out, row)
        done[instance.key] = row
        if bar is not None:
            bar.update(row)

    pending = {future for future, _ in which.values()}
    budgets = options.timeout is not None or any(i.timeout for _, i in which.values())
    started: dict[str, tuple[float, str]] = {}
    while pending:
        try:
            finished, pending = wait(pending, timeout=POLL, return_when="FIRST_COMPLETED")
        except TimeoutError:
            finished = ()
        for future in finished:
            instance = which[future.key][1]
            try:
                row = future.result()
            except Exception as error:  # noqa: BLE001 (a lost task is a row, not a dead run)
                row = _failed_row(instance, error)
            record(instance, row)
        if budgets and pending:
            for future, instance in _overdue(dask, pending, which, started, options):
                pending.discard(future)
                record(instance, _abandoned(dask, future, instance, *started[future.key]))


def _overdue(dask, pending, which, started, options):
    """The pending rows that have been executing for longer than `HARD_FACTOR` times their
    budget plus `HARD_GRACE`."""
    now = time.monotonic()
    try:
        executing = dask.run(_executing)
    except Exception:  # noqa: BLE001 (a worker gone between two polls: ask next time)
        return []
    keys = {}
    for worker, running in executing.items():
        for key in running:
            keys[key] = worker
            started.setdefault(key, (now, worker))
    overdue = []
    for future in pending:
        instance = which[future.key][1]
        budget = options.timeout if options.timeout is not None else instance.timeout
        if budget is None or future.key not in keys:
            continue
        if now - started[future.key][0] > budget * HARD_FACTOR + HARD_GRACE:
            overdue.append((future, instance))
    return overdue


def _abandoned(dask, future, instance: Instance, since: float, worker: str) -> dict:
    """A row still executing long after its budget: cancelled, and its worker restarted
    (when a nanny runs it) so that the computation stops; a timeout row."""
    future.cancel()
    try:
        answer = (dask.restart_workers([worker], raise_for_error=False) or {}).get(worker)
        stopped = f"its worker {worker} restarted" if answer in (None, "OK") else \
            f"restarting its worker {worker} failed ({answer})"
    except Exception:  # noqa: BLE001 (no nanny, e.g. a worker in this process)
        stopped = f"its computation left running on {worker}"
    row = _failed_row(instance, TimeoutError())
    row.update(outcome="timeout", reason="timeout", stage="task", worker=worker, message=(
        f"still running {time.monotonic() - since:.3g} s after it started, more than "
        f"{HARD_FACTOR:g} times its budget plus {HARD_GRACE:g} s; {stopped}"))
    return row


__all__ = ["DEFAULT_SPLITS", "run_suite"]
