"""The analysis result: frozen dataclasses that round-trip through JSON.

Field names follow the auto-parser design (seed 001) and ``DESIGN.md``. Extra fields may
be added; none are removed or renamed without a changelog entry.

Example::

    >>> a = TemplateAnalysis(template="t.jinja")
    >>> TemplateAnalysis.from_dict(a.to_dict()) == a
    True
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class ReasoningMode(str, enum.Enum):
    NONE = "REASONING_NONE"          # no reasoning markers
    OPTIONAL = "REASONING_OPTIONAL"  # the model may open reasoning itself
    FORCED_OPEN = "REASONING_FORCED_OPEN"  # the prompt opened it (explicitly or implicitly)
    # Extension: the generation prompt itself writes a closed, empty reasoning block
    # (enable_thinking=false in Qwen3): the model is told not to reason, and output is
    # content. Seed 001 folds this into NONE, which loses the markers the parser still
    # needs to tolerate a stray close tag.
    DISABLED = "REASONING_DISABLED"


class ContentMode(str, enum.Enum):
    PLAIN = "CONTENT_PLAIN"
    ALWAYS_WRAPPED = "CONTENT_ALWAYS_WRAPPED"
    WRAPPED_WITH_REASONING = "CONTENT_WRAPPED_WITH_REASONING"


class FunctionFormat(str, enum.Enum):
    NONE = "FUNC_NONE"
    JSON_OBJECT = "FUNC_JSON_OBJECT"
    TAG_WITH_NAME = "FUNC_TAG_WITH_NAME"
    TAG_NAME_ONLY = "FUNC_TAG_NAME_ONLY"
    PREFIXED_INDEXED = "FUNC_PREFIXED_INDEXED"
    NAME_AS_KEY = "FUNC_NAME_AS_KEY"
    BRACKET_TAG = "FUNC_BRACKET_TAG"
    RECIPIENT_BASED = "FUNC_RECIPIENT_BASED"
    MARKDOWN_CODE_BLOCK = "FUNC_MARKDOWN_CODE_BLOCK"
    CHANNEL_BASED = "FUNC_CHANNEL_BASED"
    # Extension: Python call syntax, ``name(key=value, ...)``, often inside a list
    # (``[f(a=1), g(b=2)]``); seed 001's set has no member for it (llama.cpp hands these
    # templates to a dedicated parser).
    PYTHONIC = "FUNC_PYTHONIC"


class ArgumentFormat(str, enum.Enum):
    NONE = "ARGS_NONE"
    JSON = "ARGS_JSON"
    TAGGED = "ARGS_TAGGED"
    KEY_VALUE_TAGS = "ARGS_KEY_VALUE_TAGS"


@dataclass(frozen=True, slots=True)
class Caps:
    """What the template can render (seed 003 capability probing)."""

    supports_system_role: bool = False
    supports_tools: bool = False
    supports_tool_calls: bool = False
    supports_tool_responses: bool = False
    supports_parallel_tool_calls: bool = False
    requires_object_arguments: bool = False
    # Extension: the template renders arguments well only when given as a JSON string
    # (it concatenates them as text, printing a Python dict repr otherwise).
    requires_string_arguments: bool = False
    requires_nonnull_content: bool = False
    supports_thinking_toggle: bool = False
    # "string" (content as text) or "parts" (content as [{"type": "text", "text": ...}]),
    # as vLLM's chat_template_content_format.
    content_format: str = "string"
    # Extension: the template fails unless tools are passed (a tool-only variant); every probe
    # then passes the probe tools.
    requires_tools: bool = False
    # Custom variables the template fails without; probed with an empty stand-in.
    stand_in_variables: tuple[str, ...] = ()
    # The message key the template reads reasoning from ("" when it reads none).
    reasoning_field: str = ""
    # Template variables that switch thinking on/off (enable_thinking, thinking, ...).
    thinking_controls: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ContentStructure:
    """Phase 1: how the template writes reasoning and content."""

    reasoning_mode: ReasoningMode = ReasoningMode.NONE
    reasoning_start: str = ""
    reasoning_end: str = ""
    content_mode: ContentMode = ContentMode.PLAIN
    content_start: str = ""
    content_end: str = ""
    # How the reasoning markers were found: "reasoning_field", "content_blocks",
    # "content_split", "thinking_toggle", "prompt_end", "adjacent_pair", or "".
    reasoning_source: str = ""
    # Where past reasoning is kept when re-rendered: "all", "last_turn", "tool_turns", "none".
    reasoning_kept: str = ""


@dataclass(frozen=True, slots=True)
class ThinkingSetting:
    """One setting of the thinking controls and what the generation prompt does under it."""

    name: str
    kwargs: tuple[tuple[str, Any], ...] = ()
    generation_prompt: str = ""
    reasoning_mode: ReasoningMode = ReasoningMode.NONE
    # a request with tools, when its generation prompt leaves the model in another mode (some
    # templates close reasoning in the prompt only then); None when it is the same
    tools_generation_prompt: str | None = None
    tools_reasoning_mode: ReasoningMode | None = None

    def mode_for(self, with_tools: bool) -> ReasoningMode:
        """The reasoning mode of a request with or without tools."""
        return self.tools_reasoning_mode if with_tools and self.tools_reasoning_mode is not None \
            else self.reasoning_mode

    @property
    def kwargs_dict(self) -> dict[str, Any]:
        return dict(self.kwargs)


@dataclass(frozen=True, slots=True)
class ValueFormat:
    """How a JSON value is written: standard JSON, Python ``repr``/``str``, or a JSON-like
    dialect (other string delimiters, unquoted keys, ...), learned from renders.

    ``raw_strings``: a string at the top level is written as is (tagged arguments such as
    ``<parameter=k>Paris</parameter>``); nested strings still use the delimiters.
    ``escape``: how string bodies are escaped: "json", "python" (``repr``, quotes chosen
    per string), or "none".
    """

    kind: str = "json"  # "json" | "python_repr" | "python_str" | "dialect" | "units"
    raw_strings: bool = False
    sort_keys: bool = False  # objects written with keys sorted (tojson(sort_keys=True), dictsort)
    # "units": objects are written as argument units (the tagged unit, recursively) and arrays
    # as units keyed ``item_key``; strings raw, booleans as JSON.
    item_key: str = ""
    # Strings that contain one of these characters are wrapped in an XML CDATA section.
    cdata_chars: str = ""
    # tojson(indent=N) inside a larger indented document: newlines get ``indent_base`` more spaces.
    indent: int = 0
    indent_base: int = 0
    # escape="table": each listed character is replaced by its text (learned from renders).
    escapes: tuple[tuple[str, str], ...] = ()
    ensure_ascii: bool = False
    str_open: str = '"'
    str_close: str = '"'
    escape: str = "json"
    key_open: str = '"'
    key_close: str = '"'
    kv_sep: str = ": "
    item_sep: str = ", "
    obj_open: str = "{"
    obj_close: str = "}"
    arr_open: str = "["
    arr_close: str = "]"
    true: str = "true"
    false: str = "false"
    null: str = "null"


class PartKind(str, enum.Enum):
    """The kinds of :class:`Part`; each value is the kind's name in the analysis JSON. It
    compares, hashes, formats and reprs as that string (``PartKind.LIT == "lit"``).

    "lit": literal text; "name", "id": the tool's name and the call's id; "index": the call's
    number; "args": the whole arguments value; "key", "value": one argument's key and value
    (tagged arguments); "typed": a literal chosen by the JSON type of the argument's value.
    """

    LIT = "lit"
    NAME = "name"
    ID = "id"
    INDEX = "index"
    ARGS = "args"
    KEY = "key"
    VALUE = "value"
    TYPED = "typed"

    __str__ = str.__str__
    __format__ = str.__format__
    __repr__ = str.__repr__  # messages and reprs of parts read as before: 'lit'


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of a tool call as the template writes it: its :class:`PartKind` (a string
    given is read as one; an unknown kind raises ``ValueError``), the literal's ``text`` (for
    "index", the base: "0" or "1") and, for "typed", the literal written for each JSON type
    (``by_type``).
    """

    kind: PartKind
    text: str = ""
    by_type: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if type(self.kind) is not PartKind:
            object.__setattr__(self, "kind", PartKind(self.kind))


