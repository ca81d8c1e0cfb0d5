"""The command line's options, each declared once in :data:`OPTIONS`.

One row per option: its flag, the library keyword it becomes, its type, default and help,
the commands that offer it, where its value goes (``to``: ``synthesize``, ``tuning`` (a
mechanism's option, passed only when set), ``sampler``, ``plan``, ``combine_frame``; empty
when the CLI uses the value itself); which mechanisms it applies to is the library's rule
(:func:`dpsynth.release.settings.applies`). argparse's ``add_argument`` calls
(:func:`add_options`) for every command, the whole-table ones included, the flags library
errors are spelled with (:func:`flag_of`, :data:`FLAGS`) and the library keyword arguments
(:func:`keywords`) all follow from it.

The rules a value must follow are the library's settings objects' (the CLI makes them
before it charges a budget or reads a file); this table only says which flag feeds which
keyword. Import-light on purpose (the standard library, the registry, the settings and the
table spec's constants): a usage error is refused before numpy, pandas or Stan are imported.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpsynth import sampler
from dpsynth.errors import InputError
from dpsynth.mechanisms import registry
from dpsynth.mechanisms.registry import PH_CONSISTENCY, PH_DRAWS, Mechanism
from dpsynth.privacy import relations
from dpsynth.release import settings
from dpsynth.table.spec import TABLE_ADAPT_DELTA, TABLE_ITER_SAMPLING

COMMANDS: dict[str, tuple[str, str]] = {
    "synthesize": (
        "release synthetic data with a privacy report",
        "Release m synthetic datasets under a total privacy budget --epsilon.",
    ),
    "plan": (
        "expected utility of each mechanism, from a PUBLIC reference file (spends no budget)",
        "Run the candidate mechanisms on a public reference file (an earlier period, a "
        "public-use sample) as if it were the confidential data, and print the expected "
        "utility of each, best first. Never give it the confidential data.",
    ),
    "combine": (
        "combine inferences from m synthetic datasets (Liu, Theorem 7)",
        "Per-set estimate and variance of a mean or proportion, combined across sets.",
    ),
    "synthesize-table": (
        "release a whole synthetic table (several confidential columns, one budget)",
        "Release m synthetic copies of a table under a total budget --epsilon: the "
        "confidential columns of --spec in order, each a censored regression on the public "
        "columns and the columns before it (book: A whole table).",
    ),
    "plan-table": (
        "try a table spec on a public reference file first",
        "Run the same table release on a PUBLIC file and print the plan: per column its "
        "epsilon, convergence and utility (nothing confidential is read).",
    ),
    "init-spec": (
        "write a starter table spec from a PUBLIC file (never the confidential one)",
        "Read a public file (a public-use sample, an earlier period) and write a table spec "
        "with each column's type, model, bounds or levels as seen there, every guess marked "
        "'confirm' for the curator to check; nothing else.",
    ),
}
"""Subcommand -> (one-line summary, description), in the order ``dpsynth --help`` lists them."""


class _LazyChoices:
    """A tuple of choices defined in a library module, imported only when argparse asks."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def _values(self) -> tuple[str, ...]:
        """The names, read from the module's source where they are a literal tuple (no import:
        a usage error stays cheap); otherwise from the imported module (e.g. a dict's keys)."""
        import importlib
        import importlib.util

        spec = importlib.util.find_spec(self.module)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            literal = _literal_assignment(Path(spec.origin).read_text(), self.name)
            if literal is not None:
                return literal
        return tuple(getattr(importlib.import_module(self.module), self.name))

    def __contains__(self, value: object) -> bool:
        return value in self._values()

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())

    def __repr__(self) -> str:  # what help's %(choices)s and sphinx-argparse print
        return ", ".join(self._values())


def _literal_assignment(source: str, name: str) -> tuple[str, ...] | None:
    """The value of a module-level ``name = (...)`` written as a literal, else None."""
    import ast

    for node in ast.parse(source).body:
        target = getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
        if isinstance(target, ast.Name) and target.id == name and node.value is not None:
            try:
                return tuple(ast.literal_eval(node.value))
            except ValueError:
                return None
    return None


MODELS = _LazyChoices("dpsynth.models.catalogue", "MODELS")
"""The shipped models' names (``dpsynth.models.catalogue.MODELS``), loaded when argparse asks."""


