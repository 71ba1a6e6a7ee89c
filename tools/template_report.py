"""``template-report PATH...``: analyse every chat template given and report on the whole set.

For each template: the analysis (formats, modes, markers), parser and grammar generation, the
render → parse fixed point for every scenario (with reconstructability), and grammar validation
(our GBNF checker, llguidance compiling the grammar and accepting what the template renders).
Writes Markdown (a CI job summary), a self-contained HTML page and JSON, and compares with a
baseline report.

Inputs: ``.jinja`` files, ``tokenizer_config.json`` / ``chat_template.json``, model folders,
``.gguf`` files, ``MANIFEST.tsv`` files and folders (searched recursively; a folder with a
``MANIFEST.tsv`` is read in manifest order, with each template's family).

JSON: keys sorted, templates sorted by name. Everything but the top-level ``"timings"`` object
is a pure function of the input, so two runs give byte-identical JSON apart from that object
(``--no-timings`` leaves it out). A baseline is any report JSON (or the compact one
``--write-baseline`` writes): each template's ``"checks"`` map check → ``pass``/``fail``/``n/a``.
A regression is a check that is ``pass`` in the baseline and is not now (``fail``, ``n/a`` or
gone) on a template present in both; ``pass`` → ``n/a`` counts, because a scenario that stops
applying (tools no longer detected, say) hides whatever it used to test.

Grammar acceptance: for each passing, applicable scenario, the fixed point's output is fed to
llguidance as the grammar sees it (the whole output for a grammar that covers it, from the
trigger on for a lazy one); it must accept a prefix after which no tool call is left, since the
model stops with end-of-sequence where the template writes its end of turn. Scenarios whose
output is not what a model would write (calls that break the tool schema, text the template
drops) are not checked.

Templates run ``--jobs`` at a time in worker processes, each under ``--timeout`` (SIGALRM in the
worker; a worker stuck in C code past half as long again plus 10 s is killed). Analyses are kept
on disk between runs (``$AUTOPARSER_CACHE``, else the user cache; ``--no-cache``: none), so a
second run over unchanged templates and code renders no probe (:mod:`chat_autoparser.analyzer.analysis_cache`).

Exit codes: 0 as good as the baseline (or no baseline), 1 regressions, 2 bad input.

Example::

    $ template-report --corpus --out report --baseline tests/report-baseline.json
    $ template-report ../shared/corpus --out report
    $ template-report templates/chatml-think.jinja --json - --quiet --no-timings
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import html
import json
import multiprocessing
import os
import re
import signal
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from chat_autoparser.analyzer import analysis_cache
from chat_autoparser.analyzer.corpus import MANIFEST_NAME, CorpusError, read_manifest
from chat_autoparser.analyzer.markers import visible
from chat_autoparser.generator.verify.engines import grammar_verdict

from chat_autoparser.errors import ChatAutoparserError, InputError

from .fetch_corpus import ensure_corpus

EXIT_OK, EXIT_REGRESSION, EXIT_INPUT = 0, 1, 2
SCHEMA = 1
PASS, FAIL, NA = "pass", "fail", "n/a"
MODEL_DIR_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")
TEMPLATE_SUFFIXES = (".jinja", ".gguf")
MAX_TEXT = 2000  # characters of one rendered text or diff kept in the report


class TemplateTimeout(BaseException):
    """A template went over ``--timeout``. BaseException so the analysis cannot swallow it."""


# --------------------------------------------------------------------------------------- inputs

@dataclass(frozen=True, slots=True)
class Entry:
    """One template to report on. ``name`` is stable across checkouts (corpus-relative)."""

    name: str
    path: str
    family: str = ""


def _manifest_entries(manifest: Path) -> list[Entry]:
    try:
        rows = read_manifest(manifest)
    except CorpusError as e:
        raise InputError(str(e)) from None
    root = manifest.parent
    missing = [r.file for r in rows if not (root / r.file).is_file()]
    if missing:
        raise InputError(f"{manifest}: {len(missing)} listed files are missing (first: {missing[0]})")
    return [Entry(r.file, str(root / r.file), r.family) for r in rows]


def _walk(folder: Path, root: Path) -> Iterator[Entry]:
    """Templates below ``folder`` (names relative to ``root``): a manifest wins, a model folder
    is one template, otherwise template files and subfolders, sorted."""
    if (folder / MANIFEST_NAME).is_file():
        prefix = folder.relative_to(root).as_posix()
        for e in _manifest_entries(folder / MANIFEST_NAME):
            yield Entry(e.name if prefix == "." else f"{prefix}/{e.name}", e.path, e.family)
        return
    if any((folder / n).is_file() for n in MODEL_DIR_FILES):
        yield Entry(folder.name if folder == root else folder.relative_to(root).as_posix(), str(folder))
        return
    try:
        children = sorted(folder.iterdir())
    except OSError as e:
        raise InputError(f"{folder}: cannot list the folder: {e.strerror or e}") from None
    for child in children:
        if child.name.startswith("."):
            continue
        if child.is_dir():
            yield from _walk(child, root)
        elif child.suffix in TEMPLATE_SUFFIXES:
            yield Entry(child.relative_to(root).as_posix(), str(child))


def _family_of(path: Path) -> tuple[str, str]:
    """(corpus name, family) of a file inside a folder with a manifest, else (path, "")."""
    for parent in list(path.resolve().parents)[:4]:
        manifest = parent / MANIFEST_NAME
        if manifest.is_file():
            try:
                rows = read_manifest(manifest)
            except CorpusError:
                break
            rel = path.resolve().relative_to(parent).as_posix()
            for r in rows:
                if r.file == rel:
                    return r.file, r.family
            break
    return path.as_posix(), ""


def collect(paths: Sequence[str]) -> list[Entry]:
    """Every template under ``paths`` (see the module docstring), sorted by name; names made unique.

    Raises :class:`InputError` naming the path and the cause.
    """
    out: list[Entry] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise InputError(f"{raw}: no such file or folder")
        if not os.access(p, os.R_OK):
            raise InputError(f"{raw}: not readable (permission denied)")
        if p.is_dir():
            found = list(_walk(p, p))
            if not found:
                raise InputError(f"{raw}: no templates found (.jinja, .gguf, tokenizer_config.json, MANIFEST.tsv)")
            out += found
        elif p.name == MANIFEST_NAME or p.suffix == ".tsv":
            out += _manifest_entries(p)
        elif p.suffix in TEMPLATE_SUFFIXES or p.name.endswith(".json"):
            name, family = _family_of(p)
            out.append(Entry(name, str(p), family))
        else:
            raise InputError(f"{raw}: not a template (expected .jinja, .gguf, .json, MANIFEST.tsv or a folder)")
    seen: Counter[str] = Counter()
    unique = []
    for e in out:
        seen[e.name] += 1
        unique.append(e if seen[e.name] == 1 else Entry(f"{e.name} ({seen[e.name]})", e.path, e.family))
    return sorted(unique, key=lambda e: e.name)


# ------------------------------------------------------------------------- one template's checks

def _clip(text: str, limit: int = MAX_TEXT, where: str = "") -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters{where})"


def _error(e: BaseException) -> dict[str, str]:
    """Type and message; exceptions that are not ours are bugs and say so."""
    kind = type(e).__name__ if isinstance(e, ChatAutoparserError) else f"internal {type(e).__name__}"
    return {"type": kind, "message": _clip(str(e))}


def _uses_tools(scenario: str) -> bool:
    return "tool" in scenario or "arguments" in scenario


def _check_grammars(params_by_setting: dict[bool, Any]) -> tuple[dict[str, Any], dict[bool, Any]]:
    """GBNF issues and llguidance compilation of each distinct grammar; (detail, checker by setting)."""
    try:
        from chat_autoparser.generator.verify.engines import (
            EngineError,
            LLGuidanceChecker,
        )
        from chat_autoparser.generator.verify.gbnf_check import check_gbnf
    except ImportError as e:  # the modules are new; a tree without them reports it, not crashes
        return {"unavailable": f"grammar checkers cannot be imported: {e}", "grammars": []}, {}
    grammars, checkers, compiled = [], {}, {}
    for enable, params in params_by_setting.items():
        g = params.grammar
        if g is None:
            continue
        if g in compiled:
            checkers[enable] = compiled[g]
            grammars[[x["grammar"] for x in grammars].index(g)]["settings"].append(_setting(enable))
            continue
        issues = [{"kind": i.kind, "code": i.code, "message": i.message} for i in check_gbnf(g)]
        try:
            checker, refused = LLGuidanceChecker(g), ""
        except EngineError as e:
            checker, refused = None, str(e)
        compiled[g] = checkers[enable] = checker
        grammars.append({"settings": [_setting(enable)], "grammar": g, "lazy": params.grammar_lazy,
                         "triggers": params.grammar_triggers, "gbnf_issues": issues, "llguidance_refused": refused})
    return {"grammars": grammars}, checkers


def _setting(enable: bool) -> str:
    return f"enable_thinking={'true' if enable else 'false'}"


def schema_violation(message: dict[str, Any], tools: Sequence[dict[str, Any]]) -> str:
    """Why a message's tool calls break the tools' JSON schemas ("" when they do not). The grammar
    follows the schemas, so it rightly rejects such calls (the ``empty_arguments`` scenario
    leaves out a required argument)."""
    import jsonschema

    schemas = {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}
    for call in message.get("tool_calls") or []:
        fn = call["function"]
        try:
            args = json.loads(fn["arguments"])
            jsonschema.validate(args, schemas.get(fn["name"], {}))
        except (ValueError, jsonschema.ValidationError) as e:
            return f"{fn['name']}: {getattr(e, 'message', e)}"
    return ""


def _accepts(scenario: str, generated: str, params_by_setting: dict[bool, Any], checkers: dict[bool, Any],
             tool_names: Sequence[str], enable_thinking: bool | None) -> dict[str, Any]:
    """Does the grammar of the request the output was rendered under accept it (see
    :func:`grammar_verdict`)? ``enable_thinking`` is the setting the fixed point used; when it is
    unknown (None), the settings are tried in the fixed point's own order (thinking on first when
    the scenario reasons), the first that accepts wins, else the first failure is reported."""
    order = ((enable_thinking,) if enable_thinking is not None else
             (True, False) if "reasoning" in scenario else (False, True))
    first_failure: dict[str, Any] | None = None
    for enable in order:
        params, checker = params_by_setting.get(enable), checkers.get(enable)
        if params is None or checker is None:
            continue
        status, note, text = grammar_verdict(checker, params, generated, _uses_tools(scenario), tool_names)
        result = {"status": status, "setting": _setting(enable), "note": note, "text": _clip(text)}
        if status == PASS:
            return result
        first_failure = first_failure or result
    return first_failure or {"status": NA, "setting": "", "text": "", "note": "no usable grammar"}


# A reasoning scenario whose reasoning the template drops reads none of it back: not a pass.
REASONING_DROPPED = "the template drops the message's reasoning: none of it is read back"


def _scenario_record(r: Any) -> dict[str, Any]:
    dropped = r.ok and not r.skipped and "reasoning" in r.scenario and "reasoning" in r.template_drops
    status = "skip" if r.skipped or dropped else PASS if r.ok else FAIL
    return {"status": status, "skipped": r.skipped or (REASONING_DROPPED if dropped else ""), "via": r.via,
            "problems": list(r.problems),
            "template_drops": list(r.template_drops), "reconstructs": r.reconstructs,
            "reconstruct_diff": _clip(r.reconstruct_diff), "generated": _clip(r.generated)}


def _analysis_record(analysis: Any) -> dict[str, Any]:
    cs, ts = analysis.content_structure, analysis.tool_call_structure
    markers = {"reasoning_start": cs.reasoning_start, "reasoning_end": cs.reasoning_end,
               "content_start": cs.content_start, "content_end": cs.content_end,
               "tool_section_start": ts.tool_section_start, "tool_section_end": ts.tool_section_end,
               "call_separator": ts.call_separator, "generation_prompt": analysis.generation_prompt,
               "generation_prompt_thinking": analysis.generation_prompt_thinking,
               "end_of_turn": analysis.end_of_turn, "final_suffix": analysis.final_suffix,
               "message_prefix": analysis.message_prefix}
    return {"reasoning_mode": cs.reasoning_mode.value, "content_mode": cs.content_mode.value,
            "tool_format": ts.function_format.value, "argument_format": ts.argument_format.value,
            "tool_source": ts.source, "supports_tools": ts.supports_tools, "tools_reason": ts.reason,
            "markers": markers,
            "probe_failures": [f"{f.probe}: {f.kind}: {f.error}" for f in analysis.probe_failures],
            "fallback_renders": len(analysis.fallback_renders), "notes": list(analysis.notes),
            "unverified_probes": [f"{p}: {why}" for p, why in ts.unverified]}


def examine(entry: Entry, timings: dict[str, float]) -> dict[str, Any]:
    """Every check on one template; never raises for a template's faults (they are recorded)."""
    from chat_autoparser.analyzer import analyze_template, load_template
    from chat_autoparser.generator import generate_parser
    from chat_autoparser.generator.verify.fixed_point import (
        RT_TOOLS,
        SCENARIOS,
        fixed_point,
    )

    rec: dict[str, Any] = {"name": entry.name, "family": entry.family, "status": "ok", "error": None,
                           "analysis": None, "generation": None, "scenarios": {}, "grammar": None, "deviations": {}}
    try:
        loaded = load_template(entry.path)
        t0 = time.perf_counter()
        analysis = analyze_template(loaded, engine="jinja2")
        timings["analysis_ms"] = (time.perf_counter() - t0) * 1000
    except Exception as e:  # noqa: BLE001 - a template's failure is a result, not a crash
        rec.update(status="error", error=_error(e))
        return rec
    rec["analysis"] = _analysis_record(analysis)
    with_tools = analysis.tool_call_structure.supports_tools
    params_by_setting: dict[bool, Any] = {}
    try:
        t0 = time.perf_counter()
        params_by_setting[True] = generate_parser(analysis, tools=RT_TOOLS if with_tools else None, enable_thinking=True)
        timings["generation_ms"] = (time.perf_counter() - t0) * 1000
        if with_tools:  # fixed points of plain tool calls render with thinking off first
            params_by_setting[False] = generate_parser(analysis, tools=RT_TOOLS, enable_thinking=False)
        main = params_by_setting[True]
        rec["generation"] = {"error": None, "has_grammar": main.grammar is not None, "grammar_lazy": main.grammar_lazy,
                             "grammar_triggers": main.grammar_triggers, "preserved_tokens": main.preserved_tokens}
    except Exception as e:  # noqa: BLE001
        rec["generation"] = {"error": _error(e)}
        params_by_setting = {}
    t0 = time.perf_counter()
    outputs: dict[str, Any] = {}  # the passing scenarios' results (the record keeps their texts clipped)
    for scenario in SCENARIOS:
        try:
            r = fixed_point(loaded, analysis, scenario)
        except Exception as e:  # noqa: BLE001
            rec["scenarios"][scenario] = {"status": "error", "error": _error(e)}
            continue
        rec["scenarios"][scenario] = _scenario_record(r)
        if r.ok and not r.skipped:
            _deviations(rec["deviations"], analysis, r)
            # not what a model would write: the grammar is not expected to accept it
            why = schema_violation(r.parsed, RT_TOOLS) or ", ".join(d for d in r.template_drops if d != "call ids")
            if why:
                rec["scenarios"][scenario]["grammar"] = {"status": NA, "setting": "", "text": "",
                                                         "note": f"not checked: {why}"}
            else:
                outputs[scenario] = r
    timings["fixed_point_ms"] = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    if any(p.grammar for p in params_by_setting.values()):
        rec["grammar"], checkers = _check_grammars(params_by_setting)
        names = [t["function"]["name"] for t in RT_TOOLS]
        for scenario, r in outputs.items() if checkers else ():
            rec["scenarios"][scenario]["grammar"] = _accepts(scenario, r.generated, params_by_setting, checkers, names,
                                                             getattr(r, "enable_thinking", None))
    timings["grammar_ms"] = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    rec["roundtrip"] = _roundtrip(loaded, analysis)
    timings["roundtrip_ms"] = (time.perf_counter() - t0) * 1000
    return rec