@dataclass(frozen=True, slots=True)
class ToolCallStructure:
    """Phase 2: how the template writes tool calls (field names from seed 001)."""

    supports_tools: bool = False
    tool_section_start: str = ""
    tool_section_end: str = ""
    function_format: FunctionFormat = FunctionFormat.NONE
    name_field: str = ""
    args_field: str = ""
    id_field: str = ""
    function_prefix: str = ""
    function_suffix: str = ""
    function_close: str = ""
    per_call_start: str = ""
    function_namespace: str = ""
    args_marker: str = ""
    per_call_end: str = ""
    id_marker: str = ""
    code_block_marker: str = ""
    code_block_language: str = ""
    argument_format: ArgumentFormat = ArgumentFormat.NONE
    arg_prefix: str = ""
    arg_suffix: str = ""
    arg_close: str = ""
    arg_separator: str = ""
    requires_nonnull_content: bool = False
    reason: str = ""  # why tools are unsupported, when they are
    # --- extensions: the exact skeleton the formatter and parser generator use -----------
    # A call is ``call_parts`` in order; calls are joined by ``call_separator`` and wrapped in
    # tool_section_start/end. Tagged arguments repeat ``arg_parts`` joined by arg_separator.
    call_parts: tuple[Part, ...] = ()
    call_separator: str = ""
    args_mode: str = ""  # "whole" (one serialized value) | "tagged" (one unit per argument)
    args_format: ValueFormat = field(default_factory=ValueFormat)
    arg_parts: tuple[Part, ...] = ()
    value_formats: tuple[tuple[str, ValueFormat], ...] = ()  # JSON type -> format (tagged)
    args_empty: str | None = None  # text written for zero arguments when it is not the format's own
    skip_null_args: bool = False  # arguments whose value is null are not written
    supports_parallel: bool = False
    content_separator: str = ""   # between content and the tool section (content + calls)
    calls_after_content: bool = False
    # the template writes a message's content after its calls (the model may go on writing)
    content_after_calls: bool = False
    reasoning_on_tool_turns: bool = False
    source: str = ""  # "rendered" (assistant tool calls render) | "instructions" | ""
    value_schema_typed: bool = False  # typed literals follow the tool schema, not the value
    # markers the template's source writes in its tool-call blocks that the probes' renders do
    # not show (another form of a call: ``<|python_tag|>`` for built-in tools); the parser
    # accepts calls they open, and triggers fire on them
    alt_openers: tuple[str, ...] = ()
    verified: tuple[str, ...] = ()    # probes the formatter reproduced byte for byte
    unverified: tuple[tuple[str, str], ...] = ()  # probe -> why the formatter differs


