r"""Why a roundtrip broke the prefix: one diagnosis from :data:`DIAGNOSES`, found from the two texts
(``prompt + output`` and the next prompt), the first position where they part, and the analysis;
with the evidence as a sentence.

Example::

    >>> _whitespace("a</think>\nb", "a</think>b", 9)
    ('whitespace_stripped', "the template drops the output's whitespace '\\n' at 9")
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from chat_autoparser.analyzer.markers import markers_in

from ..prefix.conversation import Conversation, stop_marker
from .scenarios import Step

DIAGNOSES = ("reasoning_dropped", "whitespace_stripped", "arguments_reserialized", "arguments_double_encoded",
             "literal_spelling", "tool_call_id_changed", "end_of_turn_not_returned", "bpe_boundary",
             "reasoning_force_closed", "other")

CONTEXT = 40  # characters shown on each side of the first difference

@dataclass(frozen=True)
class Facts:
    """What the diagnosis reads besides the two texts."""

    conv: Conversation
    step: Step
    prompt: str
    output: str
    parsed: dict[str, Any]
    message: dict[str, Any]
    turn: int  # where the answer's turn starts in the prompt (its generation prompt)


_LITERALS = ({"true", "True", "TRUE"}, {"false", "False", "FALSE"}, {"null", "None", "none", "nil", "NULL"})
_WORD = re.compile(r"[\w.+-]+")


def _word_at(text: str, i: int) -> str:
    a = i
    while a > 0 and _WORD.fullmatch(text[a - 1]):
        a -= 1
    m = _WORD.match(text, a)
    return m.group(0) if m else ""


def _same_literal(a: str, b: str) -> bool:
    if a == b or not a or not b:
        return False
    if any(a in s and b in s for s in _LITERALS):
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _json_at(text: str, i: int) -> tuple[Any, int] | None:
    try:
        return json.JSONDecoder().raw_decode(text, i)
    except ValueError:
        return None


def diagnose(f: Facts, expected: str, got: str, i: int) -> tuple[str, str]:
    """The diagnosis of a broken prefix at character ``i``, with its evidence (checked in this
    order: the first that explains the difference wins)."""
    ws = _whitespace(expected, got, i)
    if i < f.turn and ws is None:
        return "other", f"the new prompt rewrites the earlier conversation at character {i} (before the answer's turn)"
    for check in (_reasoning_dropped, _force_closed, _misread, _double_encoded):
        found = check(f, expected, got, i)
        if found is not None:
            return found
    a, b = _word_at(expected, i), _word_at(got, i)
    if _same_literal(a, b):
        return "literal_spelling", f"the output writes {a!r}, the template writes the same value as {b!r}"
    if ws is not None:
        return ws
    for check in (_reserialized, _id_changed, _end_of_turn):
        found = check(f, expected, got, i)
        if found is not None:
            return found
    if i < len(f.prompt):
        return "other", (f"the template writes this turn's opening in history otherwise than its generation prompt: "
                         f"{expected[i:len(f.prompt)][:40]!r} in the prompt, {got[i:i + 40]!r} in the next one")
    return "other", f"the output and the new prompt part at character {i}"


Finding = tuple[str, str] | None


def _reasoning_dropped(f: Facts, expected: str, got: str, i: int) -> Finding:
    """The template leaves the reasoning (or the empty reasoning block) of a past turn out."""
    reasoning = (f.parsed.get("reasoning_content") or "").strip()
    r_at = expected.find(reasoning, f.turn) if reasoning else -1
    if r_at >= 0 and i <= r_at + len(reasoning) and reasoning not in got[f.turn:]:
        return "reasoning_dropped", (f"the output's reasoning ({len(reasoning)} characters) is not in the new "
                                     "prompt: the template leaves reasoning out of past turns")
    end = f.conv.analysis.content_structure.reasoning_end.strip()
    e = expected.find(end, i) if end else -1
    if 0 <= e < len(f.prompt) + len(f.output) and not reasoning:
        j = _skip_ws(expected, e + len(end))
        k = _skip_ws(got, i)
        n = min(20, len(expected) - j)
        if n > 0 and expected[j:j + n] == got[k:k + n]:
            block = expected[i:e + len(end)]
            return "reasoning_dropped", f"the template leaves the empty reasoning block {block!r} out of past turns"
    return None


def _force_closed(f: Facts, expected: str, got: str, i: int) -> Finding:
    end = f.conv.analysis.content_structure.reasoning_end.strip()
    if f.step.truncate and end and got[i:].lstrip().startswith(end) and end not in expected[len(f.prompt):]:
        return "reasoning_force_closed", f"the output stops inside the reasoning; the template closes it with {end!r}"
    return None


def _id_changed(f: Facts, expected: str, got: str, i: int) -> Finding:
    start = len(f.prompt)
    for call in f.parsed.get("tool_calls") or []:
        cid = call.get("id") or ""
        if cid and cid in expected[start:] and cid not in got[start:]:
            return "tool_call_id_changed", f"the output's call id {cid!r} is not in the new prompt"
    return None


def _end_of_turn(f: Facts, expected: str, got: str, i: int) -> Finding:
    """The difference is at the marker the model ended its turn with."""
    start = len(f.prompt)
    out = f.output.rstrip()
    stop = stop_marker(f.conv.analysis)
    last = ([m for m in markers_in(out) if out.endswith(m)] or [""])[-1]
    for marker in (stop, last):
        if marker and out.endswith(marker) and i >= start + len(out) - len(marker):
            return "end_of_turn_not_returned", (f"the model ends its turn with {marker!r}; in history the template "
                                                f"writes {got[i:i + 24]!r} there instead")
    return None


def _calls_at(f: Facts) -> int | None:
    """Where the output's calls start (None without calls)."""
    calls = f.step.message.get("tool_calls") or []
    spots = [f.output.find(c["function"]["name"]) for c in calls] + [f.output.find(c.get("id") or "\0") for c in calls]
    spots = [s for s in spots if s >= 0]
    return len(f.prompt) + max(0, min(spots) - CONTEXT) if spots else None