def _roundtrip(loaded: Any, analysis: Any) -> dict[str, Any]:
    """The prefix-cache roundtrip at string level: per scenario, pass (every setting keeps the
    prefix), fail (one breaks it: its diagnosis and evidence) or n/a."""
    from chat_autoparser.generator.verify.roundtrip import check_roundtrip

    try:
        results = check_roundtrip(loaded, analysis=analysis).results
    except Exception as e:  # noqa: BLE001 - a crash is a result of the check, recorded
        return {"error": _error(e)}
    out: dict[str, Any] = {}
    for r in results:
        now = NA if r["string_prefix"] is None else PASS if r["string_prefix"] else FAIL
        had = out.get(r["scenario"])
        if had is None or now == FAIL or (now == PASS and had["status"] == NA):
            out[r["scenario"]] = {"status": now, "diagnosis": r["diagnosis"] or "",
                                  "evidence": _clip(r["evidence"]) if now == FAIL else ""}
    return out


def _deviations(found: dict[str, Any], analysis: Any, r: Any) -> None:
    """Each perturbation of a passing fixed point's output (oracle 5): pass unless one of its
    perturbed outputs parses to another message; the first problem is kept."""
    from chat_autoparser.generator.verify.deviations import Output, check, deviations

    out = Output.of(analysis, r)
    for dev in deviations(out):
        rec = found.setdefault(dev.perturbation, {"status": PASS, "outputs": 0, "problem": ""})
        rec["outputs"] += 1
        try:
            why = check(out, dev)
        except Exception as e:  # noqa: BLE001 - a crash is a failure of the check, recorded
            why = f"{type(e).__name__}: {e}"
        if why and rec["status"] == PASS:
            rec.update(status=FAIL, problem=f"{dev.scenario}: {why}"[:MAX_TEXT])


