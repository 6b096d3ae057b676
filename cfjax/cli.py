"""The ``cfjax`` command: parse the arguments, build the config, call :mod:`cfjax.experiments`.

The config of a run is ``--config FILE`` (TOML, checked key by key; see
:mod:`cfjax.config`) or the papers' defaults, then ``--quick``
(:data:`cfjax.config.QUICK` / :data:`cfjax.config.AP_QUICK`), then the flag
overrides (``--seeds``, ``--decisions``, …: aliases of config keys), then
``--set KEY=VALUE`` (repeatable, on every command that builds a config; a
dotted key such as ``agent.max_attempts`` and a TOML value, checked like the
TOML file: :func:`cfjax.config.apply_overrides`). Later wins: config file <
preset < flags < ``--set``, and the last ``--set`` of a key wins. The
effective config (``DIR/config.toml``) includes every override.

    cfjax countermem run --suite all --out runs/countermem    # the main job (scripted backbone, seeds 0 1 2)
    cfjax countermem run --suite sql --out runs/x --backbone openai   # a real LLM (CFJAX_LLM_BASE_URL, CFJAX_LLM_MODEL)
    cfjax sweep --method countermem --out runs/sweep            # the pre-registered competence sweep
    cfjax doctor                                                 # which sandbox layers generated code gets here

Existing outputs. A command never overwrites silently: a non-empty ``--out``
directory (or, for ``train-selectors``, an existing output file) is refused
unless a flag says what to do, checked before anything is written:

* ``--force`` removes exactly what the command writes there (and the temp
  files of its interrupted writes), keeping every other file, then runs as
  into a fresh directory. ``countermem run``: ``config.toml``,
  ``results.json``, ``report.txt``, ``suites/<suite>/``,
  ``<suite>/split_*/`` and ``figures/<its five PNGs>``; ``antipersist run``:
  ``config.toml``, ``results.json``, ``report.txt``, ``.world_cache/``,
  ``suites/<suite>/``, ``<suite>/results.json``,
  ``<suite>/success_by_iteration.png``, ``<suite>/split_*/``; ``sweep``:
  ``sweep.json``, ``sweep.txt``, ``sweep_*.png``, ``suites/<suite>/``,
  ``point_NN*/``; ``countermem table``: ``store.json``, ``build.json``,
  ``parts/NNNNNN.npz``, ``table.npz``, ``table.json``, ``selectors.json``,
  ``suites/<suite>/``; ``countermem report``: the five figure PNGs in the
  figure directory; ``train-selectors``: replaces the output file;
  ``upliftmem controlled``: ``results.json``, ``report.txt``; ``upliftmem
  stores``: those and ``suites/<suite>/``.
  Directories the removal leaves empty are removed too; a symbolic link
  is removed as a link (its target is never entered or touched).
* ``--resume`` continues: only ``countermem table`` can (its store, build
  settings and finished part files are checked and reused; other settings are
  refused). The other commands refuse ``--resume`` with one line (their
  runners do not save partial results), whatever the directory holds.

Errors. A user error — a bad flag value, config file, grid file, a corrupt
or inconsistent input file (:class:`cfjax.infra.io.CorruptFileError`), an
output that exists (:class:`cfjax.infra.io.OutputExistsError`), a missing or
unreadable path — prints one line ``cfjax: <message>`` on stderr and exits
with status 2 (every :class:`cfjax.infra.io.UserError`, which
:class:`cfjax.config.ConfigError` is, and ``FileNotFoundError``,
``IsADirectoryError``, ``NotADirectoryError``, ``PermissionError``,
``FileExistsError``), and a ``cfjax.plugins`` entry point that fails to load
(:class:`cfjax.registry.PluginLoadError`, naming it). Any
other exception is a bug or an environment failure: one line
``cfjax: internal error: <type>: <message> (run with --debug for the
traceback)`` and status 1. Ctrl-C exits 130 with ``cfjax: interrupted``.
The global ``--debug`` (before or after the subcommand) re-raises every
exception with its traceback instead.

Length: one module holds the whole command line — every subcommand's flags, help texts and
one-line error policy — so that each command is read (and its contract checked) in one place;
the work itself is in :mod:`cfjax.experiments`.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import sys

from cfjax.infra.io import UserError
from cfjax.registry import PluginLoadError

__all__ = ["main", "build_parser", "UsageError"]


class UsageError(UserError):
    """A command line argparse refuses (unknown flag, bad value, missing argument)."""


class _LazyHelp(argparse.HelpFormatter):
    """Help strings may be callables, evaluated only when help is printed (row and suite lists come from
    the plugin registries, which ``cfjax --help`` should not have to import)."""

    def _format_action(self, action: argparse.Action) -> str:
        if callable(action.help):
            action = copy.copy(action)
            action.help = action.help()
        return super()._format_action(action)


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (:class:`UsageError`) instead of usage text and ``exit(2)``;
    help strings may be callables (:class:`_LazyHelp`)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _LazyHelp)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        sub = self.prog.removeprefix("cfjax").strip()  # "countermem run"; printed after "cfjax: "
        raise UsageError(f"{sub + ': ' if sub else ''}{message} (see {self.prog} --help)")


def _log(s: str) -> None:
    print(s, flush=True)


def _int_at_least(lo: int):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {v}")
        return v

    parse.__name__ = "int"  # argparse names the type in some messages
    return parse


_pos_int = _int_at_least(1)
_seed_int = _int_at_least(0)


def _existing(args: argparse.Namespace) -> str:
    """``--force`` / ``--resume`` as the library's ``existing`` argument."""
    return "force" if getattr(args, "force", False) else "resume" if getattr(args, "resume", False) else "refuse"


