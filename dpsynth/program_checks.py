"""Checks that a user's Stan program really is the censored mechanism it claims to be.

The censoring proof (Hu, Williams & Savitsky, Section 3) needs two facts of the program:
every per-record contribution it adds to the target lies in [-M, M], and the target is
the prior plus the sum of those contributions and nothing else that depends on the data.
The shipped programs are checked once by the test suite; a ``--stan-file`` program is
checked on its own fitted draws before a release is labelled DP (:func:`check_censored`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpsynth import engine
from dpsynth.errors import InputError

RTOL = 1e-6
"""Relative tolerance of the target identity (Stan's log density is computed in doubles)."""


def check_censored(
    stan_file: str | Path,
    data: Mapping[str, Any],
    fit: engine.StanFit,
    censor_bound: float,
    *,
    n_draws: int = 4,
    backend: str | None = None,
) -> None:
    """Raise InputError(``stan_file``) unless the program clamps and targets as it should.

    1. ``contrib`` (S x n) is written and every entry lies in [-M, M];
    2. at ``n_draws`` retained draws, log p(theta | data) - log p(theta | alpha = 0)
       equals the sum of that draw's contributions (the alpha = 0 density is the prior:
       every contribution of a zero-weight record is 0).
    """
    contrib = getattr(fit, "contrib", None)
    n = int(data["n"])
    if contrib is None or np.ndim(contrib) != 2 or np.shape(contrib)[1] != n:
        raise InputError(
            "stan_file", "the program does not write `contrib` (one value per record per draw)"
        )
    M = float(censor_bound)
    if not np.all(np.isfinite(contrib)) or float(np.max(np.abs(contrib))) > M * (1 + 1e-9):
        raise InputError(
            "stan_file",
            "the program's contributions are not clamped to [-M, M]; it is not a censored "
            "mechanism (see the book's page on the Stan convention)",
        )
    S = contrib.shape[0]
    picks = np.unique(np.linspace(0, S - 1, min(n_draws, S)).astype(int))
    params = [fit.draw(int(s)) for s in picks]
    full = log_density(stan_file, data, params, backend=backend)
    prior = log_density(stan_file, dict(data, alpha=np.zeros(n)), params, backend=backend)
    expected = contrib[picks].sum(axis=1)
    if not np.allclose(full - prior, expected, rtol=RTOL, atol=RTOL * (1 + n * M)):
        raise InputError(
            "stan_file",
            "the program's target is not its prior plus the sum of its clamped contributions "
            "(`contrib`); it is not a censored mechanism",
        )


def log_density(
    stan_file: str | Path,
    data: Mapping[str, Any],
    params: Sequence[Mapping[str, Any]],
    *,
    backend: str | None = None,
) -> np.ndarray:
    """log p(theta | data) without the Jacobian, at constrained parameter values."""
    name = engine.choose_backend(backend)
    code = engine.program_code(stan_file)
    if name == "pystan":
        engine._ensure_event_loop_ok()
        model = engine._pystan_model(code, dict(data), 1)
        out = []
        for p in params:
            unc = model.unconstrain_pars(dict(p))
            out.append(model.log_prob(unc, adjust_transform=False))
        return np.asarray(out, dtype=float)
    model = engine._cmdstan_model(code)  # pragma: no cover - needs CmdStan
    jdata = engine._jsonable(data)
    values = [
        float(model.log_prob(params=dict(p), data=jdata, jacobian=False).iloc[0, 0]) for p in params
    ]
    return np.asarray(values, dtype=float)