def checks_of(rec: dict[str, Any]) -> dict[str, str]:
    """The flat check → pass/fail/n/a map the baseline comparison reads."""
    from chat_autoparser.generator.verify.fixed_point import SCENARIOS

    analysed = rec["status"] == "ok"
    checks = {"analysis": PASS if analysed else FAIL}
    gen = rec.get("generation") or {}
    checks["generation"] = NA if not analysed else FAIL if gen.get("error") else PASS
    grammars = (rec.get("grammar") or {}).get("grammars", [])
    checks["grammar/gbnf"] = NA if not grammars else FAIL if any(g["gbnf_issues"] for g in grammars) else PASS
    checks["grammar/llguidance"] = (NA if not grammars else FAIL if any(g["llguidance_refused"] for g in grammars)
                                    else PASS)
    for scenario in SCENARIOS:
        s = (rec.get("scenarios") or {}).get(scenario, {"status": "skip"})
        checks[f"fixed_point/{scenario}"] = {"pass": PASS, "fail": FAIL, "error": FAIL}.get(s["status"], NA)
        rc = s.get("reconstructs")
        checks[f"reconstructs/{scenario}"] = NA if rc is None or s["status"] == "skip" else PASS if rc else FAIL
        checks[f"grammar/accepts/{scenario}"] = (s.get("grammar") or {}).get("status", NA)
    for name in _perturbation_names():
        checks[f"deviation/{name}"] = (rec.get("deviations") or {}).get(name, {}).get("status", NA)
    rt = rec.get("roundtrip") or {}
    for name in _roundtrip_names():
        checks[f"roundtrip/{name}"] = FAIL if "error" in rt else (rt.get(name) or {}).get("status", NA)
    return dict(sorted(checks.items()))


def _roundtrip_names() -> list[str]:
    from chat_autoparser.generator.verify.scenarios import SCENARIOS
    return list(SCENARIOS)


def _perturbation_names() -> list[str]:
    from chat_autoparser.generator.verify.deviations import PERTURBATIONS
    return [p.name for p in PERTURBATIONS]


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`TemplateTimeout` in this (main) thread after ``seconds`` (SIGALRM)."""
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise TemplateTimeout()

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def failed_record(entry: Entry, seconds: float, died: str = "") -> dict[str, Any]:
    """The record of a template that ran out of time (or whose worker ``died``), checks included."""
    error = ({"type": "internal WorkerDied", "message": died} if died else
             {"type": "Timeout", "message": f"over the {seconds:g} s limit per template"})
    rec = {"name": entry.name, "family": entry.family, "status": "error" if died else "timeout", "analysis": None,
           "generation": None, "scenarios": {}, "grammar": None, "deviations": {}, "error": error}
    rec["checks"] = checks_of(rec)
    return rec


def run_one(entry: Entry, timeout_s: float) -> tuple[dict[str, Any], dict[str, float]]:
    """(record, timings) of one template, within the time limit (the worker function)."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        with time_limit(timeout_s):
            rec = examine(entry, timings)
        rec["checks"] = checks_of(rec)
    except TemplateTimeout:
        rec = failed_record(entry, timeout_s)
    timings["total_ms"] = (time.perf_counter() - t0) * 1000
    return rec, {k: round(v, 1) for k, v in sorted(timings.items())}


# ------------------------------------------------------------------------------------- running

Done = Callable[[Entry], None]


def _pool(jobs: int) -> cf.ProcessPoolExecutor:
    # fork: workers start at once with the parent's imports (and any monkeypatches a caller made)
    ctx = multiprocessing.get_context("fork") if sys.platform == "linux" else None
    return cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)


def _kill(pool: cf.ProcessPoolExecutor) -> None:
    """Stop a pool whose worker is stuck where SIGALRM cannot reach (inside C code)."""
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def run_all(entries: Sequence[Entry], jobs: int, timeout_s: float,
            done: Done = lambda e: None) -> list[tuple[dict[str, Any], dict[str, float]]]:
    """Run every template, ``jobs`` at a time (in this process when ``jobs`` is 1).

    The time limit is enforced inside the worker; a worker that still overruns it by half again
    plus 10 s is stuck in C code: its pool is killed, the template recorded as a timeout and the
    other running templates started again in a fresh pool.
    """
    results: list[tuple[dict[str, Any], dict[str, float]]] = []
    if jobs <= 1:
        for e in entries:
            results.append(run_one(e, timeout_s))
            done(e)
        return results
    hard_limit = timeout_s * 1.5 + 10 if timeout_s > 0 else float("inf")
    todo = list(reversed(entries))
    running: dict[cf.Future, tuple[Entry, float]] = {}
    pool = _pool(jobs)
    try:
        while todo or running:
            while todo and len(running) < jobs:  # at most one task per worker: it starts when submitted
                e = todo.pop()
                running[pool.submit(run_one, e, timeout_s)] = (e, time.monotonic())
            finished, _ = cf.wait(running, timeout=1.0, return_when=cf.FIRST_COMPLETED)
            for fut in finished:
                e, _ = running.pop(fut)
                try:
                    results.append(fut.result())
                except Exception as exc:  # noqa: BLE001 - a worker died (out of memory, a crash in C)
                    results.append((failed_record(e, timeout_s, died=str(exc) or type(exc).__name__), {}))
                done(e)
            now = time.monotonic()
            stuck = [f for f, (_, started) in running.items() if now - started > hard_limit]
            if stuck:
                _kill(pool)
                for f in stuck:
                    e, _ = running.pop(f)
                    results.append((failed_record(e, timeout_s), {}))
                    done(e)
                todo += [e for e, _ in running.values()]
                running.clear()
                pool = _pool(jobs)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results


