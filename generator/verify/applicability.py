"""Which scenarios apply to a template, decided without the analysis under test.

An oracle that skips where the analysis says "no tools" or "no reasoning" cannot see the
analysis miss them. These facts come from the template alone: renders of plain probe messages
(does a call's name show up in the turn? do two calls? does a message's reasoning?) and its
source (does it write a marker named with the chat API's word for reasoning, end its prompt
with a line that names it, or cut past answers at a closing marker, dropping what comes before
it?). The template's switches are turned on by name, from its source.

Example::

    >>> from chat_autoparser.analyzer import load_template
    >>> facts = source_facts(load_template("templates/chatml-think.jinja"))
    >>> facts.renders_calls, facts.writes_reasoning, facts.renders_tools
    (True, True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chat_autoparser.analyzer import probes as P
from chat_autoparser.analyzer.caps import ToolProbeForms, detect_content_format, detect_stand_ins, thinking_controls, tool_call_messages
from chat_autoparser.errors import ChatAutoparserError, RenderLimitError
from chat_autoparser.analyzer.load import LoadedTemplate
from chat_autoparser.analyzer.markers import REASONING_WORDS, is_closing, markers_in, mentions
from chat_autoparser.analyzer.reasoning import block_shapes, closer_candidates, content_split
from chat_autoparser.analyzer.prober import Prober
from chat_autoparser.analyzer.template_info import TemplateInfo, template_info
from chat_autoparser.analyzer.tool_calls import probe_tools

# Where a message's reasoning travels in the chat API; the template's own switches (variables
# named for thinking, read from its source) are turned on, one at a time.
_REASONING_FIELDS = (*P.REASONING_FIELDS, "thinking")
# The chat API's media blocks: they carry a file, not text the model wrote.
_MEDIA = frozenset({"image", "image_url", "video", "audio", "input_audio", "file"})


@dataclass(frozen=True, slots=True)
class SourceFacts:
    renders_calls: bool      # a call's name (or id) shows up in the assistant turn
    renders_parallel: bool   # two calls' names do
    renders_reasoning: bool  # a message's reasoning shows up in a past or last turn
    # a marker named for reasoning in the source, the prompt's last line naming it, or a closing
    # marker past answers are cut at
    reasoning_marker: str | None
    renders_tools: bool = False  # the request's tools show up in the prompt
    # every generation prompt (each thinking switch on) ends by closing a block named for
    # reasoning: the model cannot reason
    closes_reasoning: bool = False

    @property
    def writes_reasoning(self) -> bool:
        return self.renders_reasoning or self.reasoning_marker is not None


def _turn(out: str | None) -> str:
    return out[out.rfind(P.USER):] if out is not None and P.USER in out else ""


def _renders_calls(prober: Prober, calls: list[tuple[str, dict, str]]) -> bool:
    """Whether the turn shows each call's name or id more often than the same turn with the
    calls renamed (a tool result may print the name of the call it answers)."""
    others = [(P.FN_C, args, P.ID_C[:-1] + str(i)) for i, (_, args, _) in enumerate(calls)]
    for as_string in (False, True):
        for empty in (False, True):
            forms = ToolProbeForms(as_string, True, empty)
            results = [P.tool_result(call_id=cid, name=name) for name, _, cid in calls]
            for after in ([], results):  # some templates read the results along
                turn, plain = (_turn(prober.render("applies:calls", [P.user(), tool_call_messages(forms, c), *after],
                                                   tools=probe_tools(), record=False)) for c in (calls, others))
                if turn and plain and all(turn.count(name) + turn.count(cid) > plain.count(name) + plain.count(cid)
                                          for name, _, cid in calls):
                    return True
    return False


def _renders_tools(prober: Prober) -> bool:
    """Whether the prompt shows the request's tools (each one's name, absent without them)."""
    names = [t["function"]["name"] for t in probe_tools()]
    plain = prober.render("applies:prompt", [P.user()], add_generation_prompt=True, record=False) or ""
    shown = prober.render("applies:tools", [P.user()], tools=probe_tools(), add_generation_prompt=True,
                          record=False) or ""
    return all(shown.count(n) > plain.count(n) for n in names)


def _closes_reasoning(prober: Prober, info: TemplateInfo | None) -> bool:
    """Whether the generation prompt, under the template's default and each of its thinking
    switches turned on, ends with a closing marker named for reasoning."""
    for kwargs in _settings(info):
        prompt = prober.render("applies:prompt", [P.user()], add_generation_prompt=True, record=False, **kwargs)
        tail = markers_in((prompt or "").rstrip()[-64:])
        if not (tail and (prompt or "").rstrip().endswith(tail[-1]) and is_closing(tail[-1])
                and mentions(tail[-1], REASONING_WORDS)):
            return False
    return True


# The values of one switch tried: True, and the constants the source compares it with.
MAX_SWITCH_VALUES = 4


def _settings(info: TemplateInfo | None) -> list[dict[str, Any]]:
    """The default, and each switch the source names for thinking set to True and to each
    constant the source compares it with (``reasoning_effort == 'high'``)."""
    out: list[dict[str, Any]] = [{}]
    for name in thinking_controls(info) if info is not None else ():
        out += [{name: v} for v in (True, *info.constants_for(name)[:MAX_SWITCH_VALUES])]
    return out


def _reasoning_messages(prober: Prober) -> list[dict[str, Any]]:
    """Assistant messages carrying the probe reasoning every way the API or the template's own
    content blocks can (the analysis' reading of the blocks, media blocks left out)."""
    out = [{"role": "assistant", "content": P.CONTENT, field: P.REASONING} for field in _REASONING_FIELDS]
    return out + [{"role": "assistant", **fields} for kind, _, fields in block_shapes(prober)
                  if kind.type not in _MEDIA]


def _renders_reasoning(prober: Prober, info: TemplateInfo | None) -> bool:
    call = [(P.FN_A, {P.ARG_S: P.VAL_S}, P.ID_A)]
    for msg in _reasoning_messages(prober):
        with_call = {**tool_call_messages(ToolProbeForms(False, True, False), call), **msg}
        conversations = ([P.user(), msg], [P.user(), msg, P.user(P.USER2)],  # last turn, past turn,
                         [P.user(), with_call, P.tool_result()])              # and a tool-call turn
        for convo in conversations:
            tools = probe_tools() if len(convo) == 3 and convo[-1]["role"] == "tool" else None
            for kwargs in _settings(info):
                out = prober.render("applies:reasoning", convo, tools=tools, record=False, **kwargs)
                if P.REASONING in _turn(out):
                    return True
    return False


def reasoning_line(prompt: str) -> str | None:
    """The prompt's last line when it names reasoning (``Here are my reasoning steps:``)."""
    last = prompt.rstrip().rsplit("\n", 1)[-1]
    return last if mentions(last, REASONING_WORDS) else None


def _reasoning_marker(prober: Prober, info: TemplateInfo | None) -> str | None:
    """A marker named for reasoning that the source writes, the generation prompt's last line
    when it names reasoning (``Here are my reasoning steps:``), or a closing marker past answers
    are cut at (what a past answer writes before it is dropped: reasoning)."""
    literals = info.literals if info is not None else ()
    named = sorted({m for lit in literals for m in markers_in(lit) if mentions(m, REASONING_WORDS)})
    if named:
        return named[0]
    for kwargs in _settings(info):
        prompt = prober.render("applies:prompt", [P.user()], add_generation_prompt=True, record=False, **kwargs)
        last = reasoning_line(prompt or "")
        if last is not None:
            return last
    # a closing marker the template cuts past answers at, dropping what stands before it
    return next((closer for opener, closer in closer_candidates(info) if content_split(prober, opener, closer)
                 == "stripped"), None)


def _facts(template: LoadedTemplate, engine: str) -> SourceFacts:
    prober = Prober(template, engine=engine)
    prober.content_format = detect_content_format(prober)  # (some templates read text parts only)
    detect_stand_ins(prober)  # custom variables a template cannot render without get empty values
    one = [(P.FN_A, {P.ARG_S: P.VAL_S}, P.ID_A)]
    two = one + [(P.FN_B, {P.ARG_S: P.VAL_S}, P.ID_B)]
    try:
        info: TemplateInfo | None = template_info(template.source)
    except Exception:  # noqa: BLE001 - jinja2 cannot parse it (minijinja renders it): no source facts
        info = None
    try:
        calls = _renders_calls(prober, one)
        return SourceFacts(renders_calls=calls, renders_parallel=calls and _renders_calls(prober, two),
                           renders_reasoning=_renders_reasoning(prober, info),
                           reasoning_marker=_reasoning_marker(prober, info), renders_tools=_renders_tools(prober),
                           closes_reasoning=_closes_reasoning(prober, info))
    except RenderLimitError:
        raise  # out of time or memory: unknown, not "nothing applies" (and not cached)
    except ChatAutoparserError:  # the template cannot be rendered at all: nothing applies
        return SourceFacts(False, False, False, None)


_CACHE: dict[tuple, SourceFacts] = {}
_CACHE_SIZE = 64


def source_facts(template: LoadedTemplate, engine: str = "jinja2") -> SourceFacts:
    """What ``template`` writes, rendered by ``engine``, from its renders and source alone (see
    the module docstring). Raises :class:`~chat_autoparser.errors.RenderLimitError` when the renders
    run out of time or memory."""
    key = (tuple(sorted(template.variants.items())), template.selected,
           repr(sorted(template.special_tokens.items())), engine)
    if key not in _CACHE:
        facts = _facts(template, engine)
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = facts
    return _CACHE[key]
