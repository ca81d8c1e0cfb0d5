"""MCMC settings of every fit (:class:`Sampler`), checked when made, without numpy.

A base module, beside ``errors``: the engine runs what a :class:`Sampler` says, the
mechanisms, releases, tables and the command line make one; the command line makes it
before any budget is charged, so a refused setting costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpsynth.errors import InputError, require_adapt_delta, require_in_range

CHAINS = (1, 64)
"""Accepted numbers of chains (each runs in its own process)."""
ITER_WARMUP = (0, 1_000_000)
"""Accepted warmup iterations per chain (0: none, the step size then is Stan's initial)."""
ITER_SAMPLING = (1, 1_000_000)
"""Accepted retained draws per chain."""
ADAPT_DELTA = (0.5, 1.0)
"""Stan's step-size target: in [0.5, 1)."""
BACKENDS = ("auto", "cmdstanpy", "pystan")
"""The Stan backends a Sampler may name (any case; None: ``DPSYNTH_STAN_BACKEND``, else auto)."""


@dataclass(frozen=True)
class Sampler:
    """MCMC settings of every fit: 2 chains x (1000 warmup + 2000 draws) by default.

    The same S = 4000 retained draws as Stan's 4 x (1000 + 1000), with fewer warmup
    iterations in all (the book's choices page). Each setting is checked when a Sampler is
    made: ``chains`` in :data:`CHAINS`, ``iter_warmup`` in :data:`ITER_WARMUP`,
    ``iter_sampling`` in :data:`ITER_SAMPLING`, ``adapt_delta`` in :data:`ADAPT_DELTA`.
    ``backend``: None (``DPSYNTH_STAN_BACKEND``, else auto) or one of :data:`BACKENDS`.
    """

    chains: int = 2
    iter_warmup: int = 1000
    iter_sampling: int = 2000
    backend: str | None = None
    quiet: bool = True
    adapt_delta: float = 0.8

    def __post_init__(self) -> None:
        require_in_range("chains", self.chains, *CHAINS)
        require_in_range("iter_warmup", self.iter_warmup, *ITER_WARMUP)
        require_in_range("iter_sampling", self.iter_sampling, *ITER_SAMPLING)
        require_adapt_delta("adapt_delta", self.adapt_delta)
        if self.backend is not None and str(self.backend).lower() not in BACKENDS:
            raise InputError(
                "backend", f"must be one of {', '.join(BACKENDS)} (got {self.backend!r})"
            )


__all__ = ["ADAPT_DELTA", "BACKENDS", "CHAINS", "ITER_SAMPLING", "ITER_WARMUP", "Sampler"]