@dataclass(frozen=True, slots=True)
class ProbeFailure:
    """A probe render that failed, and why (kept so reports can say which probe failed)."""

    probe: str
    error: str
    kind: str = "error"  # "raised" (template refused), "limit", "error"


@dataclass(frozen=True, slots=True)
class TemplateAnalysis:
    """Everything the analysis found about one template."""

    template: str
    sha256: str = ""
    engine: str = "jinja2"
    caps: Caps = field(default_factory=Caps)
    content_structure: ContentStructure = field(default_factory=ContentStructure)
    tool_call_structure: ToolCallStructure = field(default_factory=ToolCallStructure)
    generation_prompt: str = ""
    generation_prompt_thinking: str = ""
    assistant_start: str = ""
    end_of_turn: str = ""
    # What the template writes after the last message's content when it differs from
    # end_of_turn (an end-of-sequence token, a header it always appends): text that may end
    # the output, and is then not content.
    final_suffix: str = ""
    # Whitespace the template writes between the generation prompt and the message's text
    # (" " after "ASSISTANT:"): the model generates it first; it is not content.
    message_prefix: str = ""
    thinking_settings: tuple[ThinkingSetting, ...] = ()
    probe_failures: tuple[ProbeFailure, ...] = ()
    fallback_renders: tuple[str, ...] = ()  # probes rendered by a fallback engine/sandbox
    notes: tuple[str, ...] = ()
    tokens_are_stand_ins: bool = False

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TemplateAnalysis":
        return from_plain(cls, data)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, **kwargs)

    @classmethod
    def from_json(cls, text: str) -> "TemplateAnalysis":
        return cls.from_dict(json.loads(text))

    def setting(self, name: str) -> ThinkingSetting | None:
        return next((s for s in self.thinking_settings if s.name == name), None)

    def generation_prompts(self) -> set[str]:
        """Every generation prompt the analysis found: the default and thinking ones, and each
        setting's, with and without tools."""
        return {self.generation_prompt, self.generation_prompt_thinking} | {
            p for s in self.thinking_settings for p in (s.generation_prompt, s.tools_generation_prompt) if p}


# --------------------------------------------------------------------------- (de)serialization

def to_plain(obj: Any) -> Any:
    """Dataclasses → dicts, enums → values, tuples → lists (recursively)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    return obj


def _same(value: Any) -> Any:
    return value


@lru_cache(maxsize=None)
@typing.no_type_check
def _converter(tp: Any) -> Callable[[Any], Any]:
    """The function that reads a plain value as type ``tp`` (None stays None), its decisions
    made once per type."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return _same
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _converter(args[0]) if len(args) == 1 else _same
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _converter(args[0])
            return lambda value: None if value is None else tuple(item(v) for v in value)
        items = [_converter(a) for a in args]
        return lambda value: None if value is None else tuple(c(v) for c, v in zip(items, value))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return lambda value: None if value is None else tp(value)
    if dataclasses.is_dataclass(tp):
        return lambda value: None if value is None else from_plain(tp, value)
    return _same


@lru_cache(maxsize=None)
def field_types(cls: type) -> dict[str, Any]:
    """The resolved type of each field of dataclass ``cls`` (``typing.get_type_hints``, once)."""
    return typing.get_type_hints(cls)


@lru_cache(maxsize=None)
def _field_converters(cls: type) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    hints = field_types(cls)
    return tuple((f.name, _converter(hints[f.name])) for f in dataclasses.fields(cls))


def from_plain(cls: type[T], data: dict[str, Any]) -> T:
    """Inverse of :func:`to_plain` for dataclass ``cls``; unknown keys are ignored."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    kwargs = {name: convert(data[name]) for name, convert in _field_converters(cls) if name in data}
    return cls(**kwargs)