def centring_arg(text: str) -> str | dict[str, Any]:
    """``--centring``: ``none``, ``saturated``, or a JSON object of public parameter values."""
    if text in ("none", "saturated"):
        return text
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            "give none, saturated, or public parameter values as a JSON object, "
            'e.g. \'{"beta": [1.1], "phi": 0.4}\''
        )
    return value


def _mechanism_help() -> str:
    """``--mechanism``'s help: each mechanism's label and summary, from the registry."""
    items = (f"{n} ({m.label}): {m.summary}" for n, m in registry.MECHANISMS.items())
    return ("; ".join(items) + " (book: Which mechanism for my data?)").replace("%", "%%")


@dataclass(frozen=True)
class Option:
    """One command-line option, declared once (see the module docstring)."""

    flag: str  # "--epsilon"; a positional's metavar ("IN.csv")
    commands: tuple[str, ...]
    help: str = ""
    keyword: str | None = None  # the library's name for it
    to: tuple[str, ...] = ()  # the calls that take ``keyword=value``
    aliases: tuple[str, ...] = ()  # other library names that mean this option (messages)
    type: Callable[[str], Any] | None = None
    default: Any = None
    action: str | None = None
    choices: Any = None
    metavar: str | tuple[str, ...] | None = None
    nargs: int | None = None
    required: bool = False
    dest: str | None = None
    group: str | None = None  # argparse argument group (help sections)
    exclusive: str | None = None  # options sharing this name exclude each other
    requires: str | None = None  # the flag that must be given with it
    existing_file: bool = False  # a path that must exist before anything is read
    convert: Callable[[Any], Any] | None = None  # the parsed value -> the library's
    per_command: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def positional(self) -> bool:
        return not self.flag.startswith("-")

    @property
    def name(self) -> str:
        """argparse's ``dest``: the attribute of the parsed namespace."""
        return self.dest or self.flag.lstrip("-").replace("-", "_")

    def given(self, args: argparse.Namespace) -> bool:
        """Whether the user set it (a store-true flag passed, a value given: 0 is a value)."""
        value = getattr(args, self.name, None)
        return value is not None and value is not False

    @property
    def checked_input(self) -> bool:
        """Whether the release refuses it where the mechanism would ignore it (a mechanism's
        option or a public input: :func:`dpsynth.release.settings.applies`)."""
        return "tuning" in self.to or self.keyword in settings.INPUTS

    def applies_to(self, mechanism: Mechanism) -> bool:
        """Whether ``mechanism`` uses it (the library's rule, from its declaration)."""
        return not self.checked_input or settings.applies(str(self.keyword), mechanism)

    def value(self, args: argparse.Namespace) -> Any:
        """The library's value of the parsed argument."""
        raw = getattr(args, self.name)
        return self.convert(raw) if self.convert is not None and raw is not None else raw


_TUNING = "weights and tuning"
_MCMC = "MCMC"
_SBS = "modips.SBS options (--mechanism sbs)"
_SYN = ("synthesize",)
_SYN_PLAN = ("synthesize", "plan")
_TUNE = ("tuning",)
_SAMPLER = ("sampler",)
_TABLES = ("synthesize-table", "plan-table")


def _each(commands: tuple[str, ...], **overrides: Any) -> dict[str, dict[str, Any]]:
    """The same per-command overrides for each of ``commands``."""
    return {command: dict(overrides) for command in commands}


