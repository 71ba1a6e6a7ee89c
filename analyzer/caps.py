"""Capability probing (seed 003): render needles and see which ones come out.

Each capability is one or two renders. A template "supports" a feature when the feature's
needle appears in the part of the output that the feature's message produced; a template
that raises, or silently drops the needle, does not.

Example::

    >>> from chat_autoparser.analyzer.load import from_string
    >>> from chat_autoparser.analyzer.prober import Prober
    >>> t = from_string("{% for m in messages %}{{ m.role }}:{{ m.content }}\\n{% endfor %}")
    >>> probe_caps(Prober(t)).supports_system_role
    True
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from . import probes as P
from .diff import common_prefix_len
from ..errors import TemplateRaised
from .prober import Prober
from .structures import Caps
from .template_info import TemplateInfo, template_info


@dataclass(frozen=True, slots=True)
class ToolProbeForms:
    """How tool-call probes must be written for this template."""

    args_as_string: bool  # pass arguments as a JSON string (else as an object)
    with_ids: bool
    empty_content: bool = False  # the template needs content "" on tool-call turns (not absent)


def _region(prober: Prober, probe: str, before: list[dict], after: list[dict], **kw: Any) -> str | None:
    """The text ``after`` adds over ``before`` (both rendered the same way), or None."""
    a = prober.render(probe + ":base", before, **kw)
    b = prober.render(probe, after, **kw)
    if a is None or b is None:
        return None
    return b[common_prefix_len(a, b):]


def detect_content_format(prober: Prober) -> str:
    """'string' when plain string content renders, 'parts' when only content parts do."""
    out = prober.try_render("content_format:string", [P.user()])
    if isinstance(out, str) and P.USER in out:
        return "string"
    parts = prober.try_render("content_format:parts", P.as_parts([P.user()]))
    if isinstance(parts, str) and P.USER in parts:
        return "parts"
    return "string"


def _tools_for(*names: str) -> list[dict[str, Any]]:
    return [P.tool_schema(n) for n in names]


def tool_call_messages(forms: ToolProbeForms, calls: list[tuple[str, dict[str, Any], str]],
                       content: str | None = None, **extra: Any) -> dict[str, Any]:
    """An assistant message with ``calls`` written the way this template wants them (no content
    is written as "" for templates that need a string)."""
    tool_calls = [P.tool_call(name, json.dumps(args, ensure_ascii=False) if forms.args_as_string else args,
                              cid if forms.with_ids else None) for name, args, cid in calls]
    if content is None and forms.empty_content:
        content = ""
    return P.assistant(content, tool_calls=tool_calls, **extra)


def detect_tool_forms(prober: Prober, base: list[dict]) -> tuple[ToolProbeForms | None, dict[str, bool]]:
    """Find a message form under which a tool call renders: arguments as an object or a JSON
    string, content absent (None, which transformers drops) or empty."""
    tools = _tools_for(P.FN_A, P.FN_B)
    args = {P.ARG_S: P.VAL_S}
    regions: dict[tuple[bool, bool], str | None] = {}
    for content_none in (True, False):
        for as_string in (False, True):
            forms = ToolProbeForms(args_as_string=as_string, with_ids=True)
            msg = tool_call_messages(forms, [(P.FN_A, args, P.ID_A)], content=None if content_none else "")
            kind = "string" if as_string else "object"
            probe = f"tool_call[{kind} args]" if content_none else f"tool_call[{kind} args, empty content]"
            regions[(content_none, as_string)] = _region(prober, probe, base, base + [msg], tools=tools)

    def well_formed(region: str | None) -> bool:
        # the call (by name, or by id when the id carries the name) and the argument value must
        # come out, not double-encoded and not as a Python dict repr
        return bool(region and (P.FN_A in region or P.ID_A in region) and P.VAL_S in region
                    and '\\"' not in region and "{'" not in region)

    args_json = json.dumps(args, ensure_ascii=False)
    flags = {"requires_object_arguments": False, "requires_string_arguments": False,
             "requires_nonnull_content": False}
    for content_none in (True, False):
        obj, string = regions[(content_none, False)], regions[(content_none, True)]
        if well_formed(obj) or well_formed(string):
            # a string pasted where the object form writes the template's own syntax is not
            # the model's format either: the object form is required then
            pasted = (well_formed(obj) and string is not None and obj != string and args_json in string
                      and args_json not in obj)
            flags["requires_object_arguments"] = well_formed(obj) and (not well_formed(string) or pasted)
            flags["requires_string_arguments"] = well_formed(string) and not well_formed(obj)
            flags["requires_nonnull_content"] = not content_none
            return ToolProbeForms(args_as_string=not well_formed(obj), with_ids=True,
                                  empty_content=not content_none), flags
    for content_none in (True, False):  # the name renders but not the value: still a call
        for as_string in (False, True):
            region = regions[(content_none, as_string)]
            if region and P.FN_A in region:
                flags["requires_nonnull_content"] = not content_none
                return ToolProbeForms(args_as_string=as_string, with_ids=True, empty_content=not content_none), flags
    return None, flags


def thinking_controls(info: TemplateInfo) -> tuple[str, ...]:
    """Template variables that look like thinking switches: named with the serving API's words
    for it (``enable_thinking``, ``reasoning_effort``), or tested only where such a switch is on
    (``{% if thinking %}{% if not keep_history %}``). No model names.

    >>> from chat_autoparser.analyzer.template_info import template_info
    >>> thinking_controls(template_info("{% if thinking %}{% if not keep %}x{% endif %}{% endif %}{{ other }}"))
    ('keep', 'thinking')
    """
    named = {var for var in info.variables
             if var not in P.NOT_CONTROLS and any(w in var.lower() for w in P.THINKING_VARIABLE_WORDS)}
    under = {inner for var, inners in info.guarded if var in named for inner in inners}
    return tuple(sorted(named | (under - P.NOT_CONTROLS)))


def detect_requires_tools(prober: Prober) -> bool:
    """True when the template fails without tools but renders with them (tool-only templates,
    e.g. a ``tool_use`` variant shipped alone); probes then always pass the probe tools."""
    plain = prober.try_render("requires_tools:none", [P.user()], add_generation_prompt=True)
    if isinstance(plain, str) or isinstance(plain, TemplateRaised):
        return False
    with_tools = prober.try_render("requires_tools:tools", [P.user()], tools=_tools_for(P.FN_A),
                                   add_generation_prompt=True)
    return isinstance(with_tools, str)


_UNDEFINED = re.compile(r"'(\w+)' is undefined")
MAX_STAND_INS = 3


def detect_stand_ins(prober: Prober) -> dict[str, str]:
    """Custom top-level variables the template cannot render without (``functions``, ...):
    each gets an empty stand-in so the rest of it can be probed."""
    found: dict[str, str] = {}
    for _ in range(MAX_STAND_INS):
        out = prober.try_render("stand_ins", [P.user()], add_generation_prompt=True)
        if isinstance(out, str):
            break
        m = _UNDEFINED.search(out.reason)
        if m is None or m.group(1) in found:
            break
        found[m.group(1)] = ""
        prober.default_kwargs[m.group(1)] = ""
    return found


def probe_caps(prober: Prober) -> Caps:
    """Probe every capability of the template behind ``prober``."""
    stand_ins = detect_stand_ins(prober)
    prober.content_format = detect_content_format(prober)
    requires_tools = detect_requires_tools(prober)
    if requires_tools:
        prober.default_tools = _tools_for(P.FN_A, P.FN_B)
    base = [P.user()]

    sys_out = prober.render("system_role", [P.system(), P.user()])
    supports_system = sys_out is not None and P.SYSTEM in sys_out

    supports_tools = False
    for convo in ([P.user()], [P.system(), P.user()]):  # some templates list tools only with a system turn
        plain = prober.render(f"tools:base[{len(convo)}]", convo)
        with_tools = prober.render(f"tools[{len(convo)}]", convo, tools=_tools_for(P.FN_A))
        if with_tools is not None and P.FN_A in with_tools and (requires_tools or plain is None or P.FN_A not in plain):
            supports_tools = True
            break

    forms, flags = detect_tool_forms(prober, base)
    supports_calls = forms is not None
    supports_responses = supports_parallel = requires_nonnull = False
    if forms is not None:
        tools = _tools_for(P.FN_A, P.FN_B)
        call = tool_call_messages(forms, [(P.FN_A, {P.ARG_S: P.VAL_S}, P.ID_A)])
        resp = _region(prober, "tool_response", base + [call], base + [call, P.tool_result()], tools=tools)
        supports_responses = resp is not None and P.TOOL_RESULT in resp
        two = tool_call_messages(forms, [(P.FN_A, {P.ARG_S: P.VAL_S}, P.ID_A),
                                         (P.FN_B, {P.ARG_S: P.VAL_T}, P.ID_B)])
        region = _region(prober, "parallel_tool_calls", base, base + [two], tools=tools)
        supports_parallel = region is not None and P.FN_A in region and P.FN_B in region
        # null content: transformers drops None-valued keys, so a template that reads
        # message.get('content') sees None and may print "None"; one that needs a string raises.
        loose = ToolProbeForms(args_as_string=forms.args_as_string, with_ids=True, empty_content=False)
        null_msg = tool_call_messages(loose, [(P.FN_A, {P.ARG_S: P.VAL_S}, P.ID_A)], content=None)
        empty_msg = tool_call_messages(loose, [(P.FN_A, {P.ARG_S: P.VAL_S}, P.ID_A)], content="")
        requires_nonnull = flags["requires_nonnull_content"]
        for after in ([], [P.tool_result()]):  # the call as the last message, and followed by a result
            null_region = _region(prober, f"null_content[{len(after)}]", base, base + [null_msg] + after, tools=tools)
            empty_region = _region(prober, f"empty_content[{len(after)}]", base, base + [empty_msg] + after,
                                   tools=tools)
            if empty_region is not None and (null_region is None or ("None" in null_region
                                                                     and "None" not in empty_region)):
                requires_nonnull = True
        if requires_nonnull and not forms.empty_content:
            forms = ToolProbeForms(forms.args_as_string, True, empty_content=True)
            call = tool_call_messages(forms, [(P.FN_A, {P.ARG_S: P.VAL_S}, P.ID_A)])
            resp = _region(prober, "tool_response:nonnull", base + [call], base + [call, P.tool_result()],
                           tools=tools)
            supports_responses = supports_responses or (resp is not None and P.TOOL_RESULT in resp)
            two = tool_call_messages(forms, [(P.FN_A, {P.ARG_S: P.VAL_S}, P.ID_A),
                                             (P.FN_B, {P.ARG_S: P.VAL_T}, P.ID_B)])
            region = _region(prober, "parallel_tool_calls:nonnull", base, base + [two], tools=tools)
            supports_parallel = supports_parallel or (region is not None and P.FN_A in region and P.FN_B in region)

    info = _info(prober)
    controls = thinking_controls(info) if info is not None else ()
    if "enable_thinking" in (info.variables if info else ()) and "enable_thinking" not in controls:
        controls = ("enable_thinking",) + controls

    return Caps(
        supports_system_role=supports_system,
        supports_tools=supports_tools,
        supports_tool_calls=supports_calls,
        supports_tool_responses=supports_responses,
        supports_parallel_tool_calls=supports_parallel,
        requires_object_arguments=flags.get("requires_object_arguments", False),
        requires_string_arguments=flags.get("requires_string_arguments", False),
        requires_nonnull_content=requires_nonnull,
        supports_thinking_toggle=False,  # set from the thinking settings (analyzer.analyze)
        content_format=prober.content_format,
        requires_tools=requires_tools,
        stand_in_variables=tuple(sorted(stand_ins)),
        thinking_controls=controls,
    )


def _info(prober: Prober) -> TemplateInfo | None:
    try:
        return template_info(prober.template.source)
    except Exception:  # a template minijinja renders but jinja2 cannot parse
        return None


def tool_forms(caps: Caps) -> ToolProbeForms:
    """How tool-call probes are written: arguments as an object unless the template takes only
    strings; content "" when the template needs a string there."""
    return ToolProbeForms(args_as_string=caps.requires_string_arguments, with_ids=True,
                          empty_content=caps.requires_nonnull_content)
