"""Where a table's column fits run: in this process, or as tasks on ``dask.distributed``.

Column j's fit reads the CONFIDENTIAL columns before it, not their synthetic values (a
column centred ``"marginal"`` excepted: its centre is fitted to its predecessors' synthetic
values, so its fit waits for their draws), so the fits are independent of one another and
may run at the same time; only the draws, cheap and in numpy, run in order, in this process,
from the fits and the public inputs. Whatever runs the fits, each column's fit is the same
function of the same inputs and seed, so a seeded table is the same release on one process
or on a cluster.

A cluster sees the confidential records the fits read, as a database server would: the
trust boundary is the cluster (book: Scale). A fit that fails on a worker (a killed or lost
worker, a broken connection) refuses the whole table: nothing is released and the attempt is
charged. Each worker's private fit folders go with the worker, also when it is killed
(``dpsynth.engine.private_dir``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dpsynth.errors import InputError

WORKER_FAILED = (
    "the Dask worker fitting it failed ({what}): nothing was released; the attempt is charged "
    "to the budget; no file of the fit is left on the worker"
)
"""A column whose fit was lost with its worker: the table's refusal."""


def local_workers(chains: int, cores: int | None = None) -> int:
    """The in-process cluster's size: one worker per ``chains`` cores (a fit samples its
    chains in parallel), at least one; 1 means no cluster (the fits run in this process)."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, chains))


@dataclass
class Fitter:
    """Runs column fits: ``submit`` a fit, ``result`` waits for it. Without a Dask client
    the fit runs in this process when its result is asked for (in the spec's order)."""

    client: Any = None
    started: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def submit(
        self, name: str, fit: Callable[..., Any], task: Any, reads: Callable[[], tuple]
    ) -> Any:
        """Start (on a cluster) or queue (in this process) column ``name``'s fit,
        ``fit(task, *reads())``. On a cluster what it reads is made here and each input sent
        apart from the task's message (kept there while the fit holds it); in this process
        it is made when the fit runs, so that it lives while the fit does."""
        self.started[name] = time.perf_counter()
        if self.client is None:
            return (fit, task, reads)
        shared = [self.client.scatter(value, direct=False) for value in reads()]
        return self.client.submit(
            fit, task, *shared, pure=False, key=f"dpsynth-fit-{name}-{id(shared)}"
        )

    def result(self, name: str, handle: Any) -> Any:
        """Column ``name``'s fit (an ``InputError`` of the fit is raised as it is; a lost
        worker becomes an ``InputError`` naming the column)."""
        if self.client is None:
            fit, task, reads = handle
            self.started[name] = time.perf_counter()  # runs now, in order
            out = fit(task, *reads())
        else:
            out = _cluster_result(name, handle)
        self.seconds[name] = time.perf_counter() - self.started[name]
        return out

    def cancel(self, handles: list[Any]) -> None:
        """Cancel the fits not collected (a refused column ends the table)."""
        if self.client is not None:
            self.client.cancel([h for h in handles if not h.done()], force=True)


def _cluster_result(name: str, future: Any) -> Any:
    """A future's result, a worker's failure as the table's refusal."""
    try:
        return future.result()
    except (InputError, KeyboardInterrupt):
        raise
    except Exception as exc:  # KilledWorker, CommClosedError, CancelledError, OSError, ...
        what = type(exc).__name__
        raise InputError("client", f"column {name!r}: {WORKER_FAILED.format(what=what)}") from None


@contextmanager
def fitter(client: Any, chains: int, progress: bool) -> Iterator[Fitter]:
    """A :class:`Fitter` on ``client`` (a ``distributed.Client`` or a scheduler address),
    or, without one, on an in-process cluster of :func:`local_workers` workers (none when
    that is one: the fits run in this process). A cluster made here is closed on exit."""
    if client is None and local_workers(chains) > 1:
        client = _local_client(local_workers(chains))
        own = True
    elif isinstance(client, str):
        client = _connect(client)
        own = True
    else:
        own = False
        if client is not None and not hasattr(client, "submit"):
            raise InputError(
                "client", f"must be a distributed.Client or an address (got {client!r})"
            )
    if progress and client is not None:
        where = "an in-process Dask cluster" if own else "the Dask cluster"
        print(f"[dpsynth] column fits run on {where}: {_workers(client)} workers", file=sys.stderr)
    try:
        yield Fitter(client)
    finally:
        if own:
            client.close()
            cluster = getattr(client, "cluster", None)
            if cluster is not None:
                cluster.close()


def _local_client(workers: int) -> Any:
    """An in-process cluster of ``workers`` single-threaded worker processes that may
    start the sampler's own processes (not daemonic), silent."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.worker.daemon": False, "logging.distributed": "error"}):
        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
        return Client(cluster)


def _connect(address: str) -> Any:
    """A client of the existing cluster at ``address`` (refused in one line if unreachable)."""
    from distributed import Client

    try:
        return Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        what = type(exc).__name__
        raise InputError("client", f"no Dask scheduler at {address!r} ({what})") from None


CONNECT_TIMEOUT = "5s"
"""How long to wait for a scheduler that does not answer."""


def check_scheduler(client: Any) -> None:
    """Refuse, before any budget is charged, a scheduler address that does not answer
    (a ``distributed.Client`` or None passes as it is)."""
    if isinstance(client, str):
        _connect(client).close()


def _workers(client: Any) -> int:
    return len(client.scheduler_info().get("workers", {}))


__all__ = ["Fitter", "check_scheduler", "fitter", "local_workers"]
