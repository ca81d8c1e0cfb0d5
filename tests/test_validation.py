"""One validation path (issue 50, item 4): every rule a setting must follow lives in a
library settings object, which checks it without the data and without numpy, before any
budget is charged; the command line makes these objects, calls the library and prints the
library's error with its parameter (and the parameters it mentions) spelled as flags by
the options table, and re-checks nothing."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth.cli import commands, options_table
from dpsynth.cli.options_table import flag_of
from dpsynth.errors import InputError
from dpsynth.mechanisms.combining import CombineSettings
from dpsynth.release.settings import BudgetSettings, PlanSettings, ScalarSettings
from dpsynth.sampler import Sampler

REPO = Path(__file__).resolve().parent.parent
CLI_MODULES = sorted((REPO / "dpsynth" / "cli").glob("*.py"))
POSITIONALS = {o.flag for o in options_table.OPTIONS if o.positional}


# ----------------------------------------------------------------------------- static


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def test_the_cli_imports_no_rule_from_the_library():
    """The shared argument checks (``errors.require_*``), the epsilon limits and the range
    constants are the settings objects'; a CLI module imports none of them."""
    allowed = {"InputError", "count_first", "from_data"}
    found = []
    for path in CLI_MODULES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module == "dpsynth.errors":
                found += [f"{path.name}: {a.name}" for a in node.names if a.name not in allowed]
            if isinstance(node, ast.Name | ast.Attribute):
                name = node.id if isinstance(node, ast.Name) else node.attr
                if name.startswith("EPSILON_") or name.endswith("_RANGE"):
                    found.append(f"{path.name}: {name}")
    assert found == []


def test_the_cli_raises_only_for_its_own_words():
    """Every InputError the CLI raises itself names a flag or a file (its own words: paths,
    a pair of flags), never a library parameter: those refusals are the library's."""
    bad = []
    for path in CLI_MODULES:
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "InputError"):
                continue
            param = node.args[0]
            if isinstance(param, ast.Constant):
                if not (param.value.startswith("-") or param.value in POSITIONALS):
                    bad.append(f"{path.name}:{node.lineno} {param.value!r}")
            elif not all(
                (isinstance(p, ast.Attribute) and p.attr == "flag")
                or (isinstance(p, ast.Name) and p.id in ("flag", "param", "empty_param"))
                for p in (param.values if isinstance(param, ast.BoolOp) else [param])
            ):
                bad.append(f"{path.name}:{node.lineno} {ast.unparse(param)}")
    assert bad == []


def test_errors_are_not_rewritten_by_regular_expressions():
    """flag_message spells an error through InputError.render and the options table;
    the only regular expressions left rewrite advice text (verdicts), not errors."""
    source = ast.get_source_segment(
        (REPO / "dpsynth/cli/commands.py").read_text(),
        next(
            n
            for n in _tree(REPO / "dpsynth/cli/commands.py").body
            if isinstance(n, ast.FunctionDef) and n.name == "flag_message"
        ),
    )
    assert "re." not in source and "api_words_as_flags" not in source
    assert "render" in source
    assert not hasattr(commands, "_centring_named_by_its_file")
    assert not hasattr(options_table, "check_ranges")
    assert all(not hasattr(o, "valid") for o in options_table.OPTIONS)


def test_table_commands_take_their_options_from_the_table():
    from dpsynth.cli import table_commands

    assert not hasattr(table_commands, "TABLE_FLAGS")
    source = (REPO / "dpsynth/cli/table_commands.py").read_text()
    assert "add_argument" not in source
    for command in options_table.TABLE_COMMANDS:
        assert command in options_table.COMMANDS
        assert flag_of("adapt_delta", command) == "--adapt-delta"
        assert flag_of("data", command) in ("DATA.csv", "PUBLIC.csv")
        assert flag_of("columns", command) == "--spec: columns"  # a spec key
        assert flag_of("--spec", command) == "--spec"
    assert flag_of("data", "synthesize") == "IN.csv"
    assert flag_of("columns", "synthesize") == "columns"


# ----------------------------------------------------------------------------- without numpy