def _replace(cfg, flag: str, **changes):
    """``dataclasses.replace`` whose refusal (a ``__post_init__`` range check) names the flag."""
    from cfjax.config import ConfigError

    try:
        return dataclasses.replace(cfg, **changes)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{flag}: {' '.join(str(e).split())}") from None


def _checked(flag: str, fn, *a, **kw):
    """``fn(*a, **kw)``, its ``ValueError`` (a refused flag value) turned into a one-line user error."""
    from cfjax.config import ConfigError

    try:
        return fn(*a, **kw)
    except UserError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{flag}: {' '.join(str(e).split())}") from None


_SET_HELP = ("override one config key: KEY=VALUE with KEY a dotted path into the {cls} (e.g. {example}) and "
             "VALUE a TOML value (3, 0.5, true, [0, 1], \"text\"; a bare word is a string); repeatable, checked "
             "like a --config file. {order}")
_SET_ORDER = "Applied last: --config FILE < --quick < the other flags < --set (the last --set of a key wins)."


def _set_flag(parser: argparse.ArgumentParser, cls: str, example: str, order: str = _SET_ORDER) -> None:
    """``--set KEY=VALUE`` (repeatable) for a command that builds a config of class ``cls``."""
    parser.add_argument("--set", dest="overrides", action="append", default=None, metavar="KEY=VALUE",
                        help=_SET_HELP.format(cls=cls, example=example, order=order))


def _with_sets(cfg, args: argparse.Namespace):
    """``cfg`` with the command's ``--set KEY=VALUE`` overrides applied (after every other source)."""
    from cfjax.config import apply_overrides

    return apply_overrides(cfg, getattr(args, "overrides", None))


def _countermem_config(args: argparse.Namespace):
    """``--config`` (or the defaults), then ``--quick``, then the flag overrides, then ``--set``."""
    from cfjax.config import CounterMemConfig, load_toml, quick

    cfg = load_toml(CounterMemConfig, args.config) if args.config else CounterMemConfig()
    if getattr(args, "quick", False):
        cfg = quick(cfg)
    if getattr(args, "seeds", None) is not None:
        cfg = _replace(cfg, "--seeds", seeds=tuple(args.seeds))
    if getattr(args, "split_seeds", None) is not None:
        cfg = _replace(cfg, "--split-seeds", split_seeds=tuple(args.split_seeds))
    if getattr(args, "selector_seeds", None) is not None:
        cfg = _replace(cfg, "--selector-seeds", selector_seeds=tuple(args.selector_seeds))
    if getattr(args, "decisions", None) is not None:
        cfg = _replace(cfg, "--decisions", dqn=_replace(cfg.dqn, "--decisions", total_decisions=args.decisions))
    if getattr(args, "token_budget", None) is not None:
        cfg = _replace(cfg, "--token-budget", experiment=_replace(cfg.experiment, "--token-budget",
                                                                    token_budget=args.token_budget))
    return _with_sets(cfg, args)


def _backbone(args: argparse.Namespace):
    from cfjax.experiments.backbones import backbone_spec

    cache = False if getattr(args, "no_cache", False) else getattr(args, "cache", None)
    return _checked(f"--backbone {args.backbone}", backbone_spec, args.backbone,
                    base_url=getattr(args, "base_url", None), model=getattr(args, "model", None),
                    max_inflight=getattr(args, "max_inflight", None), cache=cache,
                    tokenizer=getattr(args, "tokenizer", None), cache_force=getattr(args, "cache_force", False))


def _agent_help() -> str:
    from cfjax.registry import AGENTS

    return " | ".join(AGENTS.names())


def _agent_flag(parser: argparse.ArgumentParser, *, several: bool) -> None:
    """``--agent``: the base agent(s) the runner drives its backbone with (:mod:`cfjax.agents`)."""
    parser.add_argument("--agent", nargs="+" if several else None, default=None, metavar="AGENT",
                        help=lambda: ("base agent(s), each run and reported (Table 1 per agent): " if several else
                                      "base agent: ") + _agent_help() + " (default: react)")


def _agent_backbone(args: argparse.Namespace):
    """The backbone spec with the one ``--agent`` (checked against the registry: one line, exit 2)."""
    from cfjax.experiments.backbones import resolve_agents

    (agent,) = resolve_agents(args.agent)
    return dataclasses.replace(_backbone(args), agent=agent)


def _executor(args: argparse.Namespace):
    from cfjax.infra.executors import resolve_executor

    return _checked("--executor", resolve_executor, getattr(args, "executor", "local"),
                    task_cpus=getattr(args, "task_cpus", None))


def _executor_flags(parser: argparse.ArgumentParser) -> None:
    from cfjax.infra.executors import EXECUTORS

    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help="where units run: local (process pool, default) or ray (joins RAY_ADDRESS, else "
                             "starts a local Ray instance; pip install 'cfjax[ray]')")
    parser.add_argument("--task-cpus", type=float, default=None,
                        help="CPUs each Ray task reserves (default 1; --executor ray only)")


def _backbone_arg(value: str) -> str:
    if value in ("scripted", "openai") or (value.startswith("hf:") and len(value) > 3):
        return value
    raise argparse.ArgumentTypeError(
        f"{value!r}: choose scripted, openai or hf:PATH (a local transformers model folder)")


