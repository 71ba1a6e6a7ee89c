"""Our GBNF checker (generator/gbnf_check.py): valid grammars pass, each rule violation is named.

llama.cpp's own grammars/*.gbnf are checked too when a local copy exists (never downloaded here):
``$AUTOPARSER_LLAMA_GRAMMARS`` (a folder of .gbnf files), else the llama-cpp-python 0.3.36 sdist
that ``fetch-corpus`` keeps in ``downloads/`` beside the corpus or in the user cache.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from chat_autoparser.errors import ChatAutoparserError
from chat_autoparser.generator.verify.gbnf_check import GrammarError, GbnfIssue, assert_valid_gbnf, check_gbnf, rule_names

# In the style of llama.cpp's grammars/json.gbnf, made portable: `ws` has no empty alternative.
JSON_GBNF = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= ([ \t\n] ws)?
"""

# A DeepSeek-style tool call: non-ASCII markers written as raw UTF-8, arguments as a JSON object.
TOOL_CALL_GBNF = """\
root ::= "<｜tool▁calls▁begin｜>" call+ "<｜tool▁calls▁end｜>"
call ::= ( "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" name
  "\\n```json\\n" args "\\n```<｜tool▁call▁end｜>" )
name ::= "get_weather" | "get_time"
args ::= "{" ws "\\"location\\"" ws ":" ws str ws "}"
str ::= "\\"" ( [^"\\\\\\x00-\\x1F] | "\\\\" ["\\\\/bfnrt] )* "\\""
ws ::= [ \\t\\n]*
"""


def codes(text: str, *, portable: bool = True) -> list[str]:
    return [issue.code for issue in check_gbnf(text, portable=portable)]


def only_issue(text: str, code: str, *, portable: bool = True) -> GbnfIssue:
    issues = check_gbnf(text, portable=portable)
    assert [i.code for i in issues] == [code], issues
    issue = issues[0]
    assert issue.message.startswith(f"line {issue.line}, column {issue.column}: "), issue
    return issue


# -- valid grammars -------------------------------------------------------------------------------

def test_json_grammar_is_valid():
    assert check_gbnf(JSON_GBNF) == []
    assert rule_names(JSON_GBNF) == ["root", "value", "object", "array", "string", "number", "ws"]


def test_tool_call_grammar_with_unicode_literals_is_valid():
    assert check_gbnf(TOOL_CALL_GBNF) == []
    assert_valid_gbnf(TOOL_CALL_GBNF)


@pytest.mark.parametrize("text", [
    'root ::= "a"',                                   # no final newline
    'root ::= "a"\r\nb ::= "b"\r\n',                  # CRLF
    '# comment\n\nroot ::= x # trailing\n\nx ::= "x"{2,3} "y"{2} "z"{1,}\n',
    'root ::=\n  "a" |\n  "b"\n',                     # newline after ::= and after |
    'root ::= ( "a"\n  "b" # comment inside a group\n  | "c" )\n',
    'root ::= [a-z0-9_\\x41-\\x5A] [^"\\\\] [\\]\\[] [-a] [a-]\n',
    'root ::= "\\x41\\t\\r\\n\\\\\\"" ""\n',
    'root ::= item ("," item)*\nitem ::= [0-9]+ | "(" root ")"\n',  # recursion that is not left recursion
    'root ::= opt "x"\nopt ::= "o"?\n',
    '1st ::= "a"\nroot ::= 1st\n',                    # llama.cpp allows a leading digit (not portable)
])
def test_llama_cpp_accepts(text):
    assert [i for i in check_gbnf(text, portable=False)] == []


def test_portable_flags_names_llguidance_cannot_convert():
    assert codes('1st ::= "a"\nroot ::= 1st\n') == ["rule-name-start"]
    assert codes('root ::= fooBar foo-bar\nfooBar ::= "x"\nfoo-bar ::= "y"\n') == ["rule-name-collision"]
    assert codes('root ::= start\nstart ::= "x"\n') == ["rule-name-collision"]


# -- one test per violation -------------------------------------------------------------------------

def test_undefined_rule():
    issue = only_issue('root ::= "a" greeting\n', "undefined-rule")
    assert (issue.line, issue.column, issue.kind) == (1, 14, "semantic")
    assert "'greeting'" in issue.message


def test_no_root():
    issue = only_issue('start ::= "a"\n', "no-root")
    assert issue.kind == "semantic"


def test_unterminated_string():
    issue = only_issue('root ::= "abc\n', "unterminated-string", portable=False)
    assert (issue.line, issue.column, issue.kind) == (1, 10, "syntax")
    # a literal that swallows the next lines is pointed at
    issues = check_gbnf('root ::= "abc\nnext ::= "x"\n', portable=False)
    assert [i.code for i in issues] == ["unterminated-string"]
    assert "line 1, column 10" in issues[0].message