NO_NUMPY = """
import sys
from dpsynth.errors import InputError
from dpsynth.mechanisms.combining import CombineSettings
from dpsynth.release.settings import BudgetSettings, PlanSettings, ScalarSettings
from dpsynth.sampler import Sampler
import dpsynth.cli.commands

Sampler(chains=4, iter_warmup=100, iter_sampling=100, adapt_delta=0.9)
ScalarSettings("ph", 2.0, m=2, bounds=(0.0, 1.0), tuning={"n_bins": 10}).validate()
ScalarSettings("censor-uw", 3.0, inputs=("model", "centring_from")).validate()
BudgetSettings(3.0, 2, 7).validate()
PlanSettings(3.0, mechanisms=("ph",), n_confidential=100).validate()
CombineSettings("y", "mean", "rubin").validate()
refused = [
    lambda: Sampler(chains=0),
    lambda: Sampler(iter_sampling=0),
    lambda: Sampler(adapt_delta=1.0),
    lambda: ScalarSettings("ph", 25.0).validate(),
    lambda: ScalarSettings("censor-uw", 3.0, tuning={"radius": 2.0}).validate(),
    lambda: ScalarSettings("ph", 3.0, inputs=("covariates",)).validate(),
    lambda: ScalarSettings("ph", 3.0, neighbours="add-remove").validate(),
    lambda: ScalarSettings("ph", 3.0, seed=-1).validate(),
    lambda: BudgetSettings(1.0, 0).validate(),
    lambda: PlanSettings(25.0).validate(),
    lambda: CombineSettings("y", "median").validate(),
]
for make in refused:
    try:
        make()
    except InputError:
        pass
    else:
        raise SystemExit(f"not refused: {make}")
assert "numpy" not in sys.modules, "a settings object imported numpy"
assert "pandas" not in sys.modules, "a settings object imported pandas"
print("ok")
"""


def test_every_settings_object_validates_without_numpy():
    proc = subprocess.run(
        [sys.executable, "-c", NO_NUMPY], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


# ----------------------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    ("make", "param"),
    [
        (lambda: Sampler(chains=65), "chains"),
        (lambda: Sampler(iter_warmup=-1), "iter_warmup"),
        (lambda: Sampler(iter_sampling=1_000_001), "iter_sampling"),
        (lambda: Sampler(chains=2.5), "chains"),
        (lambda: Sampler(adapt_delta=0.4), "adapt_delta"),
        (lambda: Sampler(backend="stan"), "backend"),
        (lambda: BudgetSettings(0.0).validate(), "epsilon"),
        (lambda: BudgetSettings(21.0).validate(), "epsilon"),
        (lambda: BudgetSettings(1.0, 10_001).validate(), "m"),
        (lambda: BudgetSettings(1.0, seed=2**63).validate(), "seed"),
        (lambda: ScalarSettings("nope", 1.0).validate(), "mechanism"),
        (lambda: ScalarSettings("ph", 1.0, n_synthetic=0).validate(), "n_synthetic"),
        (lambda: ScalarSettings("ph", 1.0, tuning={"n_bins": 0}).validate(), "n_bins"),
        (lambda: ScalarSettings("lw", 1.0, inputs=("centring_from",)).validate(), "centring_from"),
        (lambda: ScalarSettings("censor-uw", 1.0, inputs=("reference",)).validate(), "reference"),
        (lambda: ScalarSettings("sbs", 1.0, inputs=("stan_file",)).validate(), "stan_file"),
        (lambda: ScalarSettings("ph", 1.0, drop_missing=True).validate(), "n_synthetic"),
        (lambda: ScalarSettings("ph", 1.0, clip_to_bounds=True).validate(), "clip_to_bounds"),
        (lambda: ScalarSettings("ph", 2.0, public_utility=3.0).validate(), "public_utility"),
        (lambda: PlanSettings(21.0).validate(), "epsilon"),
        (lambda: PlanSettings(1.0, mechanisms=("nope",)).validate(), "mechanisms"),
        (lambda: PlanSettings(1.0, n_confidential=1).validate(), "n_confidential"),
        (lambda: CombineSettings("y", "mean", rule="nope").validate(), "rule"),
        (lambda: CombineSettings("y", "mean", level=1.0).validate(), "level"),
    ],
)
def test_each_rule_refuses_naming_its_parameter(make, param):
    with pytest.raises(InputError) as exc:
        make()
    assert exc.value.param == param, str(exc.value)