# -------------------------------------------------------------------------------------- report

def _count(values: Any) -> dict[str, int]:
    return dict(sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0])))


def summarize(templates: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over the templates (no timings)."""
    from chat_autoparser.generator.verify.fixed_point import SCENARIOS

    analysed = [t for t in templates if t["status"] == "ok"]
    fixed = {}
    for s in SCENARIOS:
        statuses = [(t["scenarios"].get(s) or {}).get("status", "skip") for t in analysed]
        fp = [t["checks"][f"reconstructs/{s}"] for t in analysed]
        ga = [t["checks"][f"grammar/accepts/{s}"] for t in analysed]
        checked = [t["scenarios"][s]["via"] for t in analysed
                   if (t["scenarios"].get(s) or {}).get("status") in (PASS, FAIL)]
        spliced = [v for v in checked if v.split("+")[0] == "splice"]
        instructed = [v for v in checked if v.startswith("instructions")]
        by_markers = [v for v in checked if v.endswith("+markers")]
        fixed[s] = {"pass": statuses.count("pass"), "fail": statuses.count("fail"), "skip": statuses.count("skip"),
                    "error": statuses.count("error"), "spliced": len(spliced), "instructed": len(instructed),
                    "reasoning_by_markers": len(by_markers),
                    "reconstructs": fp.count(PASS),
                    "reconstruct_checked": fp.count(PASS) + fp.count(FAIL),
                    "grammar_accepts": ga.count(PASS), "grammar_checked": ga.count(PASS) + ga.count(FAIL)}
    grammars = [g for t in analysed for g in (t.get("grammar") or {}).get("grammars", [])]
    issue_kinds = Counter(i["kind"] for g in grammars for i in g["gbnf_issues"])
    accepts = [v for t in analysed for k, v in t["checks"].items() if k.startswith("grammar/accepts/")]
    a = [t["analysis"] for t in analysed]
    return {
        "templates": len(templates), "analysed": len(analysed),
        "errors": len([t for t in templates if t["status"] == "error"]),
        "timeouts": len([t for t in templates if t["status"] == "timeout"]),
        "error_types": _count(t["error"]["type"] for t in templates if t["error"]),
        "generation_errors": len([t for t in analysed if (t["generation"] or {}).get("error")]),
        "scenario_errors": sum(f["error"] for f in fixed.values()),
        "fixed_point": fixed,
        "tool_templates": len(tool_templates(analysed)),
        "unchecked_tool_templates": unchecked_tool_templates(analysed),
        "unchecked_reasoning_templates": unchecked_reasoning_templates(analysed),
        "grammar": {
            "templates_with_grammar": len([t for t in analysed if t["checks"]["grammar/gbnf"] != NA]),
            "grammars": len(grammars), "lazy": len([g for g in grammars if g["lazy"]]),
            "gbnf_clean": len([g for g in grammars if not g["gbnf_issues"]]),
            "gbnf_issues_by_kind": dict(sorted(issue_kinds.items())),
            "llguidance_compiled": len([g for g in grammars if not g["llguidance_refused"]]),
            "llguidance_refused": len([g for g in grammars if g["llguidance_refused"]]),
            "accepts": accepts.count(PASS), "accept_checked": accepts.count(PASS) + accepts.count(FAIL),
            "unavailable": len([t for t in analysed if (t.get("grammar") or {}).get("unavailable")]),
        },
        "reconstructs": {"ok": sum(f["reconstructs"] for f in fixed.values()),
                         "checked": sum(f["reconstruct_checked"] for f in fixed.values())},
        "deviations": {name: {"pass": sum(t["checks"].get(f"deviation/{name}") == PASS for t in analysed),
                              "fail": sum(t["checks"].get(f"deviation/{name}") == FAIL for t in analysed)}
                       for name in _perturbation_names()},
        "roundtrip": {name: {"pass": sum(t["checks"].get(f"roundtrip/{name}") == PASS for t in analysed),
                             "fail": sum(t["checks"].get(f"roundtrip/{name}") == FAIL for t in analysed)}
                      for name in _roundtrip_names()},
        "roundtrip_diagnoses": _count(r["diagnosis"] for t in analysed for r in (t.get("roundtrip") or {}).values()
                                      if isinstance(r, dict) and r.get("status") == FAIL),
        "formats": {
            "tool_format": _count(x["tool_format"] for x in a),
            "argument_format": _count(x["argument_format"] for x in a),
            "tool_source": _count(x["tool_source"] or "(none)" for x in a),
            "reasoning_mode": _count(x["reasoning_mode"] for x in a),
            "content_mode": _count(x["content_mode"] for x in a),
        },
        "probe_failures": sum(len(x["probe_failures"]) for x in a),
    }


def tool_templates(analysed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The templates that render tool calls or the request's tools: by their renders (the fixed
    point's applicability, ``generator.verify.applicability``), not by their analysis, so a
    template whose analysis misses its tools still counts."""
    from chat_autoparser.generator.verify.fixed_point import NO_TOOLS
    return [t for t in analysed
            if any(v.get("skipped") != NO_TOOLS for k, v in t["scenarios"].items() if _uses_tools(k))]


def unchecked_tool_templates(analysed: list[dict[str, Any]]) -> dict[str, str]:
    """Tool templates (:func:`tool_templates`) none of whose tool scenarios was checked, each
    with the reason its first tool scenario gives."""
    out = {}
    for t in tool_templates(analysed):
        tools = {k: v for k, v in t["scenarios"].items() if _uses_tools(k)}
        if all(v.get("status") == "skip" for v in tools.values()):
            out[t["name"]] = next(iter(tools.values())).get("skipped", "")
    return out


def unchecked_reasoning_templates(analysed: list[dict[str, Any]]) -> dict[str, str]:
    """Templates that write reasoning (by their renders and source, not their analysis) none of
    whose reasoning scenarios was checked, each with the reason its first one gives."""
    from chat_autoparser.generator.verify.fixed_point import (
        CLOSED_REASONING,
        NO_REASONING,
        NO_TOOLS,
    )
    out = {}
    for t in analysed:
        runs = [v for k, v in t["scenarios"].items() if "reasoning" in k]
        if any(v.get("skipped") in (NO_REASONING, CLOSED_REASONING) for v in runs):
            continue
        if runs and all(v.get("status") == "skip" for v in runs):
            out[t["name"]] = next((v.get("skipped", "") for v in runs if v.get("skipped") != NO_TOOLS), "")
    return out


def build_report(results: list[tuple[dict[str, Any], dict[str, float]]], *, wall_s: float | None = None,
                 jobs: int = 1, timeout_s: float = 0) -> dict[str, Any]:
    """The report: ``summary`` and ``templates`` (comparable), ``timings`` (not)."""
    templates = sorted((r for r, _ in results), key=lambda r: r["name"])
    timings = {"per_template_ms": {r["name"]: t for r, t in sorted(results, key=lambda x: x[0]["name"])},
               "jobs": jobs, "timeout_s": timeout_s}
    if wall_s is not None:
        timings["wall_s"] = round(wall_s, 2)
    return {"schema": SCHEMA, "summary": summarize(templates), "templates": templates, "timings": timings}


def report_json(report: dict[str, Any], *, timings: bool = True) -> str:
    body = report if timings else {k: v for k, v in report.items() if k != "timings"}
    return json.dumps(body, sort_keys=True, ensure_ascii=False, indent=1) + "\n"


def baseline_json(report: dict[str, Any]) -> str:
    """The compact baseline: one line per template, its name and the checks that are not n/a
    (an absent check reads as not passing, which is all the comparison needs to know)."""
    lines = [json.dumps({"checks": {k: v for k, v in t["checks"].items() if v != NA}, "name": t["name"]},
                        sort_keys=True, ensure_ascii=False) for t in report["templates"]]
    return f'{{"schema": {SCHEMA}, "templates": [\n' + ",\n".join(lines) + "\n]}\n"


# ------------------------------------------------------------------------------------ baseline

@dataclass(frozen=True, slots=True)
class Change:
    template: str
    check: str
    before: str
    after: str


@dataclass
class Comparison:
    regressions: list[Change]
    improvements: list[Change]
    new_failures: list[Change]  # failing checks on templates the baseline does not have
    missing: list[str]          # baseline templates not in this run

    def to_dict(self) -> dict[str, Any]:
        return {"regressions": [asdict(c) for c in self.regressions],
                "improvements": [asdict(c) for c in self.improvements],
                "new_failures": [asdict(c) for c in self.new_failures], "missing": self.missing}


def load_baseline(path: str) -> dict[str, dict[str, str]]:
    """template name → checks, from a report or baseline JSON. Raises :class:`InputError`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"{path}: cannot read the baseline: {e.strerror or e}") from None
    except ValueError as e:
        raise InputError(f"{path}: the baseline is not JSON: {e}") from None
    try:
        return {t["name"]: dict(t["checks"]) for t in data["templates"]}
    except (KeyError, TypeError) as e:
        raise InputError(f"{path}: not a template-report baseline (no templates[].name/checks: {e})") from None


def compare(baseline: dict[str, dict[str, str]], report: dict[str, Any]) -> Comparison:
    cmp = Comparison([], [], [], sorted(set(baseline) - {t["name"] for t in report["templates"]}))
    for t in report["templates"]:
        now, name = t["checks"], t["name"]
        before = baseline.get(name)
        if before is None:
            cmp.new_failures += [Change(name, k, "", v) for k, v in now.items() if v == FAIL]
            continue
        for k in sorted(set(before) | set(now)):
            b, a = before.get(k, "absent"), now.get(k, "absent")
            if b == PASS and a != PASS:
                cmp.regressions.append(Change(name, k, b, a))
            elif a == PASS and b != PASS:
                cmp.improvements.append(Change(name, k, b, a))
    return cmp


def change_lines(changes: list[Change]) -> list[str]:
    """One line per template: its changed checks."""
    by: dict[str, list[str]] = {}
    for c in changes:
        by.setdefault(c.template, []).append(f"{c.check} ({c.before or 'new'} → {c.after})")
    return [f"{name}: {', '.join(items)}" for name, items in by.items()]


# ------------------------------------------------------------------------------------ markdown

def _md(text: Any) -> str:
    """A Markdown table cell: pipes, backticks, angle brackets and newlines made inert."""
    return (html.escape(str(text), quote=False).replace("|", "\\|").replace("`", "\\`")
            .replace("\n", " ").replace("*", "\\*").replace("_", "\\_"))


def _short(value: str) -> str:
    return value.removeprefix("FUNC_").removeprefix("REASONING_").removeprefix("CONTENT_").removeprefix("ARGS_")


def _ratio(ok: int, total: int) -> str:
    return f"{ok}/{total}" if total else "—"


def template_cells(t: dict[str, Any], timing: dict[str, float]) -> dict[str, str]:
    """The per-template summary, as short texts (shared by the Markdown and HTML tables)."""
    c, a = t["checks"], t["analysis"] or {}
    fp = [v for k, v in c.items() if k.startswith("fixed_point/")]
    rc = [v for k, v in c.items() if k.startswith("reconstructs/")]
    ga = [v for k, v in c.items() if k.startswith("grammar/accepts/")]
    rt = [v for k, v in c.items() if k.startswith("roundtrip/")]
    if c["grammar/gbnf"] == NA:
        grammar = "—"
    else:
        bad = [x for x, k in (("GBNF issues", "grammar/gbnf"), ("llguidance refuses", "grammar/llguidance"))
               if c[k] == FAIL]
        grammar = "; ".join(bad + ([f"accepts {_ratio(ga.count(PASS), ga.count(PASS) + ga.count(FAIL))}"]
                                   if ga.count(FAIL) else [])) or "ok"
    tool = _short(a.get("tool_format", ""))
    if a.get("argument_format") and a.get("argument_format") != "ARGS_NONE":
        tool += f" / {_short(a['argument_format'])}"
    errors = t["error"]["type"] if t["error"] else ""
    crashes = [s["error"]["type"] for s in t["scenarios"].values() if s.get("error")]
    if (t.get("generation") or {}).get("error"):
        crashes.append("generation " + t["generation"]["error"]["type"])
    return {
        "template": t["name"], "family": t["family"] or "—",
        "reasoning": _short(a.get("reasoning_mode", "")) or "—",
        "tools": (tool + (f" ({a['tool_source']})" if a.get("tool_source") not in (None, "", "rendered") else "")
                  or "—"),
        "fixed point": _ratio(fp.count(PASS), fp.count(PASS) + fp.count(FAIL)),
        "grammar": grammar,
        "reconstructs": _ratio(rc.count(PASS), rc.count(PASS) + rc.count(FAIL)),
        "roundtrip": _ratio(rt.count(PASS), rt.count(PASS) + rt.count(FAIL)),
        "analysis ms": f"{timing['analysis_ms']:.0f}" if "analysis_ms" in timing else "—",
        "errors": ", ".join(filter(None, [errors, *crashes])) + (
            f" {len(a['probe_failures'])} probe failures" if a.get("probe_failures") else ""),
    }


def _md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_md(x) for x in r) + " |" for r in rows]
    return out + [""]


SCENARIO_HEADER = ("scenario", "pass", "fail", "error", "skipped", "pass rate", "spliced", "instructed",
                   "reasoning by markers", "reconstructs", "grammar accepts")


def scenario_rows(summary: dict[str, Any]) -> list[list[str]]:
    """The fixed-point table, one row per scenario (Markdown and HTML)."""
    rows = []
    for name, f in summary["fixed_point"].items():
        applicable = f["pass"] + f["fail"] + f["error"]
        rows.append([name, str(f["pass"]), str(f["fail"]), str(f["error"]), str(f["skip"]),
                     f"{100 * f['pass'] / applicable:.1f}%" if applicable else "—", str(f.get("spliced", 0)),
                     str(f.get("instructed", 0)), str(f.get("reasoning_by_markers", 0)),
                     _ratio(f["reconstructs"], f["reconstruct_checked"]),
                     _ratio(f["grammar_accepts"], f["grammar_checked"])])
    return rows


def comparison_sections(cmp: Comparison) -> list[tuple[str, list[str]]]:
    """(title, one line per template) for each non-empty kind of change."""
    kinds = (("Regressions", cmp.regressions), ("Improvements", cmp.improvements),
             ("Failures on templates new to the baseline", cmp.new_failures))
    return [(title, change_lines(changes)) for title, changes in kinds if changes]


def comparison_verdict(cmp: Comparison) -> str:
    return (f"{len(cmp.regressions)} regressions in {len({c.template for c in cmp.regressions})} templates, "
            f"{len(cmp.improvements)} improvements, {len(cmp.new_failures)} failing checks on new templates, "
            f"{len(cmp.missing)} baseline templates not in this run")


def render_markdown(report: dict[str, Any], cmp: Comparison | None = None) -> str:
    s = report["summary"]
    timings = report.get("timings", {})
    lines = ["# Chat template report", ""]
    lines.append(f"**{s['templates']} templates**: {s['analysed']} analysed, {s['errors']} errors, "
                 f"{s['timeouts']} timeouts; {s['generation_errors']} generation errors, {s['scenario_errors']} "
                 f"fixed-point crashes; {s['probe_failures']} probe failures."
                 + (f" Wall time {timings['wall_s']} s with {timings['jobs']} jobs." if "wall_s" in timings else ""))
    lines.append("")
    if cmp is not None:
        lines += markdown_comparison(cmp)
    lines += ["## Render → parse fixed point", ""] + _md_table(SCENARIO_HEADER, scenario_rows(s))
    lines += ["", "*spliced*: checked on the history's turn spliced onto the prompt past the header, flag or "
              "reasoning block only the prompt writes (no reconstruction); *instructed*: the template renders no "
              "calls, and the turn's text is the call its instructions spell; *reasoning by markers*: the template drops the "
              "message's reasoning, written before the turn by the analysis' own markers.", ""]
    unchecked = s.get("unchecked_tool_templates", {})
    if unchecked:
        lines += [f"**Tool templates with no checked tool-call output: {len(unchecked)}**", ""]
        lines += [f"- {_md(name)}: {_md(why)}" for name, why in unchecked.items()] + [""]
    g = s["grammar"]
    kinds = ", ".join(f"{k} {v}" for k, v in g["gbnf_issues_by_kind"].items()) or "none"
    lines += ["## Grammars", "",
              f"- templates with a grammar: {g['templates_with_grammar']} ({g['grammars']} distinct grammars, "
              f"{g['lazy']} lazy)",
              f"- GBNF check clean: {g['gbnf_clean']}/{g['grammars']} (issues by kind: {kinds})",
              f"- llguidance compiles: {g['llguidance_compiled']}/{g['grammars']}",
              f"- llguidance accepts the rendered output: {_ratio(g['accepts'], g['accept_checked'])}",
              f"- reconstructability (parsed message re-renders byte for byte): "
              f"{_ratio(s['reconstructs']['ok'], s['reconstructs']['checked'])}", ""]
    if g["unavailable"]:
        lines += [f"- grammar checkers unavailable for {g['unavailable']} templates", ""]
    dev = s.get("deviations", {})
    passed, total = sum(d["pass"] for d in dev.values()), sum(d["pass"] + d["fail"] for d in dev.values())
    lines += ["## Deviations (oracle 5)", "",
              f"(template, perturbation) pairs that parse to the same message: {_ratio(passed, total)}", ""]
    lines += _md_table(("perturbation", "pass", "fail"), [[k, str(d["pass"]), str(d["fail"])] for k, d in dev.items()])
    rt = s.get("roundtrip", {})
    lines += ["## Prefix-cache roundtrip (string level)", "",
              "Does the next request start with the prompt and the model's output? Failures are the templates' "
              "(reasoning dropped, whitespace stripped, arguments re-serialized), diagnosed: "
              + (", ".join(f"{_md(k)} {v}" for k, v in s.get("roundtrip_diagnoses", {}).items()) or "none"), ""]
    lines += _md_table(("scenario", "pass", "fail"), [[k, str(d["pass"]), str(d["fail"])] for k, d in rt.items()])
    lines += ["## Formats", ""]
    for dim, counts in s["formats"].items():
        lines += [f"**{dim.replace('_', ' ')}**: " + ", ".join(f"{_md(_short(k))} {v}" for k, v in counts.items()), ""]
    if s["error_types"]:
        lines += ["**errors**: " + ", ".join(f"{_md(k)} {v}" for k, v in s["error_types"].items()), ""]
    lines += ["## Templates", ""]
    per = timings.get("per_template_ms", {})
    cells = [template_cells(t, per.get(t["name"], {})) for t in report["templates"]]
    header = list(cells[0]) if cells else []
    lines += _md_table(header, [list(c.values()) for c in cells])
    failed = [t for t in report["templates"] if t["error"]]
    if failed:
        lines += ["## Errors", ""]
        lines += [f"- {_md(t['name'])}: {_md(t['error']['type'])}: {_md(t['error']['message'][:300])}" for t in failed]
        lines.append("")
    return "\n".join(lines)


def markdown_comparison(cmp: Comparison) -> list[str]:
    lines = ["## Comparison with the baseline", "",
             ("**Regressions.** " if cmp.regressions else "**No regressions.** ") + comparison_verdict(cmp) + ".", ""]
    for title, items in comparison_sections(cmp):
        lines += [f"### {title}", ""] + [f"- {_md(x)}" for x in items] + [""]
    return lines


# ---------------------------------------------------------------------------------------- html

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1b1f24;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f6f8fa}.num{text-align:right}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 14px}
.card b{display:block;font-size:20px}.pass{color:#1a7f37}.fail{color:#cf222e}.na{color:#6e7781}
details{border:1px solid #d0d7de;border-radius:6px;margin:4px 0;padding:2px 8px}
details[open]{background:#fbfbfc}summary{cursor:pointer}
pre{white-space:pre-wrap;word-break:break-all;background:#f6f8fa;padding:6px;border-radius:4px;margin:4px 0}
samp,pre{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}.ws{color:#8250df}
.bad{background:#ffebe9}.charts{display:flex;flex-wrap:wrap;gap:24px}
"""
WS_LEGEND = "whitespace shown as ↵ newline, · space, ⇥ tab, ␍ carriage return, ∅ empty"


def _h(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _ws(text: str) -> str:
    """Escaped text with visible whitespace; newlines also break the line (inside <pre>)."""
    return _h(visible(text)).replace("↵", "↵\n") if text else "∅"


def svg_bars(title: str, items: Sequence[tuple[str, int]]) -> str:
    """A horizontal bar chart (inline SVG)."""
    label_w, bar_w, row_h = 240, 320, 20
    top = 26
    height = top + row_h * len(items) + 8
    most = max((v for _, v in items), default=1) or 1
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 60}" height="{height}" role="img" '
             f'aria-label="{_h(title)}"><text x="0" y="16" font-weight="bold" font-size="14">{_h(title)}</text>']
    for i, (label, value) in enumerate(items):
        y = top + i * row_h
        w = max(1, round(bar_w * value / most))
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" font-size="12">{_h(label)}</text>'
                     f'<rect x="{label_w}" y="{y + 3}" width="{w}" height="{row_h - 6}" fill="#4a7bd0"/>'
                     f'<text x="{label_w + w + 4}" y="{y + 14}" font-size="12">{value}</text>')
    return "".join(parts) + "</svg>"


