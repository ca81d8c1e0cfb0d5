"""The command line's tables cannot drift from the parser, the library or the registry.

Every option the parser offers is a row of ``dpsynth.cli.options_table.OPTIONS`` (and every row is an
option); every library keyword a row names is one the called function accepts
(``inspect.signature``), checked both from the table and from the keywords the CLI really
passes (the library function replaced by a recorder); ``--mechanism`` and the option checks
come from ``dpsynth.mechanisms.registry``; no function of the CLI grows past 60 lines or complexity 10.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dpsynth.cli import commands, options_table
from dpsynth.cli.options_table import OPTIONS, options_of
from dpsynth.mechanisms import registry

REPO = Path(__file__).resolve().parent.parent
CLI_MODULES = sorted((REPO / "dpsynth" / "cli").glob("*.py"))


def _subparsers() -> dict:
    parser = commands.build_parser()
    return next(a for a in parser._actions if a.dest == "command").choices


def _parser_flags(sub) -> set[str]:
    flags = set()
    for action in sub._actions:
        if action.option_strings:
            flags |= {s for s in action.option_strings if s not in ("-h", "--help")}
        else:
            flags.add(action.metavar)
    return flags


@pytest.mark.parametrize("command", list(options_table.COMMANDS))
def test_every_parser_option_is_a_table_row(command):
    sub = _subparsers()[command]
    assert _parser_flags(sub) == {o.flag for o in options_of(command)}


def test_every_row_belongs_to_a_command_and_flags_are_unique():
    for o in OPTIONS:
        assert o.commands and set(o.commands) <= set(options_table.COMMANDS), o.flag
        assert set(o.per_command) <= set(o.commands), o.flag
    flags = [o.flag for o in OPTIONS]
    assert len(flags) == len(set(flags))


@pytest.mark.parametrize("command", list(options_table.COMMANDS))
def test_flags_name_one_option_per_library_name(command):
    seen: dict[str, str] = {}
    for o in options_of(command):
        for name in {o.keyword, *o.aliases} - {None}:
            assert seen.setdefault(name, o.flag) == o.flag, (name, seen[name], o.flag)
    assert commands.FLAGS == options_table.FLAGS
    assert commands.FLAGS["reference"] == "--weights-from" and commands.FLAGS["X"] == "--covariates"


def _accepted(fn) -> set[str]:
    return set(inspect.signature(fn).parameters)


def _callees() -> dict:
    from dpsynth.mechanisms.inference import combine_frame
    from dpsynth.release.plan import plan
    from dpsynth.release.single import synthesize
    from dpsynth.sampler import Sampler

    options = set().union(*(m.options for m in registry.MECHANISMS.values()))
    return {
        "synthesize": _accepted(synthesize),
        "sampler": _accepted(Sampler),
        "plan": _accepted(plan),
        "combine_frame": _accepted(combine_frame),
        "tuning": options,  # synthesize's **tuning: a mechanism's declared options
    }


def test_every_table_keyword_is_accepted_by_its_callee():
    callees = _callees()
    for o in OPTIONS:
        for call in o.to:
            assert call in callees, (o.flag, call)
            assert o.keyword in callees[call], (o.flag, call, o.keyword)


def test_every_mechanism_option_has_a_flag():
    tuning = {o.keyword for o in OPTIONS if "tuning" in o.to}
    assert tuning == _callees()["tuning"]


class _Recorded(Exception):
    pass


def _record(monkeypatch, module, name: str) -> dict:
    seen: dict = {}

    def recorder(*args, **kwargs):
        seen.update(kwargs)
        raise _Recorded

    monkeypatch.setattr(module, name, recorder)
    return seen


def _csv(tmp_path, frame: pd.DataFrame, name: str = "in.csv") -> str:
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return str(path)


def test_synthesize_passes_only_keywords_the_library_accepts(tmp_path, monkeypatch, capsys):
    from dpsynth.release import single

    accepted = _callees()
    seen = _record(monkeypatch, single, "synthesize")
    inp = _csv(tmp_path, pd.DataFrame({"y": [0.1, 0.5, 0.9]}))
    argv = ["synthesize", inp, "--column", "y", "--mechanism", "ph", "--epsilon", "2"]
    argv += ["--bounds", "0", "1", "--n-bins", "4", "--m", "2", "--quiet"]
    argv += ["--out", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json")]
    assert commands.main(argv) == 1  # the recorder's exception: an internal error, one line
    assert "internal error (_Recorded)" in capsys.readouterr().err
    extra = set(seen) - accepted["synthesize"]
    assert extra == {"n_bins"} and extra <= registry.MECHANISMS["ph"].options
    assert seen["epsilon"] == 2.0 and seen["m"] == 2 and seen["bounds"] == (0.0, 1.0)
    assert seen["mechanism"] == "ph" and seen["n_bins"] == 4 and seen["progress"] is False
    assert set(vars(seen["sampler"])) <= accepted["sampler"]
    assert not (tmp_path / "o.csv").exists()


def test_a_zero_is_a_value(tmp_path, monkeypatch, capsys):
    """``--g 0`` reaches the library (it is not an unset option), and ``--radius 0`` is
    refused where the mechanism has no radius."""
    from dpsynth.release import single

    seen = _record(monkeypatch, single, "synthesize")
    assert commands.main(_argv(tmp_path, "--mechanism", "lw", "--g", "0", "--k", "0")) == 1
    assert seen["g"] == 0.0 and seen["k"] == 0.0 and "c" not in seen
    capsys.readouterr()
    assert commands.main(_argv(tmp_path, "--mechanism", "censor-uw", "--radius", "0")) == 2
    assert "--radius: does not apply to the censor-uw mechanism" in capsys.readouterr().err


def test_plan_and_combine_pass_only_keywords_the_library_accepts(tmp_path, monkeypatch):
    from dpsynth.mechanisms import inference
    from dpsynth.release import plan

    accepted = _callees()
    seen_plan = _record(monkeypatch, plan, "plan")
    ref = _csv(tmp_path, pd.DataFrame({"y": [0.1, 0.5, 0.9]}), "ref.csv")
    argv = ["plan", ref, "--column", "y", "--model", "beta", "--epsilon", "3", "--m", "2"]
    assert commands.main(argv + ["--n-confidential", "500"]) == 1
    assert set(seen_plan) <= accepted["plan"]
    assert seen_plan["epsilon"] == 3.0 and seen_plan["n_confidential"] == 500
    assert seen_plan["sampler"].iter_sampling == 1000  # plan's own default

    seen = _record(monkeypatch, inference, "combine_frame")
    synth = _csv(tmp_path, pd.DataFrame({"synthetic_set": [1, 1, 2, 2], "y": [1, 2, 3, 4]}))
    assert commands.main(["combine", synth, "--column", "y", "--estimand", "mean"]) == 1
    assert seen == {
        "column": "y",
        "estimand": "mean",
        "rule": "thm7",
        "set_column": "synthetic_set",
    }


def test_mechanism_choices_and_help_come_from_the_registry():
    sub = _subparsers()["synthesize"]
    action = next(a for a in sub._actions if "--mechanism" in a.option_strings)
    assert tuple(action.choices) == registry.NAMES
    for name, mechanism in registry.MECHANISMS.items():
        assert f"{name} ({mechanism.label})" in action.help
    assert not hasattr(commands, "MECHANISM_CHOICES")


def _argv(tmp_path, *extra: str) -> list[str]:
    inp = _csv(tmp_path, pd.DataFrame({"y": [0.1, 0.5, 0.9]}))
    argv = ["synthesize", inp, "--column", "y", "--epsilon", "1", "--quiet"]
    return [*argv, "--out", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json"), *extra]


@pytest.mark.parametrize(
    ("mechanism", "option", "users"),
    [
        ("censor-uw", ["--weights-from", "ref.csv"], "censor-w"),
        ("lw", ["--centring-from", "ref.csv"], "censor-w, censor-uw"),
        ("censor-uw", ["--radius", "2"], "cw"),
        ("ph", ["--known-sd", "1"], "sbs"),
        ("sbs", ["--covariates", "y"], "unweighted, lw, cw, sw, weighted-e, censor-w, censor-uw"),
    ],
)
def test_an_option_the_mechanism_ignores_is_refused_before_the_budget(
    tmp_path, capsys, mechanism, option, users
):
    """The refusal names the flag, the mechanism and those that take it (registry), before
    a budget is charged (the ledger is not created) or any file is written."""
    ledger = tmp_path / "budget.jsonl"
    (tmp_path / "ref.csv").write_text("y\n0.5\n")
    option = [str(tmp_path / a) if a == "ref.csv" else a for a in option]
    argv = _argv(tmp_path, "--mechanism", mechanism, *option, "--bounds", "0", "1")
    argv += ["--budget-file", str(ledger), "--budget-total", "5"]
    assert commands.main(argv) == 2
    err = capsys.readouterr().err
    assert err == (
        f"dpsynth: error: {option[0]}: does not apply to the {mechanism} mechanism "
        f"(only to {users})\n"
    )
    assert not ledger.exists() and not (tmp_path / "o.csv").exists()


def _a_value(option) -> object:
    """A value of the option's type (its first choice, True for a flag, else 1)."""
    if option.choices is not None:
        return next(iter(option.choices))
    return True if option.action == "store_true" else 1