def test_bad_escape():
    issue = only_issue('root ::= "a\\qb"\n', "bad-escape")
    assert (issue.line, issue.column, issue.kind) == (1, 12, "syntax")
    assert "\\q" in issue.message
    assert codes('root ::= "\\x4"\n') == ["bad-escape"]
    assert codes('root ::= [\\y]\n') == ["bad-escape"]


def test_left_recursion_direct():
    issue = only_issue('root ::= expr\nexpr ::= expr "+" term | term\nterm ::= [0-9]\n', "left-recursion")
    assert (issue.line, issue.column, issue.kind) == (2, 10, "semantic")
    assert "expr -> expr" in issue.message


def test_left_recursion_indirect():
    text = 'root ::= a\na ::= b "x" | "y"\nb ::= c\nc ::= a "z"\n'
    issue = only_issue(text, "left-recursion")
    assert "a -> b -> c -> a" in issue.message
    assert (issue.line, issue.column) == (2, 7)


def test_left_recursion_through_nullable_prefix():
    # llama.cpp's own test: `empty` can match nothing, so `foo` starts with `asdf`
    text = ('root ::= asdf\nasdf ::= "a" | foo "b"\nfoo ::= "c" | empty asdf "d" | "e"\n'
            'empty ::= "blah" | ""\n')
    assert codes(text) == ["left-recursion"]
    # nullable through a rule whose only alternative is an optional item (llama.cpp misses it)
    assert codes('root ::= a\na ::= opt a "x" | "y"\nopt ::= "q"?\n') == ["left-recursion"]
    # not nullable: no left recursion
    assert codes('root ::= a\na ::= "q" a "x" | "y"\n') == []


def test_unbounded_repetition_of_a_nullable_item():
    assert codes('root ::= ("a" | "")*\n') == ["nullable-repetition"]
    assert codes('root ::= ("a" | "") {1,2}\n') == []


def test_bar_at_line_start():
    issue = only_issue('root ::= "a"\n  | "b"\n', "bar-at-line-start")
    assert (issue.line, issue.column, issue.kind) == (2, 3, "syntax")
    # inside parentheses llama.cpp reads it, other engines may not
    issue = only_issue('root ::= ( "a"\n  | "b" )\n', "nested-bar-at-line-start")
    assert (issue.line, issue.column, issue.kind) == (2, 3, "portability")
    assert check_gbnf('root ::= ( "a"\n  | "b" )\n', portable=False) == []


def test_empty_alternative():
    issue = only_issue('ws ::= | " "\nroot ::= ws\n', "empty-alternative")
    assert (issue.line, issue.column, issue.kind) == (1, 8, "portability")
    assert codes('root ::= ( | "x")\n') == ["empty-alternative"]
    assert codes('root ::= "x" |\n') == ["empty-alternative"]
    assert check_gbnf('ws ::= | " "\nroot ::= ws\n', portable=False) == []


def test_unicode_escape_under_portable():
    issue = only_issue('root ::= "S\\u00e3o"\n', "unicode-escape")
    assert (issue.line, issue.column, issue.kind) == (1, 12, "portability")
    assert codes('root ::= [\\U0001F600]\n') == ["unicode-escape"]
    assert check_gbnf('root ::= "S\\u00e3o"\n', portable=False) == []


def test_token_syntax():
    assert codes('root ::= <think> "x" <[42]> !<[7]>\n') == ["token", "token", "token"]
    issue = check_gbnf('root ::= <think> "x"\n')[0]
    assert (issue.line, issue.column, issue.kind) == (1, 10, "portability")
    assert check_gbnf('root ::= <think> "x" <[42]> !<[7]>\n', portable=False) == []
    assert codes('root ::= <[x]>\n', portable=False) == ["bad-token"]


def test_other_llguidance_traps_are_flagged():
    assert codes('root ::= "a\\-b" "\\[x\\]"\n') == ["escape-dash", "escape-bracket-in-string",
                                                     "escape-bracket-in-string"]
    assert codes('root ::= "a\tb"\n') == ["control-char-in-string"]
    assert codes('root ::= [] [z-a]\n') == ["empty-class", "inverted-range"]
    assert codes('root ::= [a&&b]\n') == ["class-set-operator"]
    assert codes('root ::= "x"{0} "y"\n') == ["zero-repetition"]
    assert codes('root ::= "x"** ("y"?)+\n') == ["stacked-repetition", "nullable-repetition",
                                                  "stacked-repetition", "nullable-repetition"]
    assert codes('root ::= . "x"\n') == ["any-char"]


