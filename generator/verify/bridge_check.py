"""The bridge over a multi-turn tool conversation: earlier tokens never change, and the text is the
template's own rendering of the same conversation wherever the template is roundtrip-safe.

Each round: the prompt's ids; the model's output written in the template's format (as the
roundtrip check writes it) and tokenized alone, as a model samples it; the parsed answer; the tool
result; :func:`~chat_autoparser.generator.prefix.bridge.bridge_to_next_turn` gives the next prompt's ids.

Example::

    >>> from tokenizers import Tokenizer  # doctest: +SKIP
    >>> check_bridge("templates/chatml-think.jinja", tokenizer="tokenizer.json").ok  # doctest: +SKIP
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..params import generate_parser
from ..prefix.bridge import bridge_to_next_turn
from ..prefix.conversation import Conversation, answer_calls, template_of, tool_message
from ..prefix.tokens import load_tokenizer
from .scenarios import ANSWER, RESULTS, ROUNDS, TOOLS, USER, assistant, default_setting

TURNS = 5  # four tool rounds, then an answer


@dataclass
class BridgeCheck:
    """The outcome over one conversation: per turn, whether the text equals the template's own
    render and whether the template is roundtrip-safe there (that earlier ids were kept is
    asserted: a failure raises :class:`BridgeBroke`)."""

    template: str
    turns: int = 0
    same_text: list[bool] = field(default_factory=list)
    safe: list[bool] = field(default_factory=list)  # the template's next prompt continues prompt + output
    first_difference: str = ""  # the two texts around the first turn whose text differs
    skipped: str = ""           # why the conversation could not be run

    @property
    def ok(self) -> bool:
        """Every turn the template renders roundtrip-safe has the template's own text."""
        return not self.skipped and all(same for same, safe in zip(self.same_text, self.safe) if safe)


class BridgeBroke(AssertionError):
    """The bridge changed an earlier token (a bug in the bridge, never a property of a template)."""


def check_bridge(template: Any, *, tokenizer: Any, analysis: Any = None) -> BridgeCheck:
    """Run a :data:`TURNS`-turn tool conversation through the bridge (see the module docstring)."""
    loaded, analysis = template_of(template, analysis)
    tok = load_tokenizer(tokenizer)
    conv = Conversation(loaded, analysis, TOOLS)
    out = BridgeCheck(analysis.template)
    if conv.tools is None or analysis.tool_call_structure.source != "rendered":
        out.skipped = "the template does not render assistant tool calls"
        return out
    kw, enable, reasons = default_setting(conv)
    history: list[dict[str, Any]] = [{"role": "user", "content": USER}]
    prompt = conv.render(history, kw, generation_prompt=True)
    if prompt is None:
        out.skipped = conv.why("the template refuses the first prompt")
        return out
    ids = tok.encode(prompt)
    rounds = list(ROUNDS) + [ROUNDS[0]]
    for k in range(TURNS):
        last = k == TURNS - 1
        msg = assistant(conv, reasons, [] if last else [rounds[k]], content=ANSWER if last else None)
        if not last:
            msg["tool_calls"][0]["id"] = conv.call_id(rounds[k][0], k)
        written = conv.model_output(history, msg, kw, tok.decode(ids), enable)
        if written is None:
            out.skipped = f"turn {k}: the model's output cannot be written"
            return out
        completion = tok.encode(written[0])
        parsed = generate_parser(analysis, tools=conv.tools, prompt=tok.decode(ids),
                                 enable_thinking=enable).parser.parse(written[0])
        new = answer_calls([tool_message(0, RESULTS[k % len(RESULTS)])] if not last else
                           [{"role": "user", "content": USER}], parsed.get("tool_calls") or [])
        nxt = bridge_to_next_turn(loaded, ids, completion, new, tokenizer=tok, tools=TOOLS, history=history,
                                  analysis=analysis, **kw)
        _assert_kept(tok, ids, completion, nxt, k)
        history = history + [conv.as_template_message(parsed)] + new
        own = conv.render(history, kw, generation_prompt=True)
        text = tok.decode(nxt)
        out.turns += 1
        out.safe.append(own.startswith(tok.decode(ids) + written[0]))
        out.same_text.append(own == text)
        if own != text and out.safe[-1] and not out.first_difference:
            i = next((j for j, (a, b) in enumerate(zip(own, text)) if a != b), min(len(own), len(text)))
            out.first_difference = f"turn {k} at {i}: template {own[max(0, i - 40):i + 40]!r} vs bridge " \
                                   f"{text[max(0, i - 40):i + 40]!r}"
        ids = nxt
    return out


def _assert_kept(tok: Any, prompt: list[int], completion: list[int], nxt: list[int], turn: int) -> None:
    """The next ids start with the prompt, then the completion: all of it, or all of it up to a
    special token (the turn's close, where the bridge trims what the model wrote after it)."""
    if nxt[:len(prompt)] != prompt:
        raise BridgeBroke(f"turn {turn}: the bridge changed the prompt's tokens")
    rest = nxt[len(prompt):]
    n = next((j for j, (a, b) in enumerate(zip(completion, rest)) if a != b), min(len(completion), len(rest)))
    if n < len(completion) and not (n and tok.is_special(tok.decode(completion[n - 1:n]))):
        raise BridgeBroke(f"turn {turn}: the bridge changed the completion's tokens at {n}: "
                          f"{tok.decode(completion[n:n + 3])!r} became {tok.decode(rest[n:n + 3])!r}")