OPTIONS: tuple[Option, ...] = (
    # the input files and the outcome column
    Option("IN.csv", _SYN, "confidential data (UTF-8 CSV)", dest="input",
           aliases=("data", "dataset_sha256")),
    Option("REFERENCE.csv", ("plan",), "public reference data (UTF-8 CSV)", dest="reference"),
    Option("SYNTH.csv", ("combine",), "synthetic data CSV (all sets stacked)", dest="synth",
           aliases=("estimates", "variances", "datasets")),
    Option("DATA.csv", ("synthesize-table",), "confidential table (UTF-8 CSV)", dest="input",
           aliases=("data",)),
    Option("PUBLIC.csv", ("plan-table", "init-spec"), "public reference table (UTF-8 CSV)",
           dest="input",
           aliases=("data",)),
    Option("--spec", _TABLES, "the table spec", "spec", metavar="SPEC.toml", required=True),
    Option("--column", ("synthesize", "plan", "combine"), "the confidential outcome column",
           "column", ("synthesize", "combine_frame"), aliases=("y",), required=True,
           per_command={"plan": {"help": "the outcome column"},
                        "combine": {"help": "column to analyse"}}),
    # synthesize: the model
    Option("--model", _SYN_PLAN,
           "%(choices)s (default beta); any model with --covariates is a regression "
           "(e.g. --model negbin --covariates age,region)",
           "model", choices=MODELS, metavar="MODEL", exclusive="model",
           per_command={"plan": {"required": True, "help": "%(choices)s", "exclusive": None,
                                 "to": ("plan",)}}),
    Option("--stan-file", _SYN, "your own Stan program (dpsynth convention)", "stan_file",
           exclusive="model", existing_file=True),
    Option("--pieces", _SYN,
           "your model as pieces (parameters, prior, one record's lpdf and rng): DP by "
           "construction (book: Bringing your own model)",
           "pieces", exclusive="model", existing_file=True),
    Option("--outcome", _SYN, "%(choices)s: support of y for --stan-file models (default real)",
           "outcome", choices=_LazyChoices("dpsynth.models.catalogue", "OUTCOMES"), metavar="OUTCOME",
           requires="--stan-file"),
    Option("--mechanism", _SYN, _mechanism_help(), "mechanism", ("synthesize",),
           choices=registry.NAMES, required=True),
    # synthesize: the budget
    Option("--epsilon", (*_SYN_PLAN, *_TABLES),
           "TOTAL privacy budget of the release; each of the m sets gets epsilon/m "
           "(at most 20 without --allow-large-epsilon)",
           "epsilon", ("synthesize", "plan"), type=float, required=True,
           per_command={"plan": {"help": "total budget of the release"},
                        **_each(_TABLES, help="total budget of the table")}),
    Option("--allow-large-epsilon", (*_SYN, *_TABLES),
           "accept --epsilon above the sanity limit of 20 (the report says what it means)",
           "allow_large_epsilon", ("synthesize",), action="store_true"),
    Option("--budget-file", (*_SYN, "synthesize-table"),
           "CONFIDENTIAL privacy-budget ledger of this dataset: every attempt (refused and "
           "failed ones too) charges --epsilon before the data are read; refused if the cap "
           "would be exceeded",
           "budget_file", metavar="BUDGET.jsonl",
           per_command=_each(("synthesize-table",), help="the dataset's privacy-budget ledger")),
    Option("--skip-preflight", ("synthesize-table",),
           "release without the preflight: by default, before the budget is charged or the "
           "data read, the spec runs on its public reference file (else on a public stand-in "
           "simulated from its bounds and levels) and a column that would not converge, or a "
           "poor table verdict on the reference, is refused in one line",
           "skip_preflight", action="store_true"),
    Option("--scheduler", ("synthesize-table", "plan-table"),
           "the address of an existing Dask scheduler (tcp://HOST:8786) to run the column "
           "fits on (the cluster sees the confidential records, as a database server would); "
           "by default they run on this machine, at the same time where its cores allow",
           "client", metavar="ADDRESS"),
    Option("--budget-total", (*_SYN, "synthesize-table"),
           "the dataset's total epsilon cap, given once, when --budget-file is created",
           "budget_total", type=float, metavar="E", requires="--budget-file",
           per_command=_each(("synthesize-table",), help="cap of a new budget file")),
    Option("--drop-missing", _SYN,
           "drop records with a missing outcome instead of refusing them (needs "
           "--n-synthetic; the count goes to the confidential diagnostics); with "
           "--covariates, drop records with a missing covariate (public, so the count is "
           "in the report; a missing outcome is still refused)",
           "drop_missing", ("synthesize",), action="store_true"),
    Option("--neighbours", _SYN,
           "neighbouring databases: substitution (default, n public) or add-remove",
           "neighbours", ("synthesize",), choices=relations.NEIGHBOURS,
           default=relations.DEFAULT_NEIGHBOURS),
    Option("--n-synthetic", _SYN,
           "number of synthetic records (public; required with add-remove)",
           "n_synthetic", ("synthesize",), type=int),
    # the covariates and bounds
    Option("--covariates", _SYN_PLAN,
           "comma-separated covariate columns (treated as public, written to OUT); any "
           "--model takes them and becomes a regression",
           "covariates", aliases=("X",),
           per_command={"plan": {"help": "comma-separated public covariates"}}),
    Option("--categorical", _SYN_PLAN,
           "comma-separated covariates to dummy-code (text columns always are)"),
    Option("--bounds", _SYN_PLAN, "public bounds of the outcome (never read from the data)",
           "bounds", ("synthesize", "plan"), type=float, nargs=2, metavar=("LO", "HI"),
           convert=tuple),
    Option("--m", (*_SYN_PLAN, *_TABLES), "number of synthetic datasets (default 1)", "m",
           ("synthesize", "plan"), type=int, default=1,
           per_command=_each(_TABLES, help="number of synthetic sets (each costs)")),
    Option("--seed", (*_SYN, *_TABLES),
           "research runs only: a known seed makes the release NOT private",
           "seed", ("synthesize",), type=int,
           per_command=_each(_TABLES, help="research runs only: NOT private")),
    # synthesize: the outputs
    Option("--out", (*_SYN, "synthesize-table", "init-spec"), "synthetic data (publishable)",
           metavar="OUT.csv", required=True,
           per_command={"synthesize-table": {"help": "synthetic table"},
                        "init-spec": {"help": "write the starter spec here (default: print "
                                      "it)", "metavar": "SPEC.toml", "required": False}}),
    Option("--report", (*_SYN, "synthesize-table"), "privacy report (publishable)",
           metavar="REPORT.json", required=True,
           per_command=_each(("synthesize-table",), help="public report")),
    Option("--diagnostics", (*_SYN, "synthesize-table"),
           "CONFIDENTIAL diagnostics (bounds, censored counts, MCMC); never publish",
           metavar="DIAG.json",
           per_command=_each(("synthesize-table",),
                             help="CONFIDENTIAL diagnostics (never publish)")),
    Option("--weights-from", _SYN,
           "censor-w: public/earlier-period data to set the weights (strict DP)",
           "reference", aliases=("alpha",), metavar="REFERENCE.csv"),
    Option("--clip-to-bounds", _SYN,
           "clamp records outside --bounds to the bounds instead of refusing them "
           "(how many were clamped goes to the confidential diagnostics)",
           "clip_to_bounds", ("synthesize",), action="store_true"),
    Option("--public-utility", _SYN,
           "also publish noised utility figures in the report (mean, max-ECDF per set), "
           "spending EPS of the total --epsilon on them (needs --bounds)",
           "public_utility", ("synthesize",), type=float, metavar="EPS"),
    # the mechanisms' options (registry: Mechanism.options)
    Option("--c", _SYN, "weight scale c (Algorithms 1-2)", "c", _TUNE, type=float,
           group=_TUNING),
    Option("--g", _SYN, "weight shift g (Algorithms 1-2)", "g", _TUNE, type=float,
           group=_TUNING),
    Option("--radius", _SYN, "CW radius r (Algorithm 2)", "radius", _TUNE, type=float,
           group=_TUNING),
    Option("--reweight", _SYN,
           "re-weighting (Algorithm 3): lw/cw (k searched), censor-w (fixed k, Eq. 6)",
           "reweight", _TUNE, action="store_true", group=_TUNING),
    Option("--k", _SYN,
           "re-weighting k: starting value of the search (lw/cw), the k used (censor-w)",
           "k", _TUNE, type=float, group=_TUNING),
    Option("--downscale", _SYN,
           "factor in (0,1] applied to the weights before censoring (censor-w; censor-uw: to 1)",
           "downscale", _TUNE, type=float, group=_TUNING),
    Option("--centring", _SYN,
           "censor-w/censor-uw: clamp alpha (ll - c(x)) with c the record's saturated "
           "log-likelihood, or ll at public parameter values given as a JSON object "
           "(dpsynth's extension), e.g. '{\"beta\": [0.1, 0.3], \"kappa\": 5}'; a regression's "
           "beta has one value per design column: the intercept first, then the covariates in "
           "the order given, a categorical covariate as one column per level but its first",
           "centring", _TUNE, type=centring_arg, metavar="none|saturated|JSON", group=_TUNING,
           exclusive="centring"),
    Option("--centring-from", _SYN,
           "censor-w/censor-uw: centre at the posterior mean of the model fitted to a "
           "PUBLIC reference file (an earlier period, a public-use sample), with the same "
           "--column and --covariates; the values are public and stated in the report",
           "centring_from", aliases=("centring_from_X",), metavar="REFERENCE.csv", group=_TUNING, exclusive="centring"),
    Option("--truncation", _SYN,
           "weighted-e: record bound compared with M: alpha_i f_i from the Unweighted fit "
           "(lw-bound, default: reproduces the censoring paper's Table 1) or the maximum over "
           "the Weighted fit's draws (weighted-fit)",
           "truncation", _TUNE, choices=("weighted-fit", "lw-bound"), group=_TUNING),
    Option("--target-lipschitz", _SYN, "SW target Delta (default from epsilon)",
           "target_lipschitz", _TUNE, type=float, group=_TUNING),
    Option("--n-bins", _SYN, "PH bins (default ceil(sqrt(n)))", "n_bins", _TUNE, type=int,
           group=_TUNING),
    Option("--integer", _SYN, "PH for counts: one bin per integer in --bounds, integer output",
           "integer", _TUNE, action="store_true", group=_TUNING),
    Option("--consistency", _SYN,
           "PH: noisy counts made non-negative by clamping negatives to 0 (clamp, default: "
           "the censoring paper's supplement) or by the nearest non-negative counts keeping "
           "the noisy total (simplex: better where most bins are empty)",
           "consistency", _TUNE, choices=PH_CONSISTENCY, group=_TUNING),
    Option("--draw", _SYN,
           "PH: records drawn from the noisy shares independently (iid, default: the "
           "censoring paper's supplement) or systematically (systematic: each bin's count "
           "is its noisy share of the records to within one, without sampling noise)",
           "draw", _TUNE, choices=PH_DRAWS, group=_TUNING),
    # the sampler (dpsynth.sampler.Sampler)
    Option("--chains", (*_SYN_PLAN, *_TABLES), "default 2 (see the book's choices)", "chains", _SAMPLER,
           type=int, default=2, group=_MCMC),
    Option("--iter-warmup", (*_SYN_PLAN, *_TABLES), "warmup iterations per chain", "iter_warmup", _SAMPLER,
           type=int, default=1000, group=_MCMC),
    Option("--iter-sampling", (*_SYN_PLAN, *_TABLES), "draws kept per chain", "iter_sampling",
           _SAMPLER, type=int, default=2000, group=_MCMC,
           per_command={"plan": {"default": 1000},
                        **_each(_TABLES, default=TABLE_ITER_SAMPLING,
                                help=f"per chain (default {TABLE_ITER_SAMPLING})")}),
    Option("--adapt-delta", (*_SYN, *_TABLES),
           "step-size target in [0.5, 1) (default 0.8; 0.95-0.99 against divergences)",
           "adapt_delta", _SAMPLER, type=float, default=0.8, group=_MCMC,
           per_command=_each(_TABLES, default=TABLE_ADAPT_DELTA,
                             help=f"Stan's step-size target (default {TABLE_ADAPT_DELTA})")),
    Option("--backend", _SYN, "", "backend", _SAMPLER, choices=sampler.BACKENDS,
           group=_MCMC),
    Option("--quiet", (*_SYN, *_TABLES), "no progress on stderr", "quiet", _SAMPLER, action="store_true",
           group=_MCMC),
    # modips.SBS (Liu, Algorithm 1)
    Option("--data-type", _SYN, "binary (0/1) or gaussian (default)", "data_type", _TUNE,
           choices=("binary", "gaussian"), group=_SBS),
    Option("--known-sd", _SYN,
           "Gaussian with known standard deviation SD (sanitizes the mean only)",
           "known_sd", _TUNE, type=float, metavar="SD", group=_SBS),
    Option("--sanitization", _SYN,
           "Gaussian, unknown variance: communal or individualized (default)",
           "sanitization", _TUNE, choices=("communal", "individualized"), group=_SBS),
    Option("--allocation", _SYN,
           "individualized: share of each set's budget for the mean, in (0,1)",
           "allocation", _TUNE, type=float, metavar="W", group=_SBS),
    Option("--bounding", _SYN,
           "legitimize out-of-bound statistics: bit (default) or truncation",
           "bounding", _TUNE, choices=("bit", "truncation"), group=_SBS),
    # plan
    Option("--mechanisms", ("plan",),
           "comma-separated candidates (default: ph, censor-uw, censor-uw+reference, "
           "censor-w, censor-w+reference)",
           "mechanisms"),
    Option("--n-confidential", ("plan",),
           "records in the confidential file the release will use (a public number you "
           "state); each candidate is judged at this size (default: the reference file's size)",
           "n_confidential", ("plan",), type=int, metavar="N"),
    # combine
    Option("--estimand", ("combine",), "%(choices)s", "estimand", ("combine_frame",),
           choices=_LazyChoices("dpsynth.mechanisms.combining", "ESTIMANDS"), metavar="ESTIMAND",
           required=True),
    Option("--rule", ("combine",), "%(choices)s (default thm7; single: one set)", "rule",
           ("combine_frame",), choices=_LazyChoices("dpsynth.mechanisms.combining", "RULES"),
           default="thm7", metavar="RULE"),
    Option("--set-column", ("combine",), "column numbering the sets", "set_column",
           ("combine_frame",), default="synthetic_set"),
    Option("--json", ("plan", "combine"), "print the table as JSON", action="store_true",
           per_command={"combine": {"help": "print JSON instead of a summary"}}),
)  # fmt: skip
"""Every option of every subcommand, in the order ``--help`` lists them (a metavar keeps
argparse from listing lazy choices until it prints help)."""


