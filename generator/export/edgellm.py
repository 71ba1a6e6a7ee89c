"""TensorRT Edge-LLM's JSON chat template (``processed_chat_template.json``, seed 002), found by
differential rendering and checked against the Jinja output.

Edge-LLM formats a conversation without Jinja: each message is its role's ``prefix``, its text
and its ``suffix``; a request without a system message gets ``default_system_prompt`` as one;
then ``generation_prompt`` (or ``generation_prompt_thinking`` with ``enable_thinking``). The
pieces are found by rendering needle conversations: a user message alone (its suffix ends the
render, its prefix starts it, after any default system block), user-assistant-user (the
assistant's prefix and suffix, the next user's prefix), a system message first (the system
prefix and suffix), and each thinking setting's generation prompt. Image and video content
parts, where the template writes a placeholder for them, give ``content_types``.

The export then formats the standard conversations (:data:`CONVERSATIONS`) both ways and
compares byte for byte; a template whose rendering depends on more than the role (the first
user turn written differently, a system message merged into the user's, history rewritten)
cannot be flattened and raises :class:`NotExpressible` with the conversation that shows it. A
leading ``bos_token`` is left to Edge-LLM's tokenizer (it adds special tokens), so it is not
part of the prefixes.

Example::

    >>> from chat_autoparser.analyzer import analyze_template, load_template
    >>> t = load_template("templates/chatml-think.jinja")
    >>> ct = chat_template(t, analyze_template(t))
    >>> ct["roles"]["user"], ct["generation_prompt_thinking"]
    ({'prefix': '<|im_start|>user\\n', 'suffix': '<|im_end|>\\n'}, '<|im_start|>assistant\\n')
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from chat_autoparser.analyzer.diff import common_prefix_len
from chat_autoparser.errors import RenderError
from chat_autoparser.analyzer.load import LoadedTemplate
from chat_autoparser.analyzer.render import make_renderer
from chat_autoparser.analyzer.structures import TemplateAnalysis

from ..state import thinking_setting
from ...errors import NotExpressible

FMT = "edgellm"
SYS, USER1, ASSIST, USER2 = "qzsysneedle", "qzuserneedle", "qzassistantneedle", "qzsecondneedle"

# (name, messages): the conversations the flattening must reproduce (texts other than the needles)
CONVERSATIONS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("user", (("user", "Give me a short introduction to large language models."),)),
    ("system+user", (("system", "You are a math tutor."), ("user", "What is 2+2?"))),
    ("multi_turn", (("user", "What is 2+2?"), ("assistant", "2+2 equals 4."), ("user", "What about 3+3?"))),
    ("system+multi_turn", (("system", "You are a math tutor."), ("user", "What is 2+2?"),
                           ("assistant", "2+2 equals 4."), ("user", "What about 3+3?"))),
    ("three_turns", (("user", "Hi."), ("assistant", "Hello! How can I help?"), ("user", "Name a colour."),
                     ("assistant", "Blue."), ("user", "Another one."))),
)


def format_conversation(ct: Mapping[str, Any], messages: Sequence[Mapping[str, str]], *,
                        enable_thinking: bool = False) -> str:
    """A conversation formatted the way Edge-LLM formats it with the JSON template ``ct``.

    Example::

        >>> ct = {"roles": {"user": {"prefix": "<u>", "suffix": "</u>"}}, "generation_prompt": "<a>"}
        >>> format_conversation(ct, [{"role": "user", "content": "hi"}])
        '<u>hi</u><a>'
    """
    msgs = list(messages)
    if not any(m["role"] == "system" for m in msgs) and ct.get("default_system_prompt"):
        msgs.insert(0, {"role": "system", "content": ct["default_system_prompt"]})
    out = [ct["roles"][m["role"]]["prefix"] + m["content"] + ct["roles"][m["role"]]["suffix"] for m in msgs]
    thinking = ct.get("generation_prompt_thinking")
    return "".join(out) + (thinking if enable_thinking and thinking else ct.get("generation_prompt", ""))


class _Renders:
    """Renders of needle conversations under one set of template kwargs (None where refused)."""

    def __init__(self, template: LoadedTemplate, engine: str, kwargs: Mapping[str, Any]) -> None:
        self.renderer = make_renderer(template, engine)
        self.kwargs = dict(kwargs)
        self.bos = str(template.special_tokens.get("bos_token") or "")

    def __call__(self, messages: Sequence[tuple[str, Any]], agp: bool = False, **extra: Any) -> str | None:
        try:
            return self.renderer.render([{"role": r, "content": c} for r, c in messages], add_generation_prompt=agp,
                                        **{**self.kwargs, **extra})
        except RenderError:
            return None

    def lead(self, text: str) -> str:
        """The bos_token a render starts with ("" if none): left to the tokenizer."""
        return self.bos if self.bos and text.startswith(self.bos) else ""


def _around(text: str | None, *needles: str) -> list[str] | None:
    """``text`` cut at each needle in turn: the pieces before, between and after them."""
    if text is None:
        return None
    out, pos = [], 0
    for n in needles:
        i = text.find(n, pos)
        if i < 0:
            return None
        out.append(text[pos:i])
        pos = i + len(n)
    return out + [text[pos:]]


def _strip_start(text: str, head: str) -> str | None:
    return text[len(head):] if text.startswith(head) else None


def _strip_end(text: str, tail: str) -> str | None:
    return text[:len(text) - len(tail)] if text.endswith(tail) else None


def _once(r: _Renders, fail: Any) -> None:
    """Each message's text written once (a template that repeats it cannot be flattened)."""
    conv = [("system", SYS), ("user", USER1), ("assistant", ASSIST), ("user", USER2)]
    out = r(conv)
    for _, text in conv if out is not None else ():
        if out.count(text) > 1:
            raise fail("the template writes a message's text more than once",
                       conversation="system, user, assistant, user")


