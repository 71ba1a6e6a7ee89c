"""Real grammar engines (generator/engines.py) against our GBNF and our checker.

llguidance always runs (a test extra). llama.cpp runs only when ``llama_cpp`` imports and a
vocab-only GGUF from ``fetch-corpus`` is present; otherwise those tests are skipped, saying why.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from chat_autoparser.generator.verify.engines import EngineError, LLGuidanceChecker, LlamaCppChecker
from chat_autoparser.generator.verify.gbnf_check import check_gbnf

# The notes' test grammar (shared/notes/dependencies.md, section 2): one get_weather call with a
# JSON string argument and flexible whitespace.
TOOL_CALL_GBNF = r"""root ::= ( "<tool_call>" ws "{" ws "\"name\"" ws ":" ws "\"get_weather\"" ws "," ws
    "\"arguments\"" ws ":" ws "{" ws "\"location\"" ws ":" ws string ws "}" ws "}" ws "</tool_call>" )
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1F\x7F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
ws ::= [ \t\n]*
"""

VALID = {
    "compact": '<tool_call>{"name":"get_weather","arguments":{"location":"Paris"}}</tool_call>',
    "escapes": '<tool_call>{"name": "get_weather", "arguments": {"location": "S\\u00e3o \\"Paulo\\""}}</tool_call>',
    "cjk": '<tool_call>\n{"name": "get_weather", "arguments": {"location": "東京"}}\n</tool_call>',
}
INVALID = {
    "wrong-key": '<tool_call>{"name": "get_weather", "args": {"location": "Paris"}}</tool_call>',
    "wrong-name": '<tool_call>{"name": "get_time", "arguments": {"location": "Paris"}}</tool_call>',
    "missing-closer": '<tool_call>{"name": "get_weather", "arguments": {"location": "Paris"}}',
    "unquoted-value": '<tool_call>{"name": "get_weather", "arguments": {"location": Paris}}</tool_call>',
    "raw-newline": '<tool_call>{"name": "get_weather", "arguments": {"location": "Par\nis"}}</tool_call>',
}
CASES = [pytest.param(text, True, id=name) for name, text in VALID.items()] + \
        [pytest.param(text, False, id=name) for name, text in INVALID.items()]


def test_tool_call_grammar_is_valid_for_our_checker():
    assert check_gbnf(TOOL_CALL_GBNF) == []


@pytest.fixture(scope="module")
def llguidance_tool_call() -> LLGuidanceChecker:
    return LLGuidanceChecker(TOOL_CALL_GBNF)


@pytest.mark.parametrize("text,expected", CASES)
def test_llguidance_tool_call(llguidance_tool_call, text, expected):
    assert llguidance_tool_call.accepts(text) is expected


def test_llguidance_calls_are_independent(llguidance_tool_call):
    # a rejected text must not leave the shared matcher in an error state
    assert not llguidance_tool_call.accepts(INVALID["wrong-key"])
    assert llguidance_tool_call.accepts(VALID["compact"])
    assert not llguidance_tool_call.accepts(VALID["compact"] + "x")
    assert not llguidance_tool_call.accepts("")


def test_llguidance_takes_raw_utf8_markers():
    from test_gbnf_check import TOOL_CALL_GBNF as UNICODE_TOOL_CALL_GBNF

    checker = LLGuidanceChecker(UNICODE_TOOL_CALL_GBNF)
    call = ("<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"東京\"}\n```"
            "<｜tool▁call▁end｜>")
    assert checker.accepts("<｜tool▁calls▁begin｜>" + call + call + "<｜tool▁calls▁end｜>")
    assert not checker.accepts("<｜tool▁calls▁begin｜>" + call.replace("get_weather", "get_date") + "<｜tool▁calls▁end｜>")


@pytest.mark.parametrize("grammar,fragment", [
    ('root ::= "\\u00e9"\n', "lexer error"),          # converter drops the leading zeros of \u00e9
    ('root ::= "a"\n  | "b"\n', "Expected name"),     # '|' at the start of a line
    ('root ::= b\n', "not found"),
    ('start ::= "x"\n', "root"),
    ('root ::= <think>\n', ""),
])
def test_llguidance_refusal_names_the_engine(grammar, fragment):
    with pytest.raises(EngineError) as raised:
        LLGuidanceChecker(grammar)
    assert str(raised.value).startswith("llguidance: ")
    assert raised.value.engine == "llguidance"
    assert fragment in str(raised.value)
    assert check_gbnf(grammar) != []  # our checker saw it too


def test_llguidance_differs_from_llama_cpp_where_we_know():
    """Known differences, pinned so that a new llguidance release that changes them is noticed."""
    # left recursion: llama.cpp refuses it, llguidance (Earley) takes it
    assert LLGuidanceChecker('root ::= root "a" | "b"\n').accepts("baa")
    # '.' does not match a newline in llguidance; in llama.cpp it matches any character
    assert not LLGuidanceChecker('root ::= .\n').accepts("\n")
    assert LLGuidanceChecker('root ::= [^\\x00]\n').accepts("\n")
    # its lexer is greedy and does not backtrack: llama.cpp accepts "abc" here, llguidance does not
    greedy = LLGuidanceChecker('root ::= "a" "bc" | "ab" "d"\n')
    assert greedy.accepts("abd") and not greedy.accepts("abc")
    # a rule of terminals only becomes one greedy lexeme: "21" (num="2", then "1") is refused
    assert not LLGuidanceChecker('root ::= num "1"\nnum ::= [0-9]+\n').accepts("21")
    # '&&' inside a class is regex intersection for llguidance, two '&' characters for llama.cpp
    assert not LLGuidanceChecker('root ::= [a&&b]\n').accepts("&")


# -- our checker and llguidance agree on validity over a small random grammar family -----------------

# Issue codes for which llguidance refuses the grammar too (within this family). The other codes
# are problems only for llama.cpp (left recursion, limits, duplicate rules, '_' in names) or
# differences in meaning that llguidance accepts silently ('.', '&&', empty alternatives).
REFUSED_BY_LLGUIDANCE_TOO = {
    "undefined-rule", "no-root", "unterminated-string", "bad-escape", "bar-at-line-start", "unicode-escape",
    "escape-dash", "escape-bracket-in-string", "control-char-in-string", "token", "stacked-repetition",
    "zero-repetition", "empty-class", "inverted-range", "rule-name-collision", "rule-name-start",
    "repetition-range", "unclosed-paren", "unmatched-paren",
}

NAMES = ["root", "a", "b", "item-x"]
BAD_NAMES = ["undefined", "my_rule", "start", "itemX", "9lives"]
LITERAL_PIECES = ["x", "ab", "é", "東京", "\\n", "\\t", "\\\\", '\\"', "\\x41", "<", " "]
BAD_LITERAL_PIECES = ["\\u00e9", "\\-", "\\[", "\\q", "\t", "\\x4"]
CLASS_PIECES = ["a-z", "0-9", "\\x00-\\x1F", '"', "\\\\", "\\]", "-", "é-ü"]
BAD_CLASS_PIECES = ["z-a", "&&", "\\-", "\\U0001F600"]
SUFFIXES = ["", "", "", "*", "+", "?", "{2}", "{1,3}", "{2,}"]
BAD_SUFFIXES = ["{0}", "{3,1}", "**", "*?"]


def _rarely(draw, one_in: int) -> bool:
    # an interior value: hypothesis favours boundaries, and shrinks toward 0 (toward "not rare")
    return draw(st.integers(0, one_in - 1)) == one_in // 2


def _pick(draw, good: list[str], bad: list[str]) -> str:
    """Mostly a good piece; now and then a bad one (a grammar has many pieces)."""
    return draw(st.sampled_from(bad)) if _rarely(draw, 25) else draw(st.sampled_from(good))


@st.composite
def _item(draw, depth: int) -> str:
    kind = draw(st.sampled_from(["lit", "lit", "class", "ref", "ref", "group", "token", "dot", "empty-class"]))
    if kind == "lit":
        text = '"' + "".join(_pick(draw, LITERAL_PIECES, BAD_LITERAL_PIECES)
                             for _ in range(draw(st.integers(0 if _rarely(draw, 10) else 1, 2)))) + '"'
    elif kind == "class":
        text = "[" + draw(st.sampled_from(["", "^"])) + "".join(
            _pick(draw, CLASS_PIECES, BAD_CLASS_PIECES) for _ in range(draw(st.integers(1, 2)))) + "]"
    elif kind == "ref":
        text = _pick(draw, NAMES, BAD_NAMES)
    elif kind == "group" and depth < 2:
        text = "( " + draw(_alternatives(depth + 1)) + " )"
    elif kind == "token" and _rarely(draw, 4):
        text = "<think>"
    elif kind == "dot" and _rarely(draw, 4):
        text = "."
    elif kind == "empty-class" and _rarely(draw, 4):
        text = "[]"
    else:
        text = '"y"'
    return text + _pick(draw, SUFFIXES, BAD_SUFFIXES)


@st.composite
def _alternatives(draw, depth: int = 0) -> str:
    alts = ["" if _rarely(draw, 20) else " ".join(draw(st.lists(_item(depth), min_size=1, max_size=3)))
            for _ in range(draw(st.integers(1, 3)))]
    out = alts[0]
    for alt in alts[1:]:
        out += _pick(draw, [" | ", " |\n    "], ["\n    | ", " ) | ( "])
    return out


@st.composite
def grammars(draw) -> str:
    names = ["root"] + draw(st.lists(st.sampled_from(NAMES[1:] + BAD_NAMES[2:]), max_size=3, unique=True))
    if _rarely(draw, 10):
        names = names[1:] or ["a"]  # no root
    lines = [f"{name} ::= {draw(_alternatives())}" for name in names]
    if names[0] == "root" and len(names) > 1:  # llguidance checks only what root reaches
        lines[0] += " | " + " ".join(names[1:])
    if _rarely(draw, 4):
        lines.insert(draw(st.integers(0, len(lines))), "# a comment")
    return "\n".join(lines) + "\n"


def _llguidance_takes(grammar: str) -> bool:
    try:
        LLGuidanceChecker(grammar)
    except EngineError:
        return False
    return True


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars())
def test_checker_and_llguidance_agree_on_validity(grammar):
    issues = check_gbnf(grammar)
    codes = {issue.code for issue in issues}
    taken = _llguidance_takes(grammar)
    if not taken:  # llguidance refuses: our portable check must have found something
        assert issues, f"llguidance refused a grammar our checker passed:\n{grammar}"
    if codes & REFUSED_BY_LLGUIDANCE_TOO:  # and where we say llguidance refuses, it does
        assert not taken, f"llguidance took a grammar we flagged {sorted(codes)}:\n{grammar}"


# -- llama.cpp (optional) ---------------------------------------------------------------------------

# What our checker reports although llama.cpp takes the grammar: a rule defined twice (the last one
# wins), {m,n} with n above 2000 (silently unbounded), \U escapes beyond Unicode (never match).
TAKEN_BY_LLAMA_CPP = {"duplicate-rule", "repetition-max-unbounded", "bad-codepoint"}
# llama.cpp loops or runs out of memory on these instead of refusing them all: never hand them over.
HANGS_LLAMA_CPP = {"left-recursion", "nullable-repetition", "repetition-range"}


@pytest.fixture(scope="module")
def llama_tool_call(llama_vocab) -> LlamaCppChecker:
    return LlamaCppChecker(TOOL_CALL_GBNF, llama_vocab)


@pytest.mark.parametrize("text,expected", CASES)
def test_llama_cpp_tool_call(llama_tool_call, text, expected):
    assert llama_tool_call.accepts(text) is expected


def test_llama_cpp_refusals_match_our_checker(llama_vocab):
    vocab = llama_vocab
    for grammar in ['root ::= root "a" | "b"\n', 'root ::= "a"\n  | "b"\n', 'root ::= b\n', 'start ::= "x"\n']:
        assert check_gbnf(grammar, portable=False) != []
        with pytest.raises(EngineError) as raised:
            LlamaCppChecker(grammar, vocab)
        assert str(raised.value).startswith("llama.cpp: ")
    # what llguidance gets wrong, llama.cpp gets right
    assert LlamaCppChecker('root ::= "a" "bc" | "ab" "d"\n', vocab).accepts("abc")
    assert LlamaCppChecker('root ::= .\n', vocab).accepts("\n")
    assert LlamaCppChecker('ws ::= | " "\nroot ::= "x" ws\n', vocab).accepts("x")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(grammar=grammars())
def test_checker_follows_llama_cpp_on_validity(llama_vocab, grammar):
    codes = {issue.code for issue in check_gbnf(grammar, portable=False)}
    assume(not codes & HANGS_LLAMA_CPP)
    assume("<think>" not in grammar)  # token syntax depends on the vocabulary
    # llama.cpp drops an item repeated {0} times; an undefined rule there may or may not be noticed
    # (it depends on symbol ids); we always report it
    assume("{0}" not in grammar)
    try:
        LlamaCppChecker(grammar, llama_vocab)
        taken = True
    except EngineError:
        taken = False
    assert taken == (not codes - TAKEN_BY_LLAMA_CPP), f"we found {sorted(codes)}, llama.cpp took it: {taken}\n{grammar}"
