"""Checks that a user's Stan program really is the censored mechanism it claims to be.

The censoring proof (Hu, Williams & Savitsky, Section 3) needs two facts of the program:
every per-record contribution it adds to the target lies in [-M, M], and the target is
the prior plus the sum of those contributions and nothing else that depends on the data.
The shipped programs are checked once by the test suite; a ``--stan-file`` program is
checked on its own fitted draws before a release is labelled DP (:func:`check_censored`).
"""

from __future__ import annotations

import re
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


CONVENTION_DATA = ("n", "alpha", "censor", "M", "want_contrib", "want_rep", "y")
"""Data every program of the convention declares (book: "Bringing your own Stan model")."""
OPTIONAL_DATA = ("K", "X", "centre")
"""Data dpsynth also supplies: the design of a covariate model, the record centres."""
CONVENTION_OUTPUTS = ("contrib", "contrib_uncensored", "record_log_lik", "y_rep")
"""Generated quantities every program of the convention declares."""


def check_convention(stan_file: str | Path) -> None:
    """Raise InputError(``stan_file``) unless the program declares the convention's names.

    A static check of the program text, before anything is compiled or sampled: the
    data block declares the data dpsynth supplies (:data:`CONVENTION_DATA`, and
    :data:`OPTIONAL_DATA` if it uses them) and nothing else, and the generated
    quantities declare :data:`CONVENTION_OUTPUTS`. Without it a program that needs other data would fail
    inside Stan naming its own variable rather than the program.
    """
    blocks = program_blocks(engine.program_code(stan_file))
    if "data" not in blocks:
        raise InputError("stan_file", "the program has no data block (see the Stan convention)")
    data = declared_names(blocks["data"])
    missing = [v for v in CONVENTION_DATA if v not in data]
    extra = [v for v in data if v not in CONVENTION_DATA + OPTIONAL_DATA]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"does not declare the data {', '.join(missing)}")
        if extra:
            parts.append(f"declares data dpsynth cannot supply ({', '.join(extra)})")
        raise InputError(
            "stan_file",
            f"the program {' and '.join(parts)}; the data of the convention are "
            f"{', '.join(CONVENTION_DATA)} (optionally {', '.join(OPTIONAL_DATA)})",
        )
    outputs = declared_names(blocks.get("generated quantities", ""))
    missing_out = [v for v in CONVENTION_OUTPUTS if v not in outputs]
    if missing_out:
        raise InputError(
            "stan_file",
            f"the program's generated quantities do not declare {', '.join(missing_out)} "
            "(see the Stan convention)",
        )


def program_blocks(code: str) -> dict[str, str]:
    """The top-level blocks of a Stan program, ``{"data": body, ...}``, comments removed."""
    code = re.sub(r"/\*.*?\*/", " ", code, flags=re.DOTALL)
    code = re.sub(r"//[^\n]*", " ", code)
    blocks: dict[str, str] = {}
    depth, header, start = 0, [], 0
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                name, header, start = " ".join("".join(header).split()), [], i + 1
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                blocks[name] = code[start:i]
        elif depth == 0:
            header.append(ch)
    return blocks


def declared_names(body: str) -> list[str]:
    """Variables declared by the top-level statements of a block body (nested bodies skipped)."""
    top, level = [], 0
    for ch in body:
        if ch == "{":
            level += 1
        elif ch == "}":
            level -= 1
            if level == 0:
                top.append(";")
        elif level == 0:
            top.append(ch)
    names = []
    for stmt in "".join(top).split(";"):
        while re.search(r"<[^<>]*>", stmt):  # constraints such as <lower=0, upper=1>
            stmt = re.sub(r"<[^<>]*>", " ", stmt)
        while re.search(r"\[[^\[\]]*\]", stmt):  # sizes such as [n] or [want_rep ? n : 0]
            stmt = re.sub(r"\[[^\[\]]*\]", " ", stmt)
        words = stmt.split("=")[0].split()
        if len(words) >= 2 and re.fullmatch(r"[A-Za-z]\w*", words[-1]):
            names.append(words[-1])
    return names


def log_density(
    stan_file: str | Path,
    data: Mapping[str, Any],
    params: Sequence[Mapping[str, Any]],
    *,
    backend: str | None = None,
) -> np.ndarray:
    """log p(theta | data) without the Jacobian, at constrained parameter values."""
    name = engine.choose_backend(backend)
    jdata = engine._jsonable(data)
    if name == "pystan":
        # the compiled model's own stan::services module (what httpstan's log_prob and
        # transform_inits requests call), loaded in this process
        import httpstan.models

        model_name = engine.compile_program(stan_file, backend="pystan")
        module = httpstan.models.import_services_extension_module(model_name)
        out = []
        for p in params:
            unc = module.transform_inits(jdata, engine._jsonable(p))
            out.append(module.log_prob(jdata, unc, False))
        return np.asarray(out, dtype=float)
    model = engine._cmdstan_model(engine.program_code(stan_file))  # pragma: no cover - CmdStan
    values = [
        float(model.log_prob(params=dict(p), data=jdata, jacobian=False).iloc[0, 0]) for p in params
    ]
    return np.asarray(values, dtype=float)