def _roles(r: _Renders, fail: Any) -> tuple[dict[str, dict[str, str]], str]:
    """(roles, default system prompt) from the needle renders."""
    _once(r, fail)
    user = _around(r([("user", USER1)]), USER1)
    if user is None:
        raise fail("the template refuses a lone user message (or drops its text)")
    first_user_prefix, user_suffix = user[0][len(r.lead(user[0])):], user[1]
    ua = _around(r([("user", USER1), ("assistant", ASSIST)]), USER1, ASSIST)
    uau = _around(r([("user", USER1), ("assistant", ASSIST), ("user", USER2)]), USER1, ASSIST, USER2)
    if ua is None or uau is None:
        raise fail("the template refuses a user-assistant-user conversation (or drops a message's text)")
    assistant_prefix = _strip_start(uau[1], user_suffix)
    assistant_suffix = ua[2]
    user_prefix = _strip_start(uau[2], assistant_suffix)
    if assistant_prefix is None or user_prefix is None:
        raise fail("the text between two turns is not one role's suffix followed by the next role's prefix",
                   conversation="user, assistant, user")
    su = _around(r([("system", SYS), ("user", USER1)]), SYS, USER1)
    if su is None:
        raise fail("the template has no system role (it refuses a system message or drops its text)")
    system_prefix = su[0][len(r.lead(su[0])):]
    system_suffix = _strip_end(su[1], user_prefix)
    if system_suffix is None:
        raise fail("the user turn after a system message does not start with the user prefix of later turns",
                   conversation="system, user")
    default = ""
    if first_user_prefix != user_prefix:
        block = _strip_end(first_user_prefix, user_prefix)
        inner = _strip_start(block, system_prefix) if block is not None else None
        inner = _strip_end(inner, system_suffix) if inner is not None else None
        if inner is None:
            raise fail("the first user turn is written differently from later ones (and not as a default "
                       "system message)", conversation="user")
        if not inner:
            raise fail("the template writes an empty system block when the request has none; Edge-LLM adds no "
                       "system message for an empty default", conversation="user")
        default = inner
    roles = {"system": {"prefix": system_prefix, "suffix": system_suffix},
             "user": {"prefix": user_prefix, "suffix": user_suffix},
             "assistant": {"prefix": assistant_prefix, "suffix": assistant_suffix}}
    return roles, default


def _generation_prompt(r: _Renders, kwargs: Mapping[str, Any], fail: Any) -> str:
    plain, prompted = r([("user", USER1)], **kwargs), r([("user", USER1)], True, **kwargs)
    if plain is None or prompted is None or not prompted.startswith(plain):
        raise fail("the generation prompt is not text appended to the conversation", conversation="user")
    return prompted[len(plain):]


def _content_types(r: _Renders) -> dict[str, dict[str, str]]:
    """Placeholders the template writes for image and video parts (before the text part)."""
    text_only = _around(r([("user", [{"type": "text", "text": USER1}])]), USER1)
    out: dict[str, dict[str, str]] = {}
    for kind in ("image", "video"):
        with_media = _around(r([("user", [{"type": kind}, {"type": "text", "text": USER1}])]), USER1)
        if text_only is None or with_media is None or with_media[1] != text_only[1]:
            continue
        extra = _strip_start(with_media[0], text_only[0])
        if extra:
            out[kind] = {"format": extra}
    return out


def _setting_kwargs(analysis: TemplateAnalysis, enable: bool) -> dict[str, Any]:
    s = thinking_setting(analysis, enable)
    return s.kwargs_dict if s is not None else {}


