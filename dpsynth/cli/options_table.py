"""The command line's options, each declared once in :data:`OPTIONS`.

One row per option: its flag, the library keyword it becomes, its type, default and help,
the commands that offer it, where its value goes (``to``: ``synthesize``, ``tuning`` (a
mechanism's option, passed only when set), ``sampler``, ``plan``, ``combine_frame``; empty
when the CLI uses the value itself) and which mechanisms it applies to (from
:mod:`dpsynth.mechanisms.registry`). argparse's ``add_argument`` calls (:func:`add_options`), the flag
names in messages (:data:`FLAGS`) and the library keyword arguments (:func:`keywords`) all
follow from it.

Import-light on purpose (standard library and the registry only): a usage error is refused
before numpy, pandas or Stan are imported.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpsynth.errors import InputError
from dpsynth.mechanisms import registry
from dpsynth.mechanisms.registry import PH_CONSISTENCY, PH_DRAWS, Mechanism
from dpsynth.privacy import relations

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


def _posterior(mechanism: Mechanism) -> bool:
    """Mechanisms made by a (pseudo) posterior fit: they take a model and covariates."""
    return mechanism.name in registry.POSTERIOR_NAMES


def _takes_reference(mechanism: Mechanism) -> bool:
    """Mechanisms whose weights can come from a public reference file."""
    return mechanism.reference


def _takes_centring(mechanism: Mechanism) -> bool:
    """Mechanisms that centre the clamped log-likelihood."""
    return "centring" in mechanism.options


def _mechanism_help() -> str:
    """``--mechanism``'s help: each mechanism's label and summary, from the registry."""
    items = (f"{n} ({m.label}): {m.summary}" for n, m in registry.MECHANISMS.items())
    return ("; ".join(items) + " (book: Which mechanism for my data?)").replace("%", "%%")


SEED_MAX = 2**63 - 1


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
    valid: tuple[int, int] | None = None  # accepted integer range
    applies: Callable[[Mechanism], bool] | None = None  # else: its keyword in the options
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

    def applies_to(self, mechanism: Mechanism) -> bool:
        """Whether ``mechanism`` uses it (registry: ``options``, ``reference``, runner)."""
        if self.applies is not None:
            return self.applies(mechanism)
        if "tuning" in self.to:
            return self.keyword in mechanism.options
        return True

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

OPTIONS: tuple[Option, ...] = (
    # the input files and the outcome column
    Option("IN.csv", _SYN, "confidential data (UTF-8 CSV)", dest="input",
           aliases=("data", "dataset_sha256")),
    Option("REFERENCE.csv", ("plan",), "public reference data (UTF-8 CSV)", dest="reference"),
    Option("SYNTH.csv", ("combine",), "synthetic data CSV (all sets stacked)", dest="synth",
           aliases=("estimates", "variances", "datasets")),
    Option("--column", ("synthesize", "plan", "combine"), "the confidential outcome column",
           "column", ("synthesize", "combine_frame"), aliases=("y",), required=True,
           per_command={"plan": {"help": "the outcome column"},
                        "combine": {"help": "column to analyse"}}),
    # synthesize: the model
    Option("--model", _SYN_PLAN,
           "%(choices)s (default beta); any model with --covariates is a regression "
           "(e.g. --model negbin --covariates age,region)",
           "model", choices=MODELS, metavar="MODEL", exclusive="model", applies=_posterior,
           per_command={"plan": {"required": True, "help": "%(choices)s", "exclusive": None,
                                 "to": ("plan",)}}),
    Option("--stan-file", _SYN, "your own Stan program (dpsynth convention)", "stan_file",
           exclusive="model", applies=_posterior, existing_file=True),
    Option("--pieces", _SYN,
           "your model as pieces (parameters, prior, one record's lpdf and rng): DP by "
           "construction (book: Bringing your own model)",
           "pieces", exclusive="model", applies=_posterior, existing_file=True),
    Option("--outcome", _SYN, "%(choices)s: support of y for --stan-file models (default real)",
           "outcome", choices=_LazyChoices("dpsynth.models.catalogue", "OUTCOMES"), metavar="OUTCOME",
           requires="--stan-file"),
    Option("--mechanism", _SYN, _mechanism_help(), "mechanism", ("synthesize",),
           choices=registry.NAMES, required=True),
    # synthesize: the budget
    Option("--epsilon", _SYN_PLAN,
           "TOTAL privacy budget of the release; each of the m sets gets epsilon/m "
           "(at most 20 without --allow-large-epsilon)",
           "epsilon", ("synthesize", "plan"), type=float, required=True,
           per_command={"plan": {"help": "total budget of the release"}}),
    Option("--allow-large-epsilon", _SYN,
           "accept --epsilon above the sanity limit of 20 (the report says what it means)",
           "allow_large_epsilon", ("synthesize",), action="store_true"),
    Option("--budget-file", _SYN,
           "CONFIDENTIAL privacy-budget ledger of this dataset: every attempt (refused and "
           "failed ones too) charges --epsilon before the data are read; refused if the cap "
           "would be exceeded",
           "budget_file", metavar="BUDGET.jsonl"),
    Option("--budget-total", _SYN,
           "the dataset's total epsilon cap, given once, when --budget-file is created",
           "budget_total", type=float, metavar="E", requires="--budget-file"),
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
           "n_synthetic", ("synthesize",), type=int, valid=(1, 100_000_000)),
    # the covariates and bounds
    Option("--covariates", _SYN_PLAN,
           "comma-separated covariate columns (treated as public, written to OUT); any "
           "--model takes them and becomes a regression",
           "covariates", aliases=("X",), applies=_posterior,
           per_command={"plan": {"help": "comma-separated public covariates"}}),
    Option("--categorical", _SYN_PLAN,
           "comma-separated covariates to dummy-code (text columns always are)"),
    Option("--bounds", _SYN_PLAN, "public bounds of the outcome (never read from the data)",
           "bounds", ("synthesize", "plan"), type=float, nargs=2, metavar=("LO", "HI"),
           convert=tuple),
    Option("--m", _SYN_PLAN, "number of synthetic datasets (default 1)", "m",
           ("synthesize", "plan"), type=int, default=1, valid=(1, 10_000)),
    Option("--seed", _SYN, "research runs only: a known seed makes the release NOT private",
           "seed", ("synthesize",), type=int, valid=(0, SEED_MAX)),
    # synthesize: the outputs
    Option("--out", _SYN, "synthetic data (publishable)", metavar="OUT.csv", required=True),
    Option("--report", _SYN, "privacy report (publishable)", metavar="REPORT.json",
           required=True),
    Option("--diagnostics", _SYN,
           "CONFIDENTIAL diagnostics (bounds, censored counts, MCMC); never publish",
           metavar="DIAG.json"),
    Option("--weights-from", _SYN,
           "censor-w: public/earlier-period data to set the weights (strict DP)",
           "reference", aliases=("alpha",), metavar="REFERENCE.csv",
           applies=_takes_reference),
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
           "centring_from", metavar="REFERENCE.csv", group=_TUNING, exclusive="centring",
           applies=_takes_centring),
    Option("--truncation", _SYN,
           "weighted-e: record bound compared with M: alpha_i f_i from the Unweighted fit "
           "(lw-bound, default: reproduces the censoring paper's Table 1) or the maximum over "
           "the Weighted fit's draws (weighted-fit)",
           "truncation", _TUNE, choices=("weighted-fit", "lw-bound"), group=_TUNING),
    Option("--target-lipschitz", _SYN, "SW target Delta (default from epsilon)",
           "target_lipschitz", _TUNE, type=float, group=_TUNING),
    Option("--n-bins", _SYN, "PH bins (default ceil(sqrt(n)))", "n_bins", _TUNE, type=int,
           group=_TUNING, valid=(1, 10_000_000)),
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
    # the sampler (mechanisms.Sampler)
    Option("--chains", _SYN_PLAN, "default 2 (see the book's choices)", "chains", _SAMPLER,
           type=int, default=2, group=_MCMC, valid=(1, 64)),
    Option("--iter-warmup", _SYN_PLAN, "warmup iterations per chain", "iter_warmup", _SAMPLER,
           type=int, default=1000, group=_MCMC, valid=(0, 1_000_000)),
    Option("--iter-sampling", _SYN_PLAN, "draws kept per chain", "iter_sampling", _SAMPLER,
           type=int, default=2000, group=_MCMC, valid=(1, 1_000_000),
           per_command={"plan": {"default": 1000}}),
    Option("--adapt-delta", _SYN,
           "step-size target in [0.5, 1) (default 0.8; 0.95-0.99 against divergences)",
           "adapt_delta", _SAMPLER, type=float, default=0.8, group=_MCMC),
    Option("--backend", _SYN, "", "backend", _SAMPLER, choices=("auto", "cmdstanpy", "pystan"),
           group=_MCMC),
    Option("--quiet", _SYN, "no progress on stderr", "quiet", _SAMPLER, action="store_true",
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
           "n_confidential", ("plan",), type=int, metavar="N", valid=(2, 100_000_000)),
    # combine
    Option("--estimand", ("combine",), "%(choices)s", "estimand", ("combine_frame",),
           choices=_LazyChoices("dpsynth.mechanisms.inference", "ESTIMANDS"), metavar="ESTIMAND",
           required=True),
    Option("--rule", ("combine",), "%(choices)s (default thm7; single: one set)", "rule",
           ("combine_frame",), choices=_LazyChoices("dpsynth.mechanisms.inference", "RULES"),
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


def _flags() -> dict[str, str]:
    """Library parameter name -> the flag a CLI user sets, from :data:`OPTIONS`."""
    flags: dict[str, str] = {}
    for o in OPTIONS:
        names = [o.keyword, *o.aliases] + ([] if o.positional else [o.name])
        flags.update({name: o.flag for name in names if name})
    return flags


FLAGS: dict[str, str] = _flags()
"""Library parameter name -> the flag a CLI user sets (derived from :data:`OPTIONS`)."""

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


def check_ranges(args: argparse.Namespace, command: str) -> None:
    """Integer options outside their declared range (the option table's ``valid``)."""
    for option in options_of(command):
        value = getattr(args, option.name, None)
        if option.valid is not None and value is not None:
            lo, hi = option.valid
            if not lo <= value <= hi:
                raise InputError(option.flag, f"must lie in [{lo}, {hi:,}] (got {value})")