def _backbone_flags(parser: argparse.ArgumentParser) -> None:
    """The backbone flags every run command shares: which model, how many calls in flight, the
    response cache and the tokenizer."""
    parser.add_argument("--backbone", type=_backbone_arg, default="scripted", metavar="{scripted,openai,hf:PATH}",
                        help="scripted (seeded simulator, default); openai (any OpenAI-compatible server: vLLM, "
                             "llama.cpp, Ollama; --base-url/--model or CFJAX_LLM_BASE_URL and CFJAX_LLM_MODEL); "
                             "hf:PATH (a local transformers model folder, never downloaded)")
    parser.add_argument("--allow-weak-sandbox", action="store_true",
                        help="run a real model's code on the Python suite even when a sandbox layer is missing "
                             "(see `cfjax doctor`)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", default=None, help="model name the server expects")
    parser.add_argument("--max-inflight", type=_pos_int, default=None,
                        help="independent LLM calls in flight at once (held-out episodes of every row, Best-of-N "
                             "drafts, probes; default 32 for an LLM, 1 for the scripted backbone); results are "
                             "identical to the serial run")
    parser.add_argument("--threads", dest="max_inflight", type=_pos_int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache", default=None, metavar="FILE",
                        help="LLM response cache shared by rows and reruns (default: "
                             "$CFJAX_CACHE_DIR/responses.sqlite or ~/.cache/cfjax/responses.sqlite; off at "
                             "temperature > 0)")
    parser.add_argument("--no-cache", action="store_true", help="no LLM response cache")
    parser.add_argument("--cache-force", action="store_true",
                        help="cache replies even at temperature > 0 (a rerun then replays the same samples)")
    parser.add_argument("--tokenizer", default=None, metavar="PATH",
                        help="a Hugging Face tokenizer folder: exact token counts for --backbone openai when the "
                             "server reports no usage")


def _runs_model_code(suite: str) -> bool:
    """Whether the suite's world runs model-written code in the OS sandbox (:mod:`cfjax.sandbox`): its
    domain declares ``untrusted_code`` (:class:`cfjax.types.DomainInfo`). A user suite (``jsonl:PATH``)
    follows its base domain (a file of Python tasks runs generated code like the built-in Python suite)."""
    from cfjax.domains import suite_base
    from cfjax.registry import DOMAINS

    base = suite_base(suite)
    return base in DOMAINS and DOMAINS.get(base).untrusted_code


def _suite_help(default: str, *, all_: bool = True, guide: bool = True) -> str:
    """``--suite`` help: the registered suites (:data:`cfjax.registry.DOMAINS`), ``all``, ``jsonl:PATH``."""
    from cfjax.registry import DOMAINS

    names = " | ".join([*DOMAINS.names(), *(["all"] if all_ else [])])
    where = "; README, 'Bring your own tasks'" if guide else ""
    return f"{names} | jsonl:PATH (your own tasks{where}) (default: {default})"


def _check_sandbox(args: argparse.Namespace, suites: list[str]) -> None:
    """A real model's code runs only with every sandbox layer, unless ``--allow-weak-sandbox``."""
    if args.backbone == "scripted" or not any(_runs_model_code(s) for s in suites):
        return
    from cfjax.sandbox import missing, require_strong

    layers = require_strong(args.allow_weak_sandbox, backbone=args.backbone)
    if missing(layers):
        _log(f"warning: running generated code without sandbox layers {', '.join(missing(layers))} "
             "(--allow-weak-sandbox)")


def _doctor(args: argparse.Namespace) -> int:
    from cfjax.sandbox import describe, missing, probe, seccomp_program

    _log_compile_cache()
    layers = probe()
    _log(f"sandbox for generated code (the Python world), as a child process on this machine gets it "
         f"(running as uid {os.geteuid()}):")
    _log(describe(layers))
    program, why = seccomp_program()
    _log(f"seccomp filter: {len(program) // 16} instructions from libseccomp" if program else f"seccomp filter: {why}")
    from cfjax.registry import DOMAINS

    for name in DOMAINS.names():  # the system tools domains need (Coq's kernel for math)
        ok, line = DOMAINS.get(name).check_system()
        if line:
            _log(f"{name} suite: {line}" + ("" if ok else " (the suite is skipped by --suite all)"))
    gone = missing(layers)
    if gone:
        _log(f"MISSING: {', '.join(gone)}. A real model's code is refused on the Python suite unless "
             "--allow-weak-sandbox; see README.md, 'Running generated code'.")
        return 1
    _log("all layers on.")
    return 0


def _log_compile_cache() -> None:
    from cfjax.infra.compile_cache import describe, resolve

    _log(describe(resolve()))


def _countermem_run(args: argparse.Namespace) -> int:
    from cfjax.config import QUICK
    from cfjax.experiments.backbones import resolve_agents
    from cfjax.experiments.common import resolve_suites
    from cfjax.experiments.countermem.runner import expand_rows, run_main

    suites = resolve_suites(args.suite)
    _check_sandbox(args, suites)
    default = ["token_budget"] if args.token_budget is not None else ["all"]  # Fig. 7 alone (with none, cf_memory)
    rows = _checked("--rows", expand_rows, args.rows or default)
    cfg = _countermem_config(args)
    max_tasks = (args.max_tasks or QUICK.max_tasks) if args.quick else args.max_tasks
    agents = resolve_agents(args.agent)
    run_main(cfg, suites=suites, rows=rows, out=args.out, backbone=_backbone(args),
             workers=args.workers, threads=args.max_inflight, max_tasks=max_tasks, quick=args.quick,
             progress=not args.no_progress, log=_log, existing=_existing(args), executor=_executor(args),
             agents=agents)
    return 0


def _countermem_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cfjax.experiments.countermem.runner import report_main
    from cfjax.infra.io import CorruptFileError, read_json

    results = Path(args.dir) / "results.json"
    if results.is_file():  # check it here: the report's own reader is not defensive
        doc = read_json(results, checksum=False)
        if not isinstance(doc, dict) or not isinstance(doc.get("summary"), dict):
            raise CorruptFileError(results, "no 'summary' object (not written by `cfjax countermem run`)")
    report_main(args.dir, out=args.out, log=_log, existing=_existing(args))
    return 0


