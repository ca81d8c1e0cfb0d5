"""httpstan gives stanc 1 s, which a busy machine exceeds; dpsynth runs the same stanc with
``STANC_TIMEOUT_S`` for its scope checks and its builds (CI ran out of time on it at a load
of 20 on 2 cores)."""

import subprocess

import pytest

pytest.importorskip("httpstan")

from dpsynth.engine import pystan_backend  # noqa: E402


def test_stanc_gets_minutes_not_a_second(monkeypatch):
    seen = {}
    real = subprocess.run

    def spy(args, **kw):
        seen.update(kw)
        return real(args, **kw)

    monkeypatch.setattr(pystan_backend.subprocess, "run", spy)
    assert (
        pystan_backend.stanc_errors("parameters { real mu; } model { mu ~ normal(0, 1); }") is None
    )
    assert seen["timeout"] == pystan_backend.STANC_TIMEOUT_S >= 60


def test_stanc_errors_still_name_the_problem():
    text = pystan_backend.stanc_errors("parameters { real mu; } model { mu ~ nromal(0, 1); }")
    assert text is not None and "nromal" in text


def test_httpstan_builds_use_the_patient_stanc(monkeypatch):
    import httpstan.compile

    monkeypatch.setattr(httpstan.compile, "compile", httpstan.compile.compile)  # restored after
    pystan_backend._patient_stanc()
    assert httpstan.compile.compile is pystan_backend.stanc
    cpp, _ = httpstan.compile.compile("parameters { real mu; }", "model_x")
    assert "model_x" in cpp