def svg_histogram(title: str, values_ms: Sequence[float]) -> str:
    """Analysis times in log-spaced bins (inline SVG)."""
    edges = [0, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, float("inf")]
    labels = ["<10", "10–20", "20–50", "50–100", "100–200", "200–500", "0.5–1 s", "1–2 s", "2–5 s", "5–10 s",
              "≥10 s"]
    counts = [sum(1 for v in values_ms if lo <= v < hi) for lo, hi in zip(edges, edges[1:])]
    col_w, plot_h, left, top = 52, 160, 36, 26
    most = max(counts) or 1
    width = left + col_w * len(counts) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + plot_h + 40}" role="img" '
             f'aria-label="{_h(title)}"><text x="0" y="16" font-weight="bold" font-size="14">{_h(title)}</text>',
             f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 6}" y2="{top + plot_h}" stroke="#888"/>']
    for i, (label, n) in enumerate(zip(labels, counts)):
        h = round(plot_h * n / most)
        x = left + i * col_w
        parts.append(f'<rect x="{x + 4}" y="{top + plot_h - h}" width="{col_w - 8}" height="{h}" fill="#2da44e"/>'
                     f'<text x="{x + col_w / 2}" y="{top + plot_h - h - 3}" text-anchor="middle" font-size="11">'
                     f'{n}</text>'
                     f'<text x="{x + col_w / 2}" y="{top + plot_h + 14}" text-anchor="middle" font-size="10">'
                     f'{_h(label)}</text>')
    parts.append(f'<text x="{left}" y="{top + plot_h + 32}" font-size="11">analysis time (ms); bars: templates</text>')
    return "".join(parts) + "</svg>"