def _countermem_table(args: argparse.Namespace) -> int:
    from cfjax.experiments.countermem.selectors import table_main

    cfg = _countermem_config(args)  # --config, then --set (the table command has no --quick or seed flags)
    suite = args.suite
    if suite.startswith("jsonl:"):  # a user's task file: validated, named jsonl-<stem>
        from cfjax.experiments.common import resolve_suites

        (suite,) = resolve_suites(suite)
    table_main(cfg, suite=suite, out=args.out, seed=args.seed, samples=args.samples,
               progress=not args.no_progress, log=_log, existing=_existing(args), executor=_executor(args))
    return 0


def _countermem_train_selectors(args: argparse.Namespace) -> int:
    from cfjax.countermem.selectors import parse_grid, parse_seeds
    from cfjax.experiments.countermem.selectors import train_selectors_main

    from cfjax.config import DQNConfig

    _checked("--seeds", parse_seeds, args.seeds)
    _checked("--grid", parse_grid, list(args.grid or []))
    cfg = DQNConfig()  # the defaults, then --decisions, then --set (the grid varies its keys per point)
    if args.decisions is not None:
        cfg = _replace(cfg, "--decisions", total_decisions=args.decisions)
    cfg = _with_sets(cfg, args)
    train_selectors_main(args.table, seeds=args.seeds, grid=args.grid or [], cfg=cfg, out=args.out,
                         n_boot=args.n_boot, log=_log, existing=_existing(args), coordinator=args.coordinator,
                         num_processes=args.num_processes, process_id=args.process_id,
                         observation=args.observation)
    return 0


def _antipersist_config(args: argparse.Namespace):
    """``--config`` (or the defaults), then ``--quick``, then the flag overrides, then ``--set``."""
    from cfjax.config import APConfig, load_toml, quick

    cfg = load_toml(APConfig, args.config) if args.config else APConfig()
    if args.quick:
        cfg = quick(cfg)
    flags = {"seeds": ("--seeds", "seeds"), "split_seeds": ("--split-seeds", "split_seeds"),
             "iterations": ("--iterations", "iterations"), "tasks": ("--tasks", "tasks_per_iteration"),
             "max_tasks": ("--max-tasks", "max_eval_tasks")}
    for attr, (flag, field) in flags.items():
        v = getattr(args, attr, None)
        if v is not None:
            cfg = _replace(cfg, flag, **{field: tuple(v) if isinstance(v, list) else v})
    return _with_sets(cfg, args)


def _antipersist_run(args: argparse.Namespace) -> int:
    from cfjax.experiments.antipersist.runner import run_main
    from cfjax.experiments.common import resolve_suites

    suites = resolve_suites(args.suite)
    _check_sandbox(args, suites)
    cfg = _antipersist_config(args)
    run_main(cfg, suites=suites, rows=args.rows, out=args.out, backbone=_agent_backbone(args), workers=args.workers,
             quick=args.quick, log=_log, existing=_existing(args), executor=_executor(args))
    return 0


def _upliftmem_config(args: argparse.Namespace):
    """``--config`` (or the defaults), then ``--quick``, then the flag overrides, then ``--set``."""
    from cfjax.config import UpliftConfig, load_toml
    from cfjax.experiments.upliftmem.runner import quick_config

    cfg = load_toml(UpliftConfig, args.config) if args.config else UpliftConfig()
    if args.quick:
        cfg = quick_config(cfg)
    if args.max_tasks is not None:
        cfg = _replace(cfg, "--max-tasks", max_tasks=args.max_tasks)
    if args.probe_strategy is not None:
        cfg = _replace(cfg, "--probe-strategy", probing=dataclasses.replace(cfg.probing, strategy=args.probe_strategy))
    return _with_sets(cfg, args)


def _upliftmem_run(args: argparse.Namespace) -> int:
    from cfjax.experiments.common import resolve_suites
    from cfjax.experiments.upliftmem.runner import run_main

    suites = resolve_suites(args.suite)
    _check_sandbox(args, suites)
    cfg = _upliftmem_config(args)
    run_main(cfg, suites=suites, rows=args.rows, out=args.out, backbone=_agent_backbone(args), workers=args.workers,
             quick=args.quick, log=_log, existing=_existing(args), executor=_executor(args))
    return 0


def _upliftmem_probes(args: argparse.Namespace) -> int:
    from cfjax.config import UpliftConfig
    from cfjax.experiments.upliftmem.runner import quick_config
    from cfjax.experiments.upliftmem.probes import probes_main

    cfg = _with_sets(quick_config(UpliftConfig()) if args.quick else UpliftConfig(), args)
    probes_main(suites=args.suite, out=args.out, quick=args.quick, seeds=args.seeds or (0,), log=_log,
                existing=_existing(args), cfg=cfg)
    return 0


def _upliftmem_probe_study(args: argparse.Namespace) -> int:
    from cfjax.experiments.upliftmem.probe_study import probe_study_main

    probe_study_main(out=args.out, seeds=args.seeds, quick=args.quick, strategies=args.strategies, log=_log,
                     existing=_existing(args))
    return 0


def _upliftmem_controlled(args: argparse.Namespace) -> int:
    from cfjax.config import UpliftConfig
    from cfjax.experiments.upliftmem.controlled import controlled_config, controlled_main

    cfg = _with_sets(_checked("--epochs", controlled_config, UpliftConfig(), quick=args.quick or args.small,
                              epochs=args.epochs), args)
    controlled_main(out=args.out, quick=args.quick, small=args.small, stores=args.stores, k_values=args.k,
                    variants=args.variants, repeats=args.repeats, backbone=args.backbone, log=_log,
                    existing=_existing(args), cfg=cfg)
    return 0