def test_a_refusal_names_the_mechanisms_that_take_the_option():
    with pytest.raises(InputError) as exc:
        ScalarSettings("censor-uw", 1.0, tuning={"radius": 2.0}).validate()
    assert str(exc.value) == "radius: does not apply to the censor-uw mechanism (only to cw)"


def test_validate_fills_in_what_follows_from_the_settings():
    checked = ScalarSettings("ph", 3, public_utility=1.0, bounds=(0.0, 1.0)).validate()
    assert checked.neighbours == "substitution" and checked.epsilon == 3.0
    assert checked.eps_utility == 1.0 and checked.m == 1
    assert BudgetSettings(2.0, 2.0).validate().m == 2  # an integral float is the integer


def test_a_mention_is_spelled_by_the_caller():
    exc = InputError("epsilon", "above the limit; pass allow_large_epsilon=True if you mean it")
    assert exc.mentions == ("allow_large_epsilon",)  # a switch written name=True
    assert exc.render(lambda p: {"epsilon": "--epsilon"}.get(p, p)) == f"--{exc}"
    flags = {"epsilon": "--epsilon", "allow_large_epsilon": "--allow-large-epsilon"}
    assert exc.render(lambda p: flags.get(p, p)) == (
        "--epsilon: above the limit; pass --allow-large-epsilon if you mean it"
    )


# ----------------------------------------------------------------------------- the CLI prints the library's