def svg_scenarios(fixed: dict[str, dict[str, int]]) -> str:
    """Fixed-point outcome per scenario: stacked pass / fail+error / skipped bars (inline SVG)."""
    label_w, bar_w, row_h, top = 170, 380, 22, 26
    colors = (("pass", "#2da44e"), ("fail", "#cf222e"), ("skip", "#afb8c1"))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 20}" '
             f'height="{top + row_h * len(fixed) + 24}" role="img" aria-label="fixed point by scenario">'
             '<text x="0" y="16" font-weight="bold" font-size="14">Fixed point by scenario</text>']
    for i, (name, f) in enumerate(fixed.items()):
        y, x = top + i * row_h, label_w
        values = {"pass": f["pass"], "fail": f["fail"] + f["error"], "skip": f["skip"]}
        total = sum(values.values()) or 1
        parts.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end" font-size="12">{_h(name)}</text>')
        for key, color in colors:
            w = bar_w * values[key] / total
            if w:
                parts.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="{color}">'
                             f'<title>{key}: {values[key]}</title></rect>')
            x += w
    y = top + row_h * len(fixed) + 14
    parts += [f'<rect x="{label_w + 90 * j}" y="{y - 9}" width="10" height="10" fill="{c}"/>'
              f'<text x="{label_w + 90 * j + 14}" y="{y}" font-size="11">{k}</text>' for j, (k, c) in enumerate(colors)]
    return "".join(parts) + "</svg>"