def _upliftmem_stores(args: argparse.Namespace) -> int:
    from cfjax.experiments.common import resolve_suites
    from cfjax.experiments.upliftmem.stores import stores_config, stores_main

    suites = resolve_suites([x for x in args.suite.split(",") if x] or ["sql"])
    _check_sandbox(args, suites)
    cfg = _with_sets(stores_config(quick=args.quick, max_tasks=args.max_tasks, epochs=args.epochs), args)
    stores_main(out=args.out, suites=suites, stores=args.stores, quick=args.quick, repeats=args.repeats,
                ap_row=args.ap_row, backbone=_backbone(args), log=_log, existing=_existing(args), cfg=cfg)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from cfjax.experiments.compare import CompareConfig, compare_main
    from cfjax.experiments.common import resolve_suites

    suites = resolve_suites(args.suite)
    _check_sandbox(args, suites)
    cfg = _with_sets(CompareConfig.quick() if args.quick else CompareConfig(), args)
    compare_main(suites=suites, out=args.out, quick=args.quick, workers=args.workers, backbone=_agent_backbone(args),
                 log=_log, existing=_existing(args), executor=_executor(args), cfg=cfg, only=args.methods)
    return 0


def _compare_methods_help() -> str:
    from cfjax.experiments.compare import methods

    return ("methods to run (default: countermem antipersist upliftmem; countermem always runs, it gives the "
            "none row; every registered memory system may be named): " + " ".join(methods()))


def _sweep(args: argparse.Namespace) -> int:
    from cfjax.experiments.sweep import DEFAULT_GRID, run_sweep

    run_sweep(args.method, grid=args.grid or DEFAULT_GRID, out=args.out, quick=args.quick, workers=args.workers,
              log=_log, existing=_existing(args), executor=_executor(args), sets=args.overrides or ())
    return 0