def test_the_library_refuses_what_the_cli_refuses_first():
    """The CLI's early refusal (registry) and the library's own agree: every option the CLI
    refuses for a mechanism, release.synthesize refuses too, naming the same parameter."""
    from dpsynth.errors import InputError
    from dpsynth.release.single import synthesize

    refused = 0
    for option in options_of("synthesize"):
        if "tuning" not in option.to and option.flag != "--weights-from":
            continue
        for name, mechanism in registry.MECHANISMS.items():
            if option.applies_to(mechanism):
                continue
            with pytest.raises(InputError) as exc:
                synthesize(
                    [0.5, 0.6], mechanism=name, epsilon=1.0, **{option.keyword: _a_value(option)}
                )
            assert exc.value.param == option.keyword, (option.flag, name, str(exc.value))
            refused += 1
    assert refused > 100


def test_paired_options_and_program_files(tmp_path, capsys):
    assert commands.main(_argv(tmp_path, "--mechanism", "censor-uw", "--outcome", "real")) == 2
    assert capsys.readouterr().err == "dpsynth: error: --outcome: only applies with --stan-file\n"
    assert commands.main(_argv(tmp_path, "--mechanism", "ph", "--budget-total", "3")) == 2
    assert "--budget-total: only applies with --budget-file" in capsys.readouterr().err
    missing = str(tmp_path / "none.stan")
    assert commands.main(_argv(tmp_path, "--mechanism", "censor-uw", "--stan-file", missing)) == 2
    assert capsys.readouterr().err == f"dpsynth: error: --stan-file: no such file: {missing}\n"
    with pytest.raises(SystemExit) as exc:  # argparse: the exclusive options of a model
        commands.main(
            _argv(tmp_path, "--mechanism", "censor-uw", "--model", "beta", "--pieces", "p")
        )
    assert exc.value.code == 2
    assert "--pieces: not allowed with argument --model" in capsys.readouterr().err