def _status(value: str) -> str:
    cls = {"pass": "pass", "fail": "fail", "error": "fail"}.get(value, "na")
    return f'<span class="{cls}">{_h(value)}</span>'


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]], raw: bool = False) -> str:
    head = "".join(f"<th>{_h(x)}</th>" for x in header)
    body = "".join("<tr>" + "".join(f"<td>{x if raw else _h(x)}</td>" for x in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def template_details(t: dict[str, Any], cells: dict[str, str]) -> str:
    """One template's collapsible detail."""
    bad = any(v == FAIL for v in t["checks"].values())
    summary = " · ".join(f"{_h(k)} <b>{_h(v)}</b>" for k, v in cells.items() if k != "template" and v)
    out = [f'<details id="{_h(t["name"])}"><summary><samp class="{"fail" if bad else ""}">{_h(t["name"])}</samp> '
           f'— {summary}</summary>']
    if t["error"]:
        out.append(f'<p class="fail">{_h(t["error"]["type"])}</p><pre>{_h(t["error"]["message"])}</pre>')
    a = t["analysis"]
    if a:
        rows = [[_h(k), f"<samp class='ws'>{_ws(v)}</samp>"] for k, v in a["markers"].items()]
        out.append("<p>Markers</p>" + _html_table(["marker", "text"], rows, raw=True))
        for title, items in (("Probe failures", a["probe_failures"]), ("Notes", a["notes"]),
                             ("Probes the formatter does not reproduce", a["unverified_probes"])):
            if items:
                out.append(f"<p>{title}</p><pre>" + _h("\n".join(items)) + "</pre>")
    gen = t.get("generation") or {}
    if gen.get("error"):
        out.append(f'<p class="fail">generation: {_h(gen["error"]["type"])}</p>'
                   f'<pre>{_h(gen["error"]["message"])}</pre>')
    rows = []
    for name, s in t["scenarios"].items():
        g = s.get("grammar") or {}
        rows.append([_h(name), _status(s["status"]) + (f" <small>{_h(s['via'])}</small>" if s.get("via", "render") != "render" else ""),
                     _h(s.get("skipped", "")),
                     _status({True: PASS, False: FAIL}.get(s.get("reconstructs"), NA)),
                     _status(g.get("status", NA))
                     + (f" <small>{_h(g['setting'])}</small>" if g.get("setting") else "")])
    if rows:
        out.append("<p>Fixed point</p>" + _html_table(["scenario", "result", "skipped because", "reconstructs",
                                                          "grammar accepts"], rows, raw=True))
    for name, s in t["scenarios"].items():
        g = s.get("grammar") or {}
        if s["status"] in (FAIL, "error") or s.get("reconstructs") is False or g.get("status") == FAIL:
            out.append(f'<div class="bad"><b>{_h(name)}</b>')
            if s.get("error"):
                out.append(f"<pre>{_h(s['error']['type'])}: {_h(s['error']['message'])}</pre>")
            if s.get("problems"):
                out.append("<ul>" + "".join(f"<li>{_h(p)}</li>" for p in s["problems"]) + "</ul>")
            if "generated" in s:
                out.append(f"<p>rendered output</p><pre class='ws'>{_ws(s['generated'])}</pre>")
            if s.get("reconstructs") is False:
                out.append(f"<p>reconstruct diff</p><pre>{_h(s['reconstruct_diff'])}</pre>")
            if g.get("status") == FAIL:
                out.append(f"<p>grammar ({_h(g['setting'])}): {_h(g['note'])}; text fed</p>"
                           f"<pre class='ws'>{_ws(g['text'])}</pre>")
            out.append("</div>")
    rejected = any((s.get("grammar") or {}).get("status") == FAIL for s in t["scenarios"].values())
    for g in (t.get("grammar") or {}).get("grammars", []):
        head = f"grammar for {', '.join(g['settings'])} ({'lazy' if g['lazy'] else 'whole output'})"
        lines = g["grammar"].splitlines()
        issues = "".join(f"<li>[{_h(i['kind'])}] {_h(i['message'])}<br><samp>{_h(_issue_line(lines, i))}</samp></li>"
                         for i in g["gbnf_issues"])
        # the text only where an engine refused it or a text: 450 grammars would make the page huge
        text = g["grammar"] if g["llguidance_refused"] or rejected else ""
        out.append(f"<details><summary>{_h(head)}: {len(g['gbnf_issues'])} GBNF issues"
                   f"{', llguidance refuses' if g['llguidance_refused'] else ''}</summary>"
                   + (f"<ul>{issues}</ul>" if issues else "")
                   + (f"<pre class='fail'>{_h(g['llguidance_refused'])}</pre>" if g["llguidance_refused"] else "")
                   + f"<p>triggers: <samp>{_h(json.dumps(g['triggers'], ensure_ascii=False))}</samp></p>"
                   + (f"<pre>{_h(_clip(text, 6000, ' (the whole grammar is in the JSON report)'))}</pre>"
                      if text else "") + "</details>")
    if (t.get("grammar") or {}).get("unavailable"):
        out.append(f"<p class='na'>{_h(t['grammar']['unavailable'])}</p>")
    return "".join(out) + "</details>"


def _issue_line(lines: list[str], issue: dict[str, Any]) -> str:
    """The grammar line an issue's message points at (``line L, column C: ...``), clipped around C."""
    m = re.match(r"line (\d+), column (\d+)", issue["message"])
    if not m or not 0 < int(m[1]) <= len(lines):
        return ""
    line, col = lines[int(m[1]) - 1], int(m[2])
    return ("…" if col > 60 else "") + line[max(0, col - 60):col + 60] + ("…" if len(line) > col + 60 else "")


def render_html(report: dict[str, Any], cmp: Comparison | None = None) -> str:
    s = report["summary"]
    per = report.get("timings", {}).get("per_template_ms", {})
    g = s["grammar"]
    cards = [("templates", s["templates"]), ("analysed", s["analysed"]), ("errors", s["errors"]),
             ("timeouts", s["timeouts"]),
             ("fixed point", _ratio(sum(f["pass"] for f in s["fixed_point"].values()),
                                    sum(f["pass"] + f["fail"] + f["error"] for f in s["fixed_point"].values()))),
             ("reconstructs", _ratio(s["reconstructs"]["ok"], s["reconstructs"]["checked"])),
             ("GBNF clean", _ratio(g["gbnf_clean"], g["grammars"])),
             ("llguidance compiles", _ratio(g["llguidance_compiled"], g["grammars"])),
             ("grammar accepts", _ratio(g["accepts"], g["accept_checked"]))]
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Chat template report</title>"
             f"<style>{CSS}</style></head><body><h1>Chat template report</h1><div class='cards'>"]
    parts += [f"<div class='card'><b>{_h(v)}</b>{_h(k)}</div>" for k, v in cards]
    parts.append("</div>")
    if cmp is not None:
        parts.append("<h2>Comparison with the baseline</h2>")
        parts.append(f"<p class='{'fail' if cmp.regressions else 'pass'}'>{_h(comparison_verdict(cmp))}</p>")
        for title, items in comparison_sections(cmp):
            parts.append(f"<p>{_h(title)}</p><ul>" + "".join(f"<li>{_h(x)}</li>" for x in items) + "</ul>")
    times = [t["analysis_ms"] for t in per.values() if "analysis_ms" in t]
    parts.append("<h2>Charts</h2><div class='charts'>")
    parts.append(svg_bars("Tool-call formats", [(_short(k), v) for k, v in s["formats"]["tool_format"].items()]))
    parts.append(svg_bars("Reasoning modes", [(_short(k), v) for k, v in s["formats"]["reasoning_mode"].items()]))
    parts.append(svg_scenarios(s["fixed_point"]))
    if times:
        parts.append(svg_histogram("Analysis time", times))
    parts.append("</div>")
    parts.append("<h2>Fixed point by scenario</h2>" + _html_table(SCENARIO_HEADER, scenario_rows(s)))
    parts.append("<h2>Deviations by perturbation</h2>" + _html_table(
        ("perturbation", "pass", "fail"), [[k, str(d["pass"]), str(d["fail"])] for k, d in s.get("deviations", {}).items()]))
    parts.append("<h2>Prefix-cache roundtrip by scenario (string level)</h2>" + _html_table(
        ("scenario", "pass", "fail"), [[k, str(d["pass"]), str(d["fail"])] for k, d in s.get("roundtrip", {}).items()]))
    parts.append("<h2>Formats</h2>")
    for dim, counts in s["formats"].items():
        parts.append(f"<p><b>{_h(dim.replace('_', ' '))}</b>: "
                     + ", ".join(f"{_h(_short(k))} {v}" for k, v in counts.items()) + "</p>")
    parts.append(f"<h2>Templates</h2><p class='na'>{_h(WS_LEGEND)}. Templates with a failing check are red.</p>")
    parts += [template_details(t, template_cells(t, per.get(t["name"], {}))) for t in report["templates"]]
    parts.append("</body></html>\n")
    return "".join(parts)


# ----------------------------------------------------------------------------------------- cli

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="template-report", description="Analyse chat templates and report on "
                                "formats, the render → parse fixed point, grammars and regressions.")
    p.add_argument("paths", nargs="*", help=".jinja / .gguf / tokenizer_config.json files, model folders, "
                                            "MANIFEST.tsv files or folders (recursive)")
    p.add_argument("--corpus", action="store_true", help="also the template corpus the tests read ($AUTOPARSER_CORPUS, "
                   "../shared/corpus, else the user cache, fetched first when it is missing)")
    p.add_argument("--out", help="folder for report.json, report.md and report.html (default: report/, "
                                 "unless --json/--markdown/--html name single outputs)")
    p.add_argument("--json", dest="json_path", help="write the JSON report here ('-': stdout)")
    p.add_argument("--markdown", help="write the Markdown summary here ('-': stdout)")
    p.add_argument("--html", help="write the HTML page here")
    p.add_argument("--baseline", help="a previous report or baseline JSON; regressions exit with 1")
    p.add_argument("--write-baseline", help="write the compact baseline (names and checks) here")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per template (default 60; 0: none)")
    p.add_argument("--no-timings", action="store_true", help="leave the 'timings' object out of the JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary line")
    p.add_argument("--no-cache", action="store_true", help="analyse every template afresh (analyses are kept on "
                   "disk by default: $AUTOPARSER_CACHE, else the user cache)")
    return p