def derive(template: LoadedTemplate, analysis: TemplateAnalysis, *,
           chat_template_kwargs: Mapping[str, Any] | None = None, model_path: str = "") -> dict[str, Any]:
    """The JSON template found by differential rendering (not yet checked; see :func:`chat_template`)."""
    def fail(message: str, conversation: str | None = None) -> NotExpressible:
        return NotExpressible(message, template=analysis.template, fmt=FMT,
                              evidence={"conversation": conversation} if conversation else None)

    user_kwargs = dict(chat_template_kwargs or {})
    off = {**_setting_kwargs(analysis, False), **user_kwargs}
    r = _Renders(template, "jinja2", off)
    roles, default = _roles(r, fail)
    ct: dict[str, Any] = {"model_path": model_path, "roles": roles, "content_types": _content_types(r),
                          "generation_prompt": _generation_prompt(r, {}, fail)}
    if analysis.caps.supports_thinking_toggle:
        on = {**_setting_kwargs(analysis, True), **user_kwargs}
        r_on = _Renders(template, "jinja2", on)
        for conv in ([("user", USER1)], [("system", SYS), ("user", USER1)],
                     [("user", USER1), ("assistant", ASSIST), ("user", USER2)]):
            if r(conv) != r_on(conv):
                raise fail("the thinking setting changes the messages' text, not only the generation prompt "
                           "(Edge-LLM switches only the generation prompt)",
                           conversation=", ".join(role for role, _ in conv))
        thinking = _generation_prompt(r_on, {}, fail)
        if thinking != ct["generation_prompt"]:
            ct["generation_prompt_thinking"] = thinking
    ct["default_system_prompt"] = default
    return ct


def check(template: LoadedTemplate, analysis: TemplateAnalysis, ct: Mapping[str, Any], *,
          chat_template_kwargs: Mapping[str, Any] | None = None,
          conversations: Sequence[tuple[str, Sequence[tuple[str, str]]]] = CONVERSATIONS) -> list[dict[str, Any]]:
    """The conversations whose flattening differs from the Jinja output: ``{"conversation",
    "enable_thinking", "jinja", "flattened"}`` each (a leading bos_token left out of the Jinja side)."""
    user_kwargs = dict(chat_template_kwargs or {})
    out = []
    for enable in (False, True) if ct.get("generation_prompt_thinking") else (False,):
        r = _Renders(template, "jinja2", {**_setting_kwargs(analysis, enable), **user_kwargs})
        for name, conv in conversations:
            jinja = r(list(conv), True)
            flat = format_conversation(ct, [{"role": role, "content": text} for role, text in conv],
                                       enable_thinking=enable)
            if jinja is not None:
                jinja = jinja[len(r.lead(jinja)):]
            if jinja != flat:
                out.append({"conversation": name, "enable_thinking": enable, "jinja": jinja, "flattened": flat})
    return out


def explain(template: LoadedTemplate, analysis: TemplateAnalysis, bad: Mapping[str, Any], *,
            chat_template_kwargs: Mapping[str, Any] | None = None) -> str | None:
    """Why a conversation :func:`check` found different cannot be flattened, shown by the
    template's own renders, or None when nothing shows it (a mismatch the export should not have).

    Edge-LLM writes a conversation as the concatenation of its messages, so a template that
    refuses the conversation cannot be flattened, nor one that writes the messages up to a user
    message differently once more messages follow them (the render of that shorter conversation,
    ending as :func:`check`'s do, is not where the whole one starts), when the flattened
    conversation parts from the template's no earlier than the two renders part."""
    conv = dict(CONVERSATIONS)[bad["conversation"]]
    r = _Renders(template, "jinja2", {**_setting_kwargs(analysis, bad["enable_thinking"]),
                                       **dict(chat_template_kwargs or {})})
    jinja = r(list(conv), True)  # (rendered again: the verdict rests on the template's renders alone)
    if jinja is None:
        return f"the template refuses conversation {bad['conversation']!r}"
    jinja = jinja[len(r.lead(jinja)):]
    differs_at = common_prefix_len(jinja, bad["flattened"])
    for k in range(1, len(conv)):
        if conv[k - 1][0] != "user":
            continue
        shorter = r(list(conv[:k]))
        if shorter is None:
            continue
        shorter = shorter[len(r.lead(shorter)):]
        parts_at = common_prefix_len(shorter, jinja)
        if parts_at < len(shorter) and differs_at >= parts_at:
            return (f"the template writes the first {k} message(s) differently once more messages follow them "
                    f"(conversation {bad['conversation']!r})")
    return None


def chat_template(template: LoadedTemplate, analysis: TemplateAnalysis, *,
                  chat_template_kwargs: Mapping[str, Any] | None = None, model_path: str = "",
                  tools: Any = None, **_: Any) -> dict[str, Any]:
    """The Edge-LLM JSON template, derived and checked (NotExpressible, with the first
    conversation that differs, when the template cannot be flattened). ``tools`` are ignored:
    the format has none."""
    ct = derive(template, analysis, chat_template_kwargs=chat_template_kwargs, model_path=model_path)
    bad = check(template, analysis, ct, chat_template_kwargs=chat_template_kwargs)
    if bad:
        first = bad[0]
        why = explain(template, analysis, first, chat_template_kwargs=chat_template_kwargs) or \
            "the flattened conversation differs from the template's (no render shows why)"
        raise NotExpressible(f"cannot be flattened: {why} (conversation {first['conversation']!r}, "
                             f"enable_thinking={first['enable_thinking']})", template=analysis.template, fmt=FMT,
                             evidence=first)
    return ct