def _combine(tmp_path, capsys, sets: list[int], *extra: str) -> tuple[int, str]:
    synth = _csv(tmp_path, pd.DataFrame({"synthetic_set": sets, "y": range(len(sets))}))
    code = commands.main(["combine", synth, "--column", "y", "--estimand", "mean", *extra])
    return code, capsys.readouterr().err


def test_combine_rules_are_the_librarys_and_stay_informative(tmp_path, capsys):
    code, err = _combine(tmp_path, capsys, [1, 1, 2, 2, 3, 3], "--rule", "single")
    assert code == 2
    assert err == (
        "dpsynth: error: --rule: 'single' combines exactly one synthetic set (got m = 3)\n"
    )
    code, err = _combine(tmp_path, capsys, [1, 1, 1, 1])
    assert code == 2
    assert err == "dpsynth: error: SYNTH.csv: rule 'thm7' needs m >= 2 synthetic sets (got 1)\n"
    code, err = _combine(tmp_path, capsys, [1, 1, 1, 1], "--rule", "single")
    assert code == 0 and err == ""


def _long_functions(path: Path, limit: int) -> list[str]:
    tree = ast.parse(path.read_text())
    return [
        f"{path.name}:{n.name} ({n.end_lineno - n.lineno + 1} lines)"
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and n.end_lineno - n.lineno + 1 >= limit
    ]


def test_cli_functions_are_short_and_simple():
    assert [f for p in CLI_MODULES for f in _long_functions(p, 60)] == []
    ruff = subprocess.run(
        [sys.executable, "-m", "ruff", "--version"], capture_output=True, text=True
    )
    if ruff.returncode != 0:
        pytest.skip("ruff is not installed: the complexity half of this test is not run")
    args = ["check", "--select", "C901", "--config", "lint.mccabe.max-complexity=10"]
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", *args, *map(str, CLI_MODULES)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_centring_from_is_passed_to_the_library_not_fitted_here(tmp_path, monkeypatch):
    """``--centring-from`` reaches :func:`dpsynth.release.single.synthesize` as the public
    file's outcome (``centring_from``) and design; the CLI fits nothing itself."""
    from dpsynth.release import single

    seen = _record(monkeypatch, single, "synthesize")
    ref = _csv(tmp_path, pd.DataFrame({"y": [0.2, 0.4, 0.6]}), "ref.csv")
    argv = _argv(tmp_path, "--mechanism", "censor-uw", "--centring-from", ref)
    assert commands.main(argv + ["--chains", "3"]) == 1
    assert list(seen["centring_from"]) == [0.2, 0.4, 0.6]
    assert seen["centring_from_X"] is None and "centring" not in seen
    assert seen["sampler"].chains == 3 and seen["public_files"]["--centring-from"]