def test_repetition_limits_follow_llama_cpp():
    assert codes('root ::= "a"{5000}\n') == ["repetition-limit"]
    assert codes('root ::= "a"{3,2}\n') == ["repetition-range"]
    assert codes('root ::= "a"{0,2001}\n') == ["repetition-max-unbounded"]  # llama.cpp drops the bound
    assert codes('root ::= (((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}\n',
                 portable=False) == ["repetition-limit"] * 5
    assert codes('root ::= "a"{,10}\n') == ["bad-repetition"]
    assert codes('root ::= ""*\n') == ["repetition-without-item"]


def test_other_syntax_errors():
    assert codes('root ::= ("a"\n') == ["unclosed-paren"]
    assert codes('root ::= "a")\n') == ["unmatched-paren"]
    assert codes('root ::= my_rule\n') == ["rule-name"]
    assert codes('root ::=\nnext ::= "x"\n') == ["missing-newline"]
    assert codes('root "a"\n') == ["expected-assign"]


def test_every_error_is_reported_and_positions_are_exact():
    text = 'root ::= a | "\\q"\na ::= a "x" | b\n\nc ::= "\\u00e9"\n'
    issues = check_gbnf(text)
    assert [(i.line, i.column, i.code) for i in issues] == [
        (1, 15, "bad-escape"), (2, 7, "left-recursion"), (2, 15, "undefined-rule"), (4, 8, "unicode-escape")]
    # a syntax error stops only its own rule; everything shows up in the exception, one line each
    with pytest.raises(GrammarError) as raised:
        assert_valid_gbnf(text)
    assert raised.value.issues == issues
    assert isinstance(raised.value, ChatAutoparserError)
    for issue in issues:
        assert str(issue) in str(raised.value)


def test_issue_is_frozen():
    issue = check_gbnf("root ::= x\n")[0]
    with pytest.raises(AttributeError):
        issue.line = 2  # type: ignore[misc]


# -- llama.cpp's own grammars ------------------------------------------------------------------------

SDIST_NAME = "llama-cpp-python-0.3.36.sdist"
GRAMMARS_IN_SDIST = "vendor/llama.cpp/grammars/"


def _sdist_candidates() -> list[Path]:
    from chat_autoparser.analyzer.corpus import CorpusError, cache_root

    from corpus_fixtures import session_corpus

    paths = [cache_root() / "downloads" / SDIST_NAME]
    try:
        paths.insert(0, session_corpus().parent / "downloads" / SDIST_NAME)
    except CorpusError:
        pass
    return paths


def local_llama_grammars() -> tuple[dict[str, str], str]:
    """llama.cpp's grammars/*.gbnf from a local copy, and where they came from (never the network)."""
    explicit = os.environ.get("AUTOPARSER_LLAMA_GRAMMARS", "")
    if explicit:
        folder = Path(explicit)
        return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.gbnf"))}, str(folder)
    for sdist in _sdist_candidates():
        if sdist.is_file():
            found = {}
            with tarfile.open(sdist, "r:gz") as archive:
                for member in archive:
                    folder, _, name = member.name.partition("/")[2].rpartition("/")
                    if folder + "/" == GRAMMARS_IN_SDIST:
                        if name.endswith(".gbnf"):
                            found[name] = archive.extractfile(member).read().decode("utf-8")
                    elif found:
                        break  # a folder's files are stored together: no need to read the rest
            return found, str(sdist)
    return {}, " or ".join(map(str, _sdist_candidates()))


@pytest.fixture(scope="module")
def llama_grammars() -> dict[str, str]:
    grammars, where = local_llama_grammars()
    if not grammars:
        pytest.skip(f"no local copy of llama.cpp's grammars/*.gbnf: set $AUTOPARSER_LLAMA_GRAMMARS to a folder "
                    f"of them, or run `fetch-corpus` (keeps the llama-cpp-python sdist); looked at {where}")
    return grammars


def test_llama_cpp_grammars_pass(llama_grammars):
    assert len(llama_grammars) >= 8
    for name, text in llama_grammars.items():
        assert check_gbnf(text, portable=False) == [], name


def test_llama_cpp_grammars_portability(llama_grammars):
    # what portable mode says about them: json.gbnf's `ws ::= | ...`, list.gbnf's \u escapes
    found = {name: sorted({i.code for i in check_gbnf(text)}) for name, text in llama_grammars.items()}
    assert found.get("json.gbnf") == ["empty-alternative"]
    assert found.get("list.gbnf") == ["unicode-escape"]
    assert found.get("arithmetic.gbnf") == []