def options_of(command: str) -> tuple[Option, ...]:
    """The options ``command`` offers, with that command's overrides applied."""
    return tuple(
        dataclasses.replace(o, **o.per_command.get(command, {}))
        for o in OPTIONS
        if command in o.commands
    )


_ARGPARSE_FIELDS = ("type", "choices", "metavar", "nargs", "action")


def add_option(container: Any, option: Option) -> None:
    """One ``add_argument`` call, from the option's row."""
    kwargs = {f: getattr(option, f) for f in _ARGPARSE_FIELDS if getattr(option, f) is not None}
    if option.positional:
        container.add_argument(option.name, metavar=option.flag, help=option.help or None)
        return
    if option.action is None:
        kwargs["default"] = option.default
    if option.required:
        kwargs["required"] = True
    container.add_argument(option.flag, help=option.help or None, **kwargs)


def add_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Every option of ``command`` on its parser, grouped and made exclusive as declared."""
    groups: dict[str | None, Any] = {None: parser}
    exclusive: dict[tuple[str | None, str], Any] = {}
    for option in options_of(command):
        if option.group not in groups:
            groups[option.group] = parser.add_argument_group(option.group)
        container = groups[option.group]
        if option.exclusive is not None:
            key = (option.group, option.exclusive)
            if key not in exclusive:
                exclusive[key] = container.add_mutually_exclusive_group()
            container = exclusive[key]
        add_option(container, option)


def keywords(args: argparse.Namespace, command: str, call: str) -> dict[str, Any]:
    """The keyword arguments of ``call`` that ``command``'s options give directly; a
    mechanism's options (``tuning``) only when set, as the library expects."""
    chosen = [o for o in options_of(command) if call in o.to and o.keyword]
    if call == "tuning":
        chosen = [o for o in chosen if o.given(args)]
    return {o.keyword: o.value(args) for o in chosen}