def _run(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = commands.main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def _input(tmp_path: Path) -> str:
    path = tmp_path / "in.csv"
    pd.DataFrame({"y": np.random.default_rng(1).beta(2, 2, 40)}).to_csv(path, index=False)
    return str(path)


def _synthesize(tmp_path: Path, *extra: str) -> list[str]:
    argv = ["synthesize", _input(tmp_path), "--column", "y", "--quiet"]
    argv += ["--out", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json")]
    return [*argv, *extra]


PH = ("--mechanism", "ph", "--bounds", "0", "1", "--epsilon", "1")
STAN = ("--mechanism", "censor-uw", "--epsilon", "3")

CLI_CASES = [
    (PH + ("--chains", "0"), lambda: Sampler(chains=0)),
    (PH + ("--iter-warmup", "-1"), lambda: Sampler(iter_warmup=-1)),
    (PH + ("--adapt-delta", "0.3"), lambda: Sampler(adapt_delta=0.3)),
    (PH + ("--seed", "-1"), lambda: BudgetSettings(1.0, seed=-1).validate()),
    (PH + ("--epsilon", "25"), lambda: BudgetSettings(25.0).validate()),
    (PH + ("--m", "0"), lambda: BudgetSettings(1.0, 0).validate()),
    (PH + ("--n-bins", "0"), lambda: ScalarSettings("ph", 1.0, tuning={"n_bins": 0}).validate()),
    (
        PH + ("--drop-missing",),
        lambda: ScalarSettings("ph", 1.0, bounds=(0, 1), drop_missing=True).validate(),
    ),
    (
        STAN + ("--radius", "2"),
        lambda: ScalarSettings("censor-uw", 3.0, tuning={"radius": 2.0}).validate(),
    ),
    (
        PH + ("--neighbours", "add-remove"),
        lambda: ScalarSettings("ph", 1.0, neighbours="add-remove").validate(),
    ),
]


@pytest.mark.parametrize(("extra", "make"), CLI_CASES)
def test_the_cli_prints_the_librarys_refusal(tmp_path, capsys, extra, make):
    """The line the CLI prints is the library's InputError, its parameter (and mentions)
    spelled as flags by the options table; nothing is written."""
    with pytest.raises(InputError) as exc:
        make()
    code, err = _run(_synthesize(tmp_path, *extra), capsys)
    assert code == 2
    expected = exc.value.render(lambda p: flag_of(p, "synthesize"))
    assert err == f"dpsynth: error: {expected}\n"
    assert not (tmp_path / "o.csv").exists()


def test_plan_and_combine_print_the_librarys_refusals(tmp_path, capsys):
    ref = _input(tmp_path)
    code, err = _run(["plan", ref, "--column", "y", "--model", "beta", "--epsilon", "25"], capsys)
    with pytest.raises(InputError) as exc:
        PlanSettings(25.0).validate()
    expected = exc.value.render(lambda p: flag_of(p, "plan"))
    assert code == 2 and err == f"dpsynth: error: {expected}\n"
    assert expected.startswith("--epsilon: plan compares releases up to the sanity limit")
    synth = tmp_path / "s.csv"
    pd.DataFrame({"y": [1.0, 2.0, 3.0]}).to_csv(synth, index=False)
    code, err = _run(["combine", str(synth), "--column", "y", "--estimand", "mean"], capsys)
    assert code == 2 and err.startswith("dpsynth: error: --set-column: column 'synthetic_set'")


# ----------------------------------------------------------------------------- before the charge


def _ledger(tmp_path: Path) -> Path:
    """A budget file with one earlier charge (its bytes must not change)."""
    from dpsynth.privacy import budget

    path = tmp_path / "budget.jsonl"
    budget.charge(path, dataset_sha256="0" * 64, epsilon=1.0, what="earlier", total=50.0)
    return path


@pytest.mark.parametrize(
    "bad",
    [
        {"epsilon": 25.0},
        {"m": 0},
        {"seed": -1},
        {"mechanism": "censor-uw", "radius": 2.0},
        {"mechanism": "lw", "centring_from": np.array([0.5, 0.6])},
        {"n_bins": 0},
        {"neighbours": "add-remove"},
        {"drop_missing": True},
        {"public_utility": 5.0},
        {"clip_to_bounds": True, "bounds": None},
    ],
)
def test_a_refused_setting_leaves_the_budget_file_unchanged(tmp_path, bad):
    from dpsynth.release.single import synthesize

    ledger = _ledger(tmp_path)
    before = ledger.read_bytes()
    settings = {"mechanism": "ph", "epsilon": 2.0, "bounds": (0.0, 1.0), **bad}
    with pytest.raises(InputError):
        synthesize([0.2, 0.5, 0.7], budget_file=ledger, dataset_sha256="0" * 64, **settings)
    assert ledger.read_bytes() == before


@pytest.mark.parametrize(
    "extra",
    [("--chains", "0"), ("--m", "0"), ("--adapt-delta", "1"), ("--seed", "-3")],
)
@pytest.mark.parametrize("command", ["synthesize", "synthesize-table"])
def test_the_cli_refuses_before_the_charge(tmp_path, capsys, command, extra):
    """A refused setting of synthesize or synthesize-table: the budget file is not
    created (the charge comes after the settings objects are made)."""
    ledger = tmp_path / "budget.jsonl"
    budget = ("--budget-file", str(ledger), "--budget-total", "9")
    if command == "synthesize":
        argv = _synthesize(tmp_path, *PH, *budget, *extra)
    else:
        spec = tmp_path / "spec.toml"
        spec.write_text('[columns.y]\ntype = "continuous"\nbounds = [0, 1]\n')
        argv = ["synthesize-table", _input(tmp_path), "--spec", str(spec), "--epsilon", "2"]
        argv += ["--out", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json")]
        argv += [*budget, "--quiet", *extra]
    code, err = _run(argv, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"dpsynth: error: {extra[0]}: "), err
    assert not ledger.exists()


def test_centring_values_fitted_to_a_file_name_centring_from(monkeypatch):
    """Reference centring from a public file is the library's (``centring_from``): values
    fitted to it that the model refuses name centring_from, not centring."""
    from dpsynth.release import reference
    from dpsynth.release.single import synthesize

    monkeypatch.setattr(reference, "reference_point", lambda *a, **k: {"beta1": [1.0, 2.0]})
    y = np.random.default_rng(2).beta(2, 2, 30)
    with pytest.raises(InputError) as exc:
        synthesize(y, model="beta", mechanism="censor-uw", epsilon=3.0, centring_from=y[:10])
    assert exc.value.param == "centring_from"
    assert str(exc.value).startswith(
        "centring_from: the values fitted to the public reference file: "
    )
    with pytest.raises(InputError) as both:
        synthesize(y, mechanism="censor-uw", centring="saturated", centring_from=y[:10])
    assert both.value.param == "centring_from"