def _reserialized(f: Facts, expected: str, got: str, i: int) -> Finding:
    """The difference is inside the calls: the template writes the arguments it is given back in
    another form (spacing, key order, escaping, a Python repr, another layout for JSON text)."""
    at = _calls_at(f)
    if at is None or i < at:
        return None
    given = {"string": "JSON text", "dict": "an object"}.get(f.step.args_form or "", "the form it takes")
    return "arguments_reserialized", (f"given the arguments as {given}, the template writes "
                                      f"{got[i:i + 30]!r} where the output has {expected[i:i + 30]!r}")


def _skip_ws(s: str, k: int) -> int:
    while k < len(s) and s[k].isspace():
        k += 1
    return k


def _whitespace(expected: str, got: str, i: int) -> tuple[str, str] | None:
    """The texts differ by whitespace at ``i``: the template stripped it (or wrote other whitespace)."""
    j, k = _skip_ws(expected, i), _skip_ws(got, i)
    if j == i and k == i:
        return None
    n = min(20, len(expected) - j, len(got) - k)
    if expected[j:j + n] != got[k:k + n]:
        return None
    if j > i and k == i:
        return "whitespace_stripped", f"the template drops the output's whitespace {expected[i:j]!r} at {i}"
    return "whitespace_stripped", (f"the template writes whitespace {got[i:k]!r} where the output has "
                                   f"{expected[i:j]!r} at {i}")


def _misread(f: Facts, expected: str, got: str, i: int) -> Finding:
    """The parser returned other argument values than the model wrote: the template then writes
    those values back (another type, another spelling)."""
    meant = [(c["function"]["name"], c["function"]["arguments"]) for c in f.step.message.get("tool_calls") or []]
    for (name, args), call in zip(meant, f.parsed.get("tool_calls") or []):
        try:
            read = json.loads(call["function"]["arguments"])
        except ValueError:
            read = call["function"]["arguments"]
        if read != args:
            keys = [k for k in args if not isinstance(read, dict) or read.get(k, object()) != args[k]]
            return "arguments_reserialized", (f"the parser read {name}'s arguments as {json.dumps(read)[:80]} where "
                                              f"the output means {json.dumps(args)[:80]} (keys {keys}): the template "
                                              "writes the values it was given back")
    return None


def _double_encoded(f: Facts, expected: str, got: str, i: int) -> Finding:
    """Arguments written back as a JSON string (double encoding), or re-serialized as JSON."""
    start = len(f.prompt)
    for call in f.parsed.get("tool_calls") or []:
        text = call["function"]["arguments"]
        try:
            value = json.loads(text)
        except ValueError:
            continue
        encoded = json.dumps(text, ensure_ascii=False)
        around = got[max(start, i - len(encoded)):i + len(encoded) + 1]
        if encoded[1:-1] in around or json.dumps(text)[1:-1] in around:
            return "arguments_double_encoded", (f"the arguments went back as a JSON string, and the template "
                                                f"encoded that string again: {encoded[:60]!r}")
        at = expected.find(text, start)
        if at < 0 or not at <= i <= at + len(text):
            continue
        back = _json_at(got, at)
        if back is not None and back[0] == value:
            return "arguments_reserialized", (f"the template writes the same arguments as "
                                              f"{got[at:back[1]][:60]!r} where the output has {text[:60]!r}")
    return None