TABLE_COMMANDS = ("synthesize-table", "plan-table")
"""The commands whose library errors name a spec key unless they name one of their options."""


def flags_of(command: str) -> dict[str, str]:
    """Library parameter name -> the flag a user of ``command`` sets (from :data:`OPTIONS`)."""
    flags: dict[str, str] = {}
    for o in options_of(command):
        names = [o.keyword, *o.aliases] + ([] if o.positional else [o.name])
        flags.update({name: o.flag for name in names if name})
    return flags


def _flags() -> dict[str, str]:
    """Every command's :func:`flags_of`, the first command's flag where two differ."""
    flags: dict[str, str] = {}
    for command in reversed(COMMANDS):
        flags.update(flags_of(command))
    return flags


FLAGS: dict[str, str] = _flags()
"""Library parameter name -> the flag a CLI user sets (derived from :data:`OPTIONS`)."""


def flag_of(param: str, command: str) -> str:
    """The word a user of ``command`` knows ``param`` by: its flag; a flag or file name
    as it is; in a table command any other parameter is a key of ``--spec``."""
    flags = flags_of(command)
    if param in flags:
        return flags[param]
    if param.startswith("-") or command not in TABLE_COMMANDS:
        return param
    if param in {o.flag for o in options_of(command)}:
        return param
    return f"--spec: {param}"


def check_pairs_and_files(args: argparse.Namespace, command: str) -> None:
    """The command line's own words, which the library never sees: an option given without
    the one it ``requires``; a program file that does not exist (before anything is read)."""
    for option in options_of(command):
        if not option.given(args):
            continue
        needed = option.requires
        if needed is not None and getattr(args, needed.lstrip("-").replace("-", "_")) is None:
            raise InputError(option.flag, f"only applies with {needed}")
        path = getattr(args, option.name)
        if option.existing_file and not Path(path).is_file():
            raise InputError(option.flag, f"no such file: {path}")
