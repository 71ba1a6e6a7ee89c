"""The probes of the tool-call analysis (one call, two, typed and tricky arguments) and the
context that renders and keeps their tool blocks (:class:`_Ctx`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from .. import probes as P
from ..caps import ToolProbeForms, tool_call_messages
from ..diff import common_prefix_len
from ..prober import Prober
from ..reasoning import Reasoning
from ..turns import Turns, assistant_region


# Probe argument keys, one per JSON type (schemas declare matching types: some templates
# write a type attribute from the schema).
K_INT, K_NUM, K_BOOL, K_NULL, K_ARR, K_OBJ = "count_key", "ratio_key", "flag_key", "empty_key", "list_key", "dict_key"
TYPE_PROBES: dict[str, tuple[str, Any]] = {
    "integer": (K_INT, 48213),
    "number": (K_NUM, 2.625),
    "boolean": (K_BOOL, True),
    "null": (K_NULL, None),
    "array": (K_ARR, [7, "Lyonq9needle"]),
    "object": (K_OBJ, {"inner_key": "Nantesq9needle", "depth": 2}),
}
TRICKY_ARGS: dict[str, dict[str, Any]] = {
    "tricky:nested": {K_OBJ: {"level": {"deep": [1, {"x": "y"}]}, "empty": {}}, K_ARR: [[1, 2], []]},
    "tricky:unicode": {P.ARG_S: "Zürich ünïcödé 日本語 🎉 ©"},
    "tricky:newlines_quotes": {P.ARG_S: 'line one\nline "two"\n\tand \'three\' \\ <b>&amp;</b>'},
    "tricky:numbers_bools": {K_INT: -7, K_NUM: 0.001, K_BOOL: False, K_NULL: None, "big_key": 12345678901234},
}
# The null-valued argument is declared a string: a "null" property type sends some templates'
# schema-printing macros into unbounded recursion.
# Special characters between anchor letters that no escape sequence uses: the rendering of
# each character can be read between its anchors.
ESCAPE_PROBE = "Q\nW\tX\"Y'Z\\K<V>J&H"
ESCAPE_CHARS = "\n\t\"'\\<>&"
_SCHEMA_TYPES = {P.ARG_S: "string", P.ARG_T: "string", K_INT: "integer", K_NUM: "number", K_BOOL: "boolean",
                 K_NULL: "string", K_ARR: "array", K_OBJ: "object", "big_key": "integer"}


# Spelled out though JSON Schema reads them so when absent: some templates print a type for every
# parameter and look these up unguarded (`json_spec.items`), failing on schemas without them.
_OPEN_SCHEMA = {"array": {"items": {}}, "object": {"additionalProperties": {}}}


def _make_probe_tools() -> list[dict[str, Any]]:
    props = {k: {"type": t, "description": f"probe {t}", **_OPEN_SCHEMA.get(t, {})} for k, t in _SCHEMA_TYPES.items()}
    return [P.tool_schema(n, props, required=[P.ARG_S]) for n in (P.FN_A, P.FN_B, P.FN_C)]


_PROBE_TOOLS = _make_probe_tools()


def probe_tools() -> list[dict[str, Any]]:
    """The probe tools (one shared list: renderers copy what they hand to a template)."""
    return _PROBE_TOOLS


Call = tuple[str, dict[str, Any], str]  # name, arguments, id


def _one(args: dict[str, Any], name: str = P.FN_A, cid: str = P.ID_A) -> list[Call]:
    return [(name, args, cid)]


ARGS_1 = {P.ARG_S: P.VAL_S}
ARGS_2 = {P.ARG_S: P.VAL_S, P.ARG_T: P.VAL_T}
PROBES: dict[str, list[Call]] = {
    "one": _one(ARGS_1),
    "one:name": _one(ARGS_1, name=P.FN_B),
    "one:id": _one(ARGS_1, cid=P.ID_B),
    "zero_args": _one({}),
    "two_args": _one(ARGS_2),
    "parallel": [(P.FN_A, ARGS_1, P.ID_A), (P.FN_B, {P.ARG_S: P.VAL_T}, P.ID_B)],
    "parallel3": [(P.FN_A, ARGS_1, P.ID_A), (P.FN_B, {P.ARG_S: P.VAL_T}, P.ID_B), (P.FN_C, {}, P.ID_C)],
    **{f"type:{t}": _one({k: v}) for t, (k, v) in TYPE_PROBES.items()},
    **{name: _one(args) for name, args in TRICKY_ARGS.items()},
    "escape": _one({P.ARG_S: ESCAPE_PROBE}),
    **{f"escape:{i}": _one({P.ARG_S: f"Q{ch}W"}) for i, ch in enumerate(ESCAPE_CHARS)},
}
# Probes the formatter must reproduce (the list); the rest only serve inference.
VERIFY = ("one", "one:name", "one:id", "zero_args", "two_args", "parallel", "parallel3",
          *(f"type:{t}" for t in TYPE_PROBES), *TRICKY_ARGS)


class _Fail(Exception):
    """Inference could not go on; the message says why (reported in the structure)."""


@dataclass
class _Ctx:
    prober: Prober
    forms: ToolProbeForms
    turns: Turns
    reasoning: Reasoning | tuple[str, str] | None
    eot: str
    content_none: bool
    content_wrapper: tuple[str, str] | None = None  # an empty wrapper before calls is not theirs
    final_suffix: str = ""  # what the template writes after the last message
    blocks: dict[str, str | None] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    prompts: tuple[str, str] | None = None  # (the prompt with tools, its generation prompt)

    def block(self, probe: str) -> str | None:
        if probe not in self.blocks:
            self.blocks[probe] = self._render_block(probe, PROBES[probe])
        return self.blocks[probe]

    def _render_block(self, probe: str, calls: list[Call], content: str | None = None) -> str | None:
        tools = probe_tools()
        base = [P.user()]
        if content is None and not self.content_none:
            content = ""
        msg = tool_call_messages(self.forms, calls, content=content)
        out = self.prober.try_render(f"tools[{probe}]", base + [msg], tools=tools)
        if not isinstance(out, str):
            self.failures[probe] = out.reason
            return None
        plain, gen = self._prompts()
        first = min((i for i in (out.find(c[0], common_prefix_len(plain, out)) for c in calls) if i >= 0),
                    default=len(out))
        start, header = assistant_region(out, plain, gen, anchor=P.USER, limit=first)
        block = out[start + header:]
        # what ends the last message: the final suffix, else (a turn the template leaves without
        # its closer) the final suffix's part after the closer, else the closer
        after_turn = self.final_suffix[len(self.eot):] if self.eot and self.final_suffix.startswith(self.eot) else ""
        for tail in sorted((t for t in (self.final_suffix, after_turn, self.eot) if t), key=len, reverse=True):
            if block.endswith(tail):
                block = block[:-len(tail)]
                break
        block = _strip_empty_reasoning(block, self.reasoning)
        return _strip_empty_reasoning(block, self.content_wrapper) if self.content_wrapper else block

    def _prompts(self) -> tuple[str, str]:
        """The prompt of a user message with the probe tools, and the generation prompt after
        it (rendered for the first block; every block is read against them)."""
        if self.prompts is None:
            tools, base = probe_tools(), [P.user()]
            plain = self.prober.render("tools[prompt]", base, tools=tools) or ""
            full = self.prober.render("tools[generation_prompt]", base, tools=tools, add_generation_prompt=True) or plain
            self.prompts = (plain, full[common_prefix_len(plain, full, tokens=True):])
        return self.prompts


def _strip_empty_reasoning(block: str, r: Reasoning | tuple[str, str] | None) -> str:
    """Drop an empty reasoning block written before the calls (it is not part of them)."""
    if r is None:
        return block
    start, end = (r.start.strip(), r.end.strip()) if isinstance(r, Reasoning) else (r[0].strip(), r[1].strip())
    if not end:
        return block
    pattern = (r"\s*" + (re.escape(start) + r"\s*" if start else "") + re.escape(end) + r"\s*")
    m = re.match(pattern, block)
    if m is None and start:
        m = re.match(r"\s*" + re.escape(end) + r"\s*", block)
    return block[m.end():] if m else block