def _run_with_progress(entries: list[Entry], jobs: int, timeout_s: float, show: bool):
    if not show:
        return run_all(entries, jobs, timeout_s)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn("templates"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("", total=len(entries))
        return run_all(entries, jobs, timeout_s, lambda e: bar.update(task, advance=1, description=e.name[-50:]))


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.paths and not args.corpus:
        parser.error("give templates or folders to report on, or --corpus")
    try:
        baseline = load_baseline(args.baseline) if args.baseline else None
        paths = list(args.paths)
        if args.corpus:
            paths.append(str(ensure_corpus(progress=lambda line: print(line, file=sys.stderr, flush=True))))
        entries = collect(paths)
    except (InputError, CorpusError) as e:
        print(f"template-report: error: {e}", file=sys.stderr)
        return EXIT_INPUT
    show = not args.quiet and sys.stderr.isatty()
    t0 = time.perf_counter()
    cache = "off" if args.no_cache else os.environ.get(analysis_cache.ENV_VAR) or "on"
    with analysis_cache.disk_cache_setting(cache):  # forked workers keep it
        results = _run_with_progress(entries, max(1, args.jobs), args.timeout, show)
    report = build_report(results, wall_s=time.perf_counter() - t0, jobs=max(1, args.jobs), timeout_s=args.timeout)
    cmp = compare(baseline, report) if baseline is not None else None
    if cmp is not None:
        report["comparison"] = cmp.to_dict()
    outputs = {"json": args.json_path, "markdown": args.markdown, "html": args.html}
    if args.out or not any(outputs.values()):
        out = Path(args.out or "report")
        outputs = {k: v or str(out / f"report.{ext}") for (k, v), ext in zip(outputs.items(), ("json", "md", "html"))}
    try:
        if outputs["json"]:
            _write(outputs["json"], report_json(report, timings=not args.no_timings))
        if outputs["markdown"]:
            _write(outputs["markdown"], render_markdown(report, cmp))
        if outputs["html"]:
            _write(outputs["html"], render_html(report, cmp))
        if args.write_baseline:
            _write(args.write_baseline, baseline_json(report))
    except OSError as e:
        print(f"template-report: error: {e.filename}: cannot write: {e.strerror}", file=sys.stderr)
        return EXIT_INPUT
    s = report["summary"]
    if not args.quiet:
        fp = s["fixed_point"]
        print(f"template-report: {s['templates']} templates, {s['analysed']} analysed, {s['errors']} errors, "
              f"{s['timeouts']} timeouts; fixed point {sum(f['pass'] for f in fp.values())}/"
              f"{sum(f['pass'] + f['fail'] + f['error'] for f in fp.values())}; "
              f"{report['timings'].get('wall_s')} s with {report['timings']['jobs']} jobs", file=sys.stderr)
    if cmp is not None:
        for line in change_lines(cmp.regressions):
            print(f"REGRESSION {line}", file=sys.stderr)
        print(f"template-report: {len(cmp.regressions)} regressions, {len(cmp.improvements)} improvements "
              f"against {args.baseline}", file=sys.stderr)
        return EXIT_REGRESSION if cmp.regressions else EXIT_OK
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