def _out_flags(parser: argparse.ArgumentParser, *, force: str, resume: str | None) -> None:
    """``--force`` / ``--resume`` (mutually exclusive) for a command that writes ``--out``."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--force", action="store_true", help=force)
    g.add_argument("--resume", action="store_true",
                   help=resume or "not supported by this command (it refuses with one line)")


def _countermem_rows_help() -> str:
    from cfjax.experiments.countermem.rows import row_names

    return "rows to run (default: all): " + " ".join(row_names())


def build_parser() -> argparse.ArgumentParser:
    from cfjax.config import AP_QUICK, QUICK

    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of any error (also accepted before the subcommand)")
    p = _Parser(prog="cfjax", description="cfjax: a JAX learning core for agent memory")
    p.add_argument("--debug", action="store_true", help="show the traceback of any error instead of one line")
    cache_help = ("JAX's persistent compilation cache: a folder, or off (default: $CFJAX_COMPILE_CACHE, else "
                  "~/.cache/cfjax/jax; cfjax.infra.compile_cache)")
    common.add_argument("--compile-cache", metavar="DIR|off", default=argparse.SUPPRESS, help=cache_help)
    p.add_argument("--compile-cache", metavar="DIR|off", default=None, help=cache_help)
    sub = p.add_subparsers(dest="method", required=True)
    cm = sub.add_parser("countermem", help="CounterMem: verified counterfactual memory")
    cms = cm.add_subparsers(dest="command", required=True)
    r = cms.add_parser("run", parents=[common],
                       help="Algorithm 1 with every baseline and ablation row on the built-in suites")
    r.add_argument("--suite", default="all", help=_suite_help("all"))
    r.add_argument("--rows", nargs="+", default=None,
                   help=_countermem_rows_help)
    r.add_argument("--out", required=True, help="output directory")
    _backbone_flags(r)
    _agent_flag(r, several=True)
    r.add_argument("--seeds", type=_seed_int, nargs="+", default=None, help="backbone seeds (default: 0 1 2)")
    r.add_argument("--split-seeds", type=_seed_int, nargs="+", default=None,
                   help="split seeds, one twin-free split each (default: 12345 1 2)")
    r.add_argument("--selector-seeds", type=_seed_int, nargs="+", default=None,
                   help="selector seeds, cycled over a suite's units (default: 0 1 2 3 4, Table 3)")
    r.add_argument("--config", default=None, help="a CounterMemConfig TOML file (see DIR/config.toml of a run)")
    r.add_argument("--decisions", type=_pos_int, default=None,
                   help="selector training decisions (default 2000, Table 3; = --set dqn.total_decisions=N)")
    r.add_argument("--max-tasks", type=_pos_int, default=None, help="cap every split (smoke tests)")
    r.add_argument("--token-budget", type=_pos_int, default=None, metavar="N",
                   help="Fig. 7 / App. E.2: CF Memory and ReasoningBank (+ MaTTS, + verified feedback) each build "
                        "from the same stream until they spent N construction tokens per unit, then are "
                        "evaluated; the report prints what each row spent (default rows: none cf_memory "
                        "token_budget; = --set experiment.token_budget=N)")
    _set_flag(r, "CounterMemConfig", "agent.max_attempts=3, store.capacity=100")
    r.add_argument("--quick", action="store_true",
                   help=f"seed {' '.join(map(str, QUICK.seeds))}, split seed "
                        f"{' '.join(map(str, QUICK.split_seeds))}, {QUICK.max_tasks} tasks per split, "
                        f"{QUICK.decisions} selector decisions")
    r.add_argument("--workers", type=_pos_int, default=None,
                   help="worker processes over (suite, split, seed) units (default: min(2, CPUs); with an "
                        "OpenAI backbone 1, and the units run on threads of this process on one shared "
                        "client: max-inflight // 4 at once, CFJAX_CONCURRENT_UNITS=N overrides)")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    _out_flags(r, force="replace a run already in --out: remove config.toml, results.json, report.txt, "
                        "suites/<suite>/, <suite>/split_*/ and figures/*.png the run wrote (other files are kept)",
               resume=None)
    _executor_flags(r)
    r.set_defaults(func=_countermem_run)

    rp = cms.add_parser("report", parents=[common], help="print the tables of a run and draw its figures (PNG)")
    rp.add_argument("dir", help="a run directory (with results.json)")
    rp.add_argument("--out", default=None, help="figure directory (default DIR/figures)")
    _out_flags(rp, force="redraw into a non-empty figure directory (its figure PNGs are replaced, other files kept)",
               resume=None)
    rp.set_defaults(func=_countermem_report)

    t = cms.add_parser("table", parents=[common], help="build a counterfactual decision table for selector training")
    t.add_argument("--suite", default="sql", help=_suite_help("sql", all_=False, guide=False))
    t.add_argument("--out", required=True, help="output directory (--resume continues a build already there)")
    t.add_argument("--seed", type=_seed_int, default=0, help="backbone / construction seed (default 0)")
    t.add_argument("--samples", type=_pos_int, default=4, help="independent draft samples per task (default 4)")
    t.add_argument("--config", default=None, help="a CounterMemConfig TOML file")
    _set_flag(t, "CounterMemConfig", "agent.max_attempts=3", order="Applied after --config FILE "
              "(the last --set of a key wins).")
    t.add_argument("--no-progress", action="store_true", help="no progress bars")
    _out_flags(t, force="start over: remove store.json, build.json, parts/, table.npz, table.json, selectors.json and "
                        "suites/<suite>/ (other files are kept)",
               resume="continue the build in --out: reuse its checked store and finished parts (same settings only)")
    _executor_flags(t)
    t.set_defaults(func=_countermem_table)

    ts = cms.add_parser("train-selectors", parents=[common], help="train many selectors at once on a decision table")
    ts.add_argument("--table", required=True, help="directory of a decision table")
    ts.add_argument("--seeds", default="0-4", help="seeds, e.g. 0-4 or 0,3,7 (default 0-4)")
    ts.add_argument("--grid", nargs="*", default=None,
                    help="hyperparameter grid, e.g. lr=1e-3,3e-4 gamma=0.9,0.95 (cartesian product)")
    ts.add_argument("--decisions", type=_pos_int, default=None,
                    help="training decisions (default 2000, Table 3; = --set total_decisions=N)")
    _set_flag(ts, "DQNConfig", "lr=3e-4, batch_size=64", order="Applied after --decisions (the last --set of a key "
              "wins); --grid varies its keys per point on top.")
    ts.add_argument("--observation", choices=("paper", "legacy", "both"), default="both",
                    help="selector observation layout(s) to train on, as stored in the table (agent.observation); "
                         "both (default) trains the grid × seeds once per stored layout and reports them side by side")
    ts.add_argument("--out", default=None, help="results JSON (default TABLE/selectors.json)")
    ts.add_argument("--n-boot", type=_pos_int, default=2000,
                    help="bootstrap resamples for the 95%% intervals against skip / top-1 / oracle (default 2000)")
    ts.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                    help="multi-process training: address of process 0 (default $CFJAX_COORDINATOR; none: one process)")
    ts.add_argument("--num-processes", type=_pos_int, default=None,
                    help="multi-process training: number of processes (default $CFJAX_NUM_PROCESSES)")
    ts.add_argument("--process-id", type=int, default=None,
                    help="multi-process training: this process, 0..N-1 (default $CFJAX_PROCESS_ID)")
    _out_flags(ts, force="replace the results JSON if it exists", resume=None)
    ts.set_defaults(func=_countermem_train_selectors)

    ap = sub.add_parser("antipersist", help="Anti-Persistence: on-demand guidance from trajectories")
    aps = ap.add_subparsers(dest="command", required=True)
    ar = aps.add_parser("run", parents=[common],
                        help="the iteration protocol with every row (held-out success by iteration)")
    ar.add_argument("--suite", default="all", help=_suite_help("all"))
    ar.add_argument("--out", required=True, help="output directory")
    ar.add_argument("--rows", nargs="+", default=None, help="rows to run (default: all)")
    _backbone_flags(ar)
    _agent_flag(ar, several=False)
    ar.add_argument("--seeds", type=_seed_int, nargs="+", default=None, help="backbone seeds (default: 42 43 44)")
    ar.add_argument("--split-seeds", type=_seed_int, nargs="+", default=None,
                    help="build/train/eval split seeds, each a bootstrap cluster (default: 12345 1 2)")
    ar.add_argument("--config", default=None, help="an APConfig TOML file (see DIR/config.toml of a run)")
    ar.add_argument("--iterations", type=_pos_int, default=None, help="iterations K (default 10)")
    ar.add_argument("--tasks", "--tasks-per-iteration", dest="tasks", type=_pos_int, default=None,
                    help="training tasks per iteration (default 50)")
    ar.add_argument("--max-tasks", type=_pos_int, default=None,
                    help="held-out tasks per iteration, spread over the split (default: all)")
    _set_flag(ar, "APConfig", "max_attempts=3, bandit.rho=0.6")
    ar.add_argument("--workers", type=_pos_int, default=None,
                    help="worker processes over (suite, split, row, seed) jobs (default: min(2, CPUs))")
    ar.add_argument("--quick", action="store_true",
                    help=f"{AP_QUICK.iterations} iterations × {AP_QUICK.tasks_per_iteration} tasks, "
                         f"{AP_QUICK.max_eval_tasks} held-out tasks, seed {' '.join(map(str, AP_QUICK.seeds))} "
                         "(smoke run)")
    _out_flags(ar, force="replace a run already in --out: remove config.toml, results.json, report.txt, "
                         "suites/<suite>/ and <suite>/{results.json,success_by_iteration.png,split_*/} the run "
                         "wrote (other files are kept)", resume=None)
    _executor_flags(ar)
    ar.set_defaults(func=_antipersist_run)

    up = sub.add_parser("upliftmem", help="UpliftMem: set-level uplift retrieval with decision-aware probing")
    ups = up.add_subparsers(dest="command", required=True)
    ur = ups.add_parser("run", parents=[common],
                        help="train once per row, evaluate 3 times: no memory, similarity top-K, UpliftMem and "
                             "its ablations (Tables 1-2 analogues)")
    ur.add_argument("--suite", default="all", help=_suite_help("all"))
    ur.add_argument("--out", required=True, help="output directory")
    ur.add_argument("--rows", nargs="+", default=None,
                    help="trained rows (default: upliftmem base warmup_only random_probing no_policy no_value; "
                         "no_memory and similarity_topk always come with upliftmem)")
    _backbone_flags(ur)
    _agent_flag(ur, several=False)
    ur.add_argument("--config", default=None, help="an UpliftConfig TOML file (see DIR/config.toml of a run)")
    ur.add_argument("--max-tasks", type=_pos_int, default=None, help="tasks per split, spread over it (default: all)")
    ur.add_argument("--probe-strategy", choices=("evsi", "random", "mcstd", "eig"), default=None,
                    help="acquisition of the upliftmem row (default evsi)")
    _set_flag(ur, "UpliftConfig", "training.epochs=2, retrieval.width=3")
    ur.add_argument("--workers", type=_pos_int, default=None,
                    help="worker processes over (suite, row) jobs (default: min(2, CPUs))")
    ur.add_argument("--quick", action="store_true", help="16 tasks per split, 1 epoch, 1 evaluation repeat (smoke run)")
    _out_flags(ur, force="replace a run already in --out: remove config.toml, results.json, report.txt, success.png, "
                         "suites/ and <suite>/ the run wrote (other files are kept)", resume=None)
    _executor_flags(ur)
    ur.set_defaults(func=_upliftmem_run)
    upr = ups.add_parser("probes", parents=[common],
                         help="EVSI, random, MC-STD and EIG probing from the same warm-up checkpoint and fixed store "
                              "at budgets 20-200 (RQ4): cumulative success and mean reward")
    upr.add_argument("--suite", default="sql", help=_suite_help("sql", guide=False))
    upr.add_argument("--out", required=True, help="output directory")
    upr.add_argument("--seeds", type=_seed_int, nargs="+", default=None, help="training seeds (default: 0)")
    upr.add_argument("--quick", action="store_true", help="budgets 5 10 20 on 16 tasks per split (smoke run)")
    _set_flag(upr, "UpliftConfig", "training.epochs=2, max_tasks=24",
              order="Applied after --quick (the last --set of a key wins); probes.json records the config.")
    _out_flags(upr, force="replace probes.json, probes.txt, probes.png and suites/ in --out", resume=None)
    upr.set_defaults(func=_upliftmem_probes)
    ups_ = ups.add_parser("probe-study", parents=[common],
                          help="synthetic probe study (closed-form Δ): oracle headroom, then EVSI, MC-STD, EIG and "
                               "oracles against random on the beam-choice regret and local-comparison accuracy")
    ups_.add_argument("--out", required=True, help="output directory (probe_study.json, probe_study.txt)")
    ups_.add_argument("--seeds", type=_seed_int, nargs="+", default=None,
                      help="domain seeds (default 100-123; --quick: 100-103)")
    ups_.add_argument("--strategies", nargs="+", default=None,
                      help="evsi evsi_local mcstd eig random oracle_var oracle_err oracle_gain none (default all; "
                           "--quick: evsi random oracle_err none), and the ablations of evsi: evsi_local_family "
                           "evsi_top8 evsi_uncalibrated evsi_fixed_noise evsi_softmax")
    ups_.add_argument("--quick", action="store_true", help="4 seeds, 4 strategies (smoke run)")
    _out_flags(ups_, force="replace probe_study.json and probe_study.txt in --out", resume=None)
    ups_.set_defaults(func=_upliftmem_probe_study)
    uc = ups.add_parser("controlled", parents=[common],
                        help="native vs UpliftMem retrieval on the MemSyco-like suite's fixed stores, answered by "
                             "its frozen scripted answerer (Table 3, RQ2/RQ5 analogues)")
    uc.add_argument("--out", required=True, help="output directory (results.json, report.txt)")
    uc.add_argument("--stores", nargs="+", default=None,
                    help="fixed stores (default: rag mem0 amem memgpt lightmem; rag mem0 with --quick)")
    uc.add_argument("--k", type=_pos_int, nargs="+", default=[5], help="memory caps K (default 5; RQ5: 3 5 10)")
    uc.add_argument("--variants", nargs="+", default=["upliftmem"],
                    help="trained rows (default upliftmem; Table 3 ablations: warmup_only random_probing …)")
    uc.add_argument("--epochs", type=_pos_int, default=None, help="training epochs (default 3; 1 with --quick)")
    uc.add_argument("--repeats", type=_pos_int, default=None, help="evaluation repeats (default 3; 1 with --quick)")
    uc.add_argument("--small", action="store_true", help="the --quick training config on the full suite")
    uc.add_argument("--quick", action="store_true",
                    help="15 instances per scenario, 2 stores, 1 epoch, 1 evaluation repeat (smoke run)")
    uc.add_argument("--backbone", type=_backbone_arg, default="scripted", metavar="scripted",
                    help="only scripted: the executor is the suite's frozen scripted answerer (others are refused)")
    _set_flag(uc, "UpliftConfig", "training.epochs=2, probing.budget=40")
    _out_flags(uc, force="replace results.json and report.txt in --out (other files are kept)", resume=None)
    uc.set_defaults(func=_upliftmem_controlled)
    us = ups.add_parser("stores", parents=[common],
                        help="the fixed-store table: five stores built by their own systems' pipelines (NaiveRAG, "
                             "Mem0, MemGPT, A-MEM, LightMem; also CounterMem's and Anti-Persistence's), frozen, one "
                             "fixed executor, each store's own retrieval vs UpliftMem's (RQ2 on the built-in suites)")
    us.add_argument("--suite", default="sql", help=_suite_help("sql", guide=False) + "; several: comma-separated")
    us.add_argument("--out", required=True, help="output directory (results.json, report.txt, suites/<suite>/)")
    us.add_argument("--stores", nargs="+", default=None,
                    help="naive_rag mem0 memgpt amem lightmem (the default: the MemSyco fixed-store protocol) and/or "
                         "countermem antipersist")
    us.add_argument("--ap-row", default="anti_persistence",
                    help="the Anti-Persistence row that builds its store: anti_persistence (default) or "
                         "trajectory_memory")
    us.add_argument("--max-tasks", type=_seed_int, default=None, help="tasks per split (0 = all; 16 with --quick)")
    us.add_argument("--epochs", type=_pos_int, default=None, help="training epochs (default 3; 1 with --quick)")
    us.add_argument("--repeats", type=_pos_int, default=None, help="evaluation repeats (default 3; 1 with --quick)")
    us.add_argument("--quick", action="store_true", help="16 tasks per split, 1 epoch, 1 evaluation repeat (smoke run)")
    _backbone_flags(us)
    _set_flag(us, "UpliftConfig", "training.epochs=2, max_tasks=24")
    _out_flags(us, force="replace results.json, report.txt and suites/<suite>/ in --out (other files are kept)",
               resume=None)
    us.set_defaults(func=_upliftmem_stores)

    co = sub.add_parser("compare", parents=[common],
                        help="none, CounterMem, Anti-Persistence and UpliftMem on the same held-out tasks, backbone "
                             "and seeds: one table and one figure with paired intervals and each method's cost")
    co.add_argument("--suite", default="all", help=_suite_help("all"))
    co.add_argument("--out", required=True, help="output directory")
    co.add_argument("--quick", action="store_true", help="one seed, 16 tasks per split, each method's smoke preset")
    co.add_argument("--workers", type=_pos_int, default=None, help="worker processes (default: min(2, CPUs))")
    co.add_argument("--methods", nargs="+", default=None, help=_compare_methods_help)
    _set_flag(co, "CompareConfig", "max_tasks=8, countermem.agent.max_attempts=3, antipersist.iterations=4",
              order="Applied after --quick (the last --set of a key wins).")
    _backbone_flags(co)
    _agent_flag(co, several=False)
    _out_flags(co, force="replace a comparison already in --out (config.toml, results.json, report.txt, "
                         "compare.png, suites/, <suite>/; other files are kept)", resume=None)
    _executor_flags(co)
    co.set_defaults(func=_compare)

    sw = sub.add_parser("sweep", parents=[common],
                        help="the pre-registered sensitivity sweep over the simulator's competence")
    sw.add_argument("--method", choices=("countermem", "antipersist"), required=True)
    sw.add_argument("--grid", default=None, help="grid TOML file (default: the pre-registered "
                                                 "cfjax/experiments/sweep_grid.toml)")
    sw.add_argument("--out", required=True, help="output directory (sweep.json, sweep.txt, sweep_<row>.png)")
    sw.add_argument("--quick", action="store_true", help="the grid file's [<method>.quick] settings (minutes)")
    _set_flag(sw, "method's config (CounterMemConfig or APConfig)", "seeds=[0], scripted.p_noise=0.1",
              order="Added to the grid's base at every point, after its [<method>.base] and --quick tables; "
                    "a key the grid varies (an axis) is refused.")
    sw.add_argument("--workers", type=_pos_int, default=None, help="worker processes (default: min(2, CPUs))")
    _out_flags(sw, force="replace a sweep already in --out: remove sweep.json, sweep.txt, sweep_*.png, "
                         "suites/<suite>/ and point_*/ (other files are kept)", resume=None)
    _executor_flags(sw)
    sw.set_defaults(func=_sweep)

    dr = sub.add_parser("doctor", parents=[common],
                        help="which sandbox layers generated code gets on this machine (exit 1 if any is missing)")
    dr.set_defaults(func=_doctor)
    return p


def _line(e: BaseException) -> str:
    """An exception's message as one line (a path with a newline must not split it)."""
    text = str(e) or type(e).__name__
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _os_line(e: OSError) -> str:
    if e.filename is not None and e.strerror:
        return f"{e.strerror}: {os.fsdecode(e.filename)!r}"
    return _line(e)


#: filesystem errors about the user's paths: one line and status 2, like a UserError
_PATH_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError, FileExistsError)


def main(argv: list[str] | None = None) -> int:
    """Run the ``cfjax`` command; returns the exit status (module docstring: 0, 1, 2 or 130)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        args = build_parser().parse_args(argv)  # the --suite/--rows help loads the plugins
    except (UsageError, PluginLoadError) as e:
        print(f"cfjax: {_line(e)}", file=sys.stderr)
        return 2
    debug = bool(getattr(args, "debug", False))
    from cfjax.infra.compile_cache import enable as enable_compile_cache

    enable_compile_cache(getattr(args, "compile_cache", None))  # before any JAX work; workers inherit it
    try:
        return int(args.func(args) or 0)
    except (UserError, PluginLoadError) as e:  # ConfigError, OutputExistsError, a broken plugin, …: one line
        if debug:
            raise
        print(f"cfjax: {_line(e)}", file=sys.stderr)
        return 2
    except _PATH_ERRORS as e:
        if debug:
            raise
        print(f"cfjax: {_os_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        print("cfjax: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug or an environment failure: say so in one line, never silently
        if debug:
            raise
        print(f"cfjax: internal error: {type(e).__name__}: {_line(e)} (run with --debug for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
