"""A strict GBNF checker of our own, following llama.cpp's grammar parser (``llama-grammar.cpp``).

It reads a grammar the way llama.cpp does (same newline rules, same escapes, same repetition
limits), then checks what llama.cpp checks after parsing (every referenced rule defined, a
``root`` rule, no left recursion) and, with ``portable=True``, what other engines need
(llguidance's GBNF converter and xgrammar): no empty alternatives, no ``\\u``/``\\U``, ``\\-``
or ``\\[``/``\\]``-in-strings escapes, ``|`` at line ends, no token syntax ``<...>``, and a few more.

Every issue names its line and column (1-based, counted in characters). Issue kinds:

- ``syntax``: llama.cpp refuses to parse the grammar;
- ``semantic``: it parses, but llama.cpp refuses it, loops on it or silently changes it;
- ``portability``: llama.cpp takes it, another engine does not (or reads it differently).

Example::

    >>> check_gbnf('root ::= "a" | b\\n')
    [GbnfIssue(line=1, column=16, message="line 1, column 16: undefined rule 'b'", kind='semantic', code='undefined-rule')]
    >>> assert_valid_gbnf('root ::= "a"\\n')       # no exception: the grammar is fine
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Literal

from chat_autoparser.errors import GrammarError

__all__ = ["GbnfIssue", "GrammarError", "check_gbnf", "assert_valid_gbnf", "rule_names"]

IssueKind = Literal["syntax", "semantic", "portability"]

# llama.cpp's MAX_REPETITION_THRESHOLD: {m} with m above it is refused, {m,n} with n above it is
# silently unbounded, and a repeated group may not expand to more than this many rules.
MAX_REPETITION = 2000

_HEAD_RE = re.compile(r"[ \t]*[\w-]+[ \t]*::=")  # lenient: resync also on bad names
_PORTABLE_NAME_RE = re.compile(r"[a-zA-Z][a-zA-Z0-9-]*\Z")


@dataclass(frozen=True, slots=True)
class GbnfIssue:
    """One problem in a grammar. ``message`` starts with ``line L, column C:``.

    ``code`` is a short stable identifier (``undefined-rule``, ``left-recursion``, ...) for tests
    and tools; the message is for people.
    """

    line: int
    column: int
    message: str
    kind: IssueKind
    code: str = ""

    def __str__(self) -> str:
        return f"{self.message} [{self.kind}]"


# ---------------------------------------------------------------------------------------------
# Syntax tree (only what the semantic checks need)


@dataclass(slots=True)
class _Lit:
    text: str
    pos: int


@dataclass(slots=True)
class _Class:
    ranges: list[tuple[int, int]]
    negated: bool
    pos: int


@dataclass(slots=True)
class _Any:
    pos: int


@dataclass(slots=True)
class _Token:
    pos: int


@dataclass(slots=True)
class _Ref:
    name: str
    pos: int


@dataclass(slots=True)
class _Group:
    alts: list[list[object]]
    pos: int


@dataclass(slots=True)
class _Rep:
    item: object
    min: int
    max: int | None  # None: unbounded
    pos: int  # of the operator


@dataclass(slots=True)
class _Rule:
    name: str
    pos: int
    alts: list[list[object]] = field(default_factory=list)
    refs: list[_Ref] = field(default_factory=list)
    complete: bool = False  # False: a syntax error stopped it; its references are not checked


class _Stop(Exception):
    """A syntax error: llama.cpp would stop here."""

    def __init__(self, pos: int, message: str, code: str) -> None:
        super().__init__(message)
        self.pos, self.message, self.code = pos, message, code


def _is_word_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "-")


def _show(c: str) -> str:
    return "end of grammar" if c == "" else repr(c)


# ---------------------------------------------------------------------------------------------
# Parser: mirrors llama_grammar_parser (parse_space, parse_rule, parse_alternates, parse_sequence)


class _Parser:
    def __init__(self, text: str, portable: bool) -> None:
        self.text = text
        self.n = len(text)
        self.portable = portable
        self.issues: list[tuple[int, str, IssueKind, str]] = []
        self.rules: list[_Rule] = []
        self.current = _Rule("", 0)
        self.reps: list[_Rep] = []
        # llama.cpp's symbol table size, for its repetition limit (group and repetition rules count)
        self.user_symbols: set[str] = set()
        self.generated_symbols = 0
        self.newline_literal: int | None = None  # a literal with a raw line break, in this rule

    # -- helpers ------------------------------------------------------------------------------
    def at(self, pos: int) -> str:
        return self.text[pos] if pos < self.n else ""

    def issue(self, pos: int, message: str, kind: IssueKind, code: str) -> None:
        self.issues.append((pos, message, kind, code))

    def portability(self, pos: int, message: str, code: str) -> None:
        if self.portable:
            self.issue(pos, message, "portability", code)

    def n_symbols(self) -> int:
        return len(self.user_symbols) + self.generated_symbols

    def space(self, pos: int, newline_ok: bool) -> int:
        while pos < self.n:
            c = self.text[pos]
            if c in " \t" or (newline_ok and c in "\r\n"):
                pos += 1
            elif c == "#":
                while pos < self.n and self.text[pos] not in "\r\n":
                    pos += 1
            else:
                break
        return pos

    def at_line_start(self, pos: int) -> bool:
        i = pos - 1
        while i >= 0 and self.text[i] in " \t":
            i -= 1
        return i < 0 or self.text[i] in "\r\n"

    # -- grammar ------------------------------------------------------------------------------
    def parse(self) -> None:
        pos = self.space(0, True)
        while pos < self.n:
            try:
                pos = self.rule(pos)
            except _Stop as stop:
                self.issue(stop.pos, stop.message, "syntax", stop.code)
                pos = self.resync(stop.pos)

    def resync(self, pos: int) -> int:
        """The start of the next line that looks like ``name ::=`` (or the end)."""
        while True:
            nl = min((i for i in (self.text.find("\n", pos), self.text.find("\r", pos)) if i >= 0), default=-1)
            if nl < 0:
                return self.n
            pos = nl + 1
            if _HEAD_RE.match(self.text, pos):
                return self.space(pos, True)

    def name(self, pos: int, what: str) -> int:
        end = pos
        while end < self.n and _is_word_char(self.text[end]):
            end += 1
        if end == pos:
            c = self.at(pos)
            if c == "|" and self.at_line_start(pos):
                raise _Stop(pos, "'|' at the start of a line: llama.cpp ends a rule at the newline, so "
                                 "put '|' at the end of the previous line", "bar-at-line-start")
            raise _Stop(pos, f"expecting {what}, found {_show(c)}", "expected-name")
        return end

    def bad_name_char(self, pos: int) -> _Stop | None:
        c = self.at(pos)
        if c == "_" or (c and not c.isascii() and c.isalnum()):
            return _Stop(pos, f"rule names may only contain ASCII letters, digits and '-' (found {c!r})",
                         "rule-name")
        return None

    def rule(self, pos: int) -> int:
        start = pos
        end = self.name(pos, "a rule name")
        name = self.text[start:end]
        if bad := self.bad_name_char(end):
            raise bad
        pos = self.space(end, False)
        if self.text[pos:pos + 3] != "::=":
            raise _Stop(pos, f"expecting '::=' after rule name {name!r}, found {_show(self.at(pos))}",
                        "expected-assign")
        self.user_symbols.add(name)
        rule = self.current = _Rule(name, start)
        self.rules.append(rule)
        self.newline_literal = None
        pos = self.space(pos + 3, True)
        pos, rule.alts = self.alternates(pos, nested=False)
        c = self.at(pos)
        if c == "\r":
            pos += 2 if self.at(pos + 1) == "\n" else 1
        elif c == "\n":
            pos += 1
        elif c:
            raise self.unexpected(pos, name)
        rule.complete = True
        return self.space(pos, True)

    def unexpected(self, pos: int, rule_name: str) -> _Stop:
        c = self.at(pos)
        if bad := self.bad_name_char(pos):
            return bad
        if c == ")":
            return _Stop(pos, "unmatched ')'", "unmatched-paren")
        if self.text.startswith("::=", pos):
            return _Stop(pos, f"'::=' inside rule {rule_name!r}: a newline is missing before the next rule, "
                              "or the rule body is empty (after '::=' or '|' llama.cpp reads on into the next line)",
                         "missing-newline")
        return _Stop(pos, f"unexpected {_show(c)} in rule {rule_name!r}; expecting a newline or the end of the grammar",
                     "unexpected-char")

    def alternates(self, pos: int, nested: bool) -> tuple[int, list[list[object]]]:
        alts: list[list[object]] = []
        seq_pos = pos
        pos, seq = self.sequence(pos, nested)
        alts.append(seq)
        if not seq:
            self.empty_alternative(seq_pos)
        while self.at(pos) == "|":
            bar = pos
            if nested and self.at_line_start(bar):
                self.portability(bar, "'|' at the start of a line; put it at the end of the previous line",
                                 "nested-bar-at-line-start")
            pos = self.space(pos + 1, True)
            pos, seq = self.sequence(pos, nested)
            alts.append(seq)
            if not seq:
                self.empty_alternative(bar)
        return pos, alts

    def empty_alternative(self, pos: int) -> None:
        self.portability(pos, "empty alternative; write \"\" or make the item optional with '?'",
                         "empty-alternative")

    def sequence(self, pos: int, nested: bool) -> tuple[int, list[object]]:
        items: list[object] = []
        can_repeat = False  # llama.cpp: does the last item own elements a repetition can apply to?
        n_prev = 1  # llama.cpp's n_prev_rules
        last_was_rep = False
        while pos < self.n:
            c = self.text[pos]
            if c == '"':
                pos, lit = self.literal(pos)
                items.append(lit)
                can_repeat, n_prev, last_was_rep = bool(lit.text), 1, False
            elif c == "[":
                pos, cls = self.char_class(pos)
                items.append(cls)
                can_repeat, n_prev, last_was_rep = bool(cls.ranges), 1, False
            elif c in "<!":
                items.append(_Token(pos))
                pos = self.token(pos)
                can_repeat, n_prev, last_was_rep = True, 1, False
            elif _is_word_char(c):
                end = self.name(pos, "a rule name")
                ref = _Ref(self.text[pos:end], pos)
                self.user_symbols.add(ref.name)
                self.current.refs.append(ref)
                items.append(ref)
                pos = end
                can_repeat, n_prev, last_was_rep = True, 1, False
            elif c == "(":
                open_pos = pos
                before = self.n_symbols()
                self.generated_symbols += 1
                pos, alts = self.alternates(self.space(pos + 1, True), nested=True)
                if self.at(pos) != ")":
                    if pos >= self.n:
                        raise _Stop(open_pos, "unclosed '(': no matching ')' before the end of the grammar",
                                    "unclosed-paren")
                    raise _Stop(pos, f"expecting ')' to close the group opened at {self.where(open_pos)}, "
                                     f"found {_show(self.at(pos))}", "expected-paren")
                pos += 1
                items.append(_Group(alts, open_pos))
                can_repeat, n_prev, last_was_rep = True, max(1, self.n_symbols() - before), False
            elif c == ".":
                items.append(_Any(pos))
                self.portability(pos, "'.' does not match a newline in llguidance (it does in llama.cpp); "
                                      "use a negated class such as [^\\x00]", "any-char")
                pos += 1
                can_repeat, n_prev, last_was_rep = True, 1, False
            elif c in "*+?{":
                op = pos
                if c == "{":
                    pos, lo, hi = self.braces(pos, nested)
                else:
                    pos += 1
                    lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                if not can_repeat:
                    what = "an empty literal or class counts as nothing" if items else "nothing precedes it"
                    raise _Stop(op, f"{c!r} needs a preceding item ({what})", "repetition-without-item")
                if last_was_rep:
                    self.portability(op, "repetition operator applied to a repetition; wrap the inner one in "
                                         "its own rule", "stacked-repetition")
                elif isinstance(items[-1], _Group) and isinstance(_peel(items[-1]), _Rep):
                    self.portability(op, "repeated group holding a single repetition: llguidance's converter "
                                         "turns it into an invalid 'x?*'; use a separate rule",
                                     "stacked-repetition")
                rep = _Rep(items[-1], lo, hi, op)
                items[-1] = rep
                self.reps.append(rep)
                can_repeat, n_prev = self.repetition(op, lo, hi, n_prev)
                last_was_rep = True
                pos = self.space(pos, nested)
                continue
            else:
                break
            pos = self.space(pos, nested)
        return pos, items

    def repetition(self, op: int, lo: int, hi: int | None, n_prev: int) -> tuple[bool, int]:
        """llama.cpp's handle_repetitions bookkeeping; returns (can_repeat, n_prev)."""
        total = hi if hi is not None and hi > 0 else (lo if lo > 0 else 1)
        if n_prev * total > MAX_REPETITION:
            self.issue(op, f"this repetition expands to more than {MAX_REPETITION} rules "
                           "(llama.cpp refuses it); use fewer nested bounded repetitions", "semantic",
                       "repetition-limit")
        n_opt = 1 if hi is None else max(hi - lo, 0)
        self.generated_symbols += n_opt
        if hi == 0:
            self.portability(op, "repetition of zero times: llguidance refuses it; drop the item", "zero-repetition")
        return not (lo == 0 and n_opt == 0), n_prev * total

    def braces(self, pos: int, nested: bool) -> tuple[int, int, int | None]:
        start = pos
        pos = self.space(pos + 1, nested)
        lo_end = self.integer(pos)
        lo = int(self.text[pos:lo_end])
        pos = self.space(lo_end, nested)
        hi: int | None
        if self.at(pos) == "}":
            hi = lo
            pos += 1
        elif self.at(pos) == ",":
            pos = self.space(pos + 1, nested)
            hi = None
            if self.at(pos).isascii() and self.at(pos).isdigit():
                hi_end = self.integer(pos)
                hi = int(self.text[pos:hi_end])
                pos = self.space(hi_end, nested)
            if self.at(pos) != "}":
                raise _Stop(pos, f"expecting '}}' to close the repetition, found {_show(self.at(pos))}",
                            "bad-repetition")
            pos += 1
        else:
            raise _Stop(pos, f"expecting ',' or '}}' in the repetition, found {_show(self.at(pos))}",
                        "bad-repetition")
        if lo > MAX_REPETITION:
            self.issue(start, f"repetition count {lo} is above llama.cpp's limit of {MAX_REPETITION}", "semantic",
                       "repetition-limit")
            return pos, 1, 1  # reported once; go on as if it were {1}
        if hi is not None and hi < lo:
            self.issue(start, f"repetition {{{lo},{hi}}}: the maximum is below the minimum "
                              "(llama.cpp would try to build billions of rules)", "semantic", "repetition-range")
            hi = lo
        if hi is not None and hi > MAX_REPETITION:
            self.issue(start, f"repetition maximum {hi} is above {MAX_REPETITION}: llama.cpp silently makes it "
                              "unbounded", "semantic", "repetition-max-unbounded")
            hi = None
        return pos, lo, hi

    def integer(self, pos: int) -> int:
        end = pos
        while end < self.n and self.text[end].isascii() and self.text[end].isdigit():
            end += 1
        if end == pos:
            raise _Stop(pos, f"expecting an integer in the repetition, found {_show(self.at(pos))}",
                        "bad-repetition")
        return end

    def literal(self, pos: int) -> tuple[int, _Lit]:
        start = pos
        pos += 1
        chars: list[str] = []
        while self.at(pos) != '"':
            if pos >= self.n:
                hint = " (it runs across a line break)" if self.newline_literal == start else ""
                if self.newline_literal not in (None, start):
                    hint = (f" (the literal at {self.where(self.newline_literal)} runs across a line break: "
                            "is it missing its closing '\"'?)")
                raise _Stop(start, "unterminated string literal" + hint, "unterminated-string")
            raw = self.text[pos]
            if raw in "\r\n" and self.newline_literal is None:
                self.newline_literal = start
            if raw != "\\" and (ord(raw) < 0x20 or ord(raw) == 0x7F):
                self.portability(pos, f"raw control character {raw!r} in a string literal; "
                                      f"write it as an escape (\\t, \\n, \\r or \\x{ord(raw):02X})",
                                 "control-char-in-string")
            pos, cp = self.char(pos, in_class=False)
            chars.append(chr(cp) if cp <= 0x10FFFF else "\uFFFD")
        return pos + 1, _Lit("".join(chars), start)

    def char_class(self, pos: int) -> tuple[int, _Class]:
        start = pos
        pos += 1
        negated = self.at(pos) == "^"
        if negated:
            pos += 1
        body = pos
        ranges: list[tuple[int, int]] = []
        while self.at(pos) != "]":
            if pos >= self.n:
                raise _Stop(start, "unterminated character class", "unterminated-class")
            char_pos = pos
            pos, lo = self.char(pos, in_class=True)
            hi = lo
            if self.at(pos) == "-" and self.at(pos + 1) != "]":
                if pos + 1 >= self.n:
                    raise _Stop(start, "unterminated character class", "unterminated-class")
                pos, hi = self.char(pos + 1, in_class=True)
                if hi < lo:
                    self.portability(char_pos, f"inverted range {self.text[char_pos:pos]!r} matches nothing in "
                                               "llama.cpp and is refused by llguidance", "inverted-range")
            ranges.append((lo, hi))
        self.set_operators(body, pos)
        if not ranges:
            self.portability(start, "empty character class: llama.cpp reads it as the empty string, "
                                    "llguidance refuses it", "empty-class")
        return pos + 1, _Class(ranges, negated, start)

    def set_operators(self, pos: int, end: int) -> None:
        """llguidance hands a class to a regex engine where '&&', '--' and '~~' are set operators."""
        while pos < end - 1:
            c = self.text[pos]
            if c == "\\":
                pos += 2
                continue
            if c in "&-~" and self.text[pos + 1] == c:
                self.portability(pos, f"{c * 2!r} inside a class is a set operator in llguidance's regex syntax; "
                                      f"write one of them as \\x{ord(c):02X}", "class-set-operator")
                pos += 2
                continue
            pos += 1

    def char(self, pos: int, in_class: bool) -> tuple[int, int]:
        """llama.cpp's parse_char: one (possibly escaped) character."""
        c = self.text[pos]
        if c != "\\":
            return pos + 1, ord(c)
        e = self.at(pos + 1)
        if e in ("x", "u", "U"):
            size = {"x": 2, "u": 4, "U": 8}[e]
            digits = self.text[pos + 2:pos + 2 + size]
            if len(digits) < size or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise _Stop(pos, f"escape \\{e} needs exactly {size} hex digits", "bad-escape")
            value = int(digits, 16)
            if e != "x":
                self.portability(pos, f"\\{e} escape: llguidance's converter mangles it; write the character "
                                      "itself (raw UTF-8)", "unicode-escape")
                if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
                    self.issue(pos, f"\\{e}{digits} is not a Unicode scalar value and can never match", "semantic",
                               "bad-codepoint")
            return pos + 2 + size, value
        if e in "trn" and e:
            return pos + 2, ord({"t": "\t", "r": "\r", "n": "\n"}[e])
        if e in ('\\', '"'):
            return pos + 2, ord(e)
        if e in ("[", "]"):
            if not in_class:
                self.portability(pos, f"\\{e} escape in a string literal: llguidance refuses it; write {e} "
                                      "unescaped", "escape-bracket-in-string")
            return pos + 2, ord(e)
        if e == "-":
            self.portability(pos, "\\- escape: llguidance refuses it; write \\x2D (or put '-' first or last "
                                  "in a class)", "escape-dash")
            return pos + 2, ord(e)
        if e == "":
            raise _Stop(pos, "unexpected end of grammar after '\\'", "bad-escape")
        raise _Stop(pos, f"unknown escape \\{e} (llama.cpp knows \\x \\u \\U \\t \\r \\n \\\\ \\\" \\[ \\] \\-)",
                    "bad-escape")

    def token(self, pos: int) -> int:
        start = pos
        if self.at(pos) == "!":
            pos += 1
        if self.at(pos) != "<":
            raise _Stop(pos, f"expecting '<' after '!', found {_show(self.at(pos))}", "bad-token")
        pos += 1
        if self.at(pos) == "[":
            end = self.integer_token(pos + 1)
            if self.text[end:end + 2] != "]>":
                raise _Stop(end, "expecting ']>' to close the token id", "bad-token")
            pos = end + 2
        else:
            close = self.text.find(">", pos)
            if close < 0:
                raise _Stop(start, "unterminated token: no '>'", "bad-token")
            pos = close + 1
        self.portability(start, f"token syntax {self.text[start:pos]!r} is llama.cpp-only (needs its vocabulary); "
                                "llguidance and xgrammar refuse it", "token")
        return pos

    def integer_token(self, pos: int) -> int:
        end = pos
        while end < self.n and self.text[end].isascii() and self.text[end].isdigit():
            end += 1
        if end == pos:
            raise _Stop(pos, "expecting a token id (integer) after '<['", "bad-token")
        if int(self.text[pos:end]) > 0xFFFFFFFF:
            raise _Stop(pos, "token id is too big", "bad-token")
        return end

    def where(self, pos: int) -> str:
        line, col = _LineIndex(self.text).locate(pos)
        return f"line {line}, column {col}"


def _peel(group: _Group) -> object:
    """What llguidance's converter reduces a group to: single alternative, single item, recursively."""
    node: object = group
    while isinstance(node, _Group) and len(node.alts) == 1 and len(node.alts[0]) == 1:
        node = node.alts[0][0]
    return node


class _LineIndex:
    def __init__(self, text: str) -> None:
        self.starts = [0]
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if c == "\r" and i + 1 < n and text[i + 1] == "\n":
                i += 1
            if c in "\r\n":
                self.starts.append(i + 1)
            i += 1

    def locate(self, pos: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, pos)
        return line, pos - self.starts[line - 1] + 1


# ---------------------------------------------------------------------------------------------
# Semantic checks over the parsed rules


class _Semantics:
    def __init__(self, parser: _Parser) -> None:
        self.p = parser
        self.defs: dict[str, _Rule] = {}
        for rule in parser.rules:
            if rule.name in self.defs:
                parser.issue(rule.pos, f"rule {rule.name!r} is defined twice (first at "
                                       f"{parser.where(self.defs[rule.name].pos)}); llama.cpp silently keeps the last "
                                       "definition", "semantic", "duplicate-rule")
            self.defs[rule.name] = rule  # the last one wins, as in llama.cpp
        self.nullable: dict[str, bool] = {name: False for name in self.defs}

    def run(self, had_syntax_errors: bool) -> None:
        p = self.p
        reported: set[str] = set()
        for ref in (ref for rule in p.rules if rule.complete for ref in rule.refs):
            if ref.name not in self.defs and ref.name not in reported:
                reported.add(ref.name)
                p.issue(ref.pos, f"undefined rule {ref.name!r}", "semantic", "undefined-rule")
        if "root" not in self.defs and not (had_syntax_errors and re.search(r"(?m)^[ \t]*root\b", p.text)):
            p.issue(0, "no 'root' rule: llama.cpp starts from 'root'", "semantic", "no-root")
        self.compute_nullable()
        self.check_repetitions()
        self.check_left_recursion()
        if p.portable:
            self.check_names()

    # -- nullability ----------------------------------------------------------------------------
    def item_nullable(self, item: object) -> bool:
        if isinstance(item, _Lit):
            return not item.text
        if isinstance(item, _Class):
            return not item.ranges  # llama.cpp reads [] as nothing
        if isinstance(item, _Ref):
            return self.nullable.get(item.name, False)
        if isinstance(item, _Group):
            return any(self.seq_nullable(seq) for seq in item.alts)
        if isinstance(item, _Rep):
            return item.min == 0 or item.max == 0 or self.item_nullable(item.item)
        return False  # '.', tokens

    def seq_nullable(self, seq: list[object]) -> bool:
        return all(self.item_nullable(item) for item in seq)

    def compute_nullable(self) -> None:
        changed = True
        while changed:
            changed = False
            for name, rule in self.defs.items():
                if not self.nullable[name] and any(self.seq_nullable(seq) for seq in rule.alts):
                    self.nullable[name] = changed = True

    def check_repetitions(self) -> None:
        for rep in self.p.reps:
            if rep.max is None and self.item_nullable(rep.item):
                self.p.issue(rep.pos, "unbounded repetition of an item that can match the empty string: llama.cpp "
                                      "expands it into a left-recursive rule; make the repeated item non-empty",
                             "semantic", "nullable-repetition")

    # -- left recursion ---------------------------------------------------------------------------
    def starts(self, seq: list[object], out: list[_Ref]) -> None:
        """The rule references that can come first in ``seq`` (looking past nullable items)."""
        for item in seq:
            self.item_starts(item, out)
            if not self.item_nullable(item):
                return

    def item_starts(self, item: object, out: list[_Ref]) -> None:
        if isinstance(item, _Ref):
            out.append(item)
        elif isinstance(item, _Group):
            for seq in item.alts:
                self.starts(seq, out)
        elif isinstance(item, _Rep) and item.max != 0:
            self.item_starts(item.item, out)

    def check_left_recursion(self) -> None:
        edges: dict[str, list[_Ref]] = {}
        for name, rule in self.defs.items():
            out: list[_Ref] = []
            for seq in rule.alts:
                self.starts(seq, out)
            edges[name] = [ref for ref in out if ref.name in self.defs]
        for component in _cycles(edges):
            first = min(component, key=lambda name: self.defs[name].pos)
            path = _cycle_path(first, component, edges)
            names = " -> ".join([first] + [ref.name for ref in path])
            self.p.issue(path[0].pos, f"left recursion: {names} (llama.cpp refuses it, or, when it goes through "
                                      "a rule that can match nothing, runs out of memory on it; rewrite with "
                                      "repetition, e.g. a ::= b (\"x\" b)*)", "semantic", "left-recursion")

    # -- names, for llguidance's converter ---------------------------------------------------------
    def check_names(self) -> None:
        """Rule names as llguidance's GBNF converter renames them (it refuses a rename onto a taken name)."""
        for name, rule in self.defs.items():
            if not _PORTABLE_NAME_RE.match(name):
                self.p.issue(rule.pos, f"rule name {name!r} should start with a letter (llguidance turns it into an "
                                       "invalid Lark name)", "portability", "rule-name-start")
        if "root" not in self.defs:
            return
        terminal = self.terminal_rules()
        current = {name: name for name in self.defs}  # original name -> name in the converter now
        taken = dict.fromkeys(self.defs)  # the converter's rule table, in its order

        def rename(name: str, new: str, why: str) -> None:
            owner = next(orig for orig, cur in current.items() if cur == new) if new in taken else None
            if owner is not None:
                raise _Stop(self.defs[name].pos, f"rule names {owner!r} and {name!r} collide in llguidance ({why}); "
                                                 "rename one", "rule-name-collision")
            del taken[current[name]]
            taken[new] = None
            current[name] = new
        try:  # the converter stops at the first collision
            rename("root", "start", "it renames 'root' to 'start'")
            for name in [orig for cur in list(taken) for orig, c in current.items() if c == cur]:
                new = re.sub(r"([a-z])([A-Z])", r"\1_\2", current[name].replace("-", "_"))
                new = new.upper() if name in terminal else new.lower()
                if new != current[name]:
                    rename(name, new, "it maps '-' to '_', splits camelCase, then upper-cases rules made of "
                                      "terminals only and lower-cases the others")
        except _Stop as stop:
            self.p.issue(stop.pos, stop.message, "portability", stop.code)

    def terminal_rules(self) -> set[str]:
        """Rules llguidance's converter makes lexemes: built of literals, classes and such rules only."""
        terminal: set[str] = set()

        def is_terminal(item: object) -> bool:
            if isinstance(item, _Ref):
                return item.name in terminal
            if isinstance(item, _Group):
                return all(is_terminal(i) for seq in item.alts for i in seq)
            if isinstance(item, _Rep):
                return is_terminal(item.item)
            return not isinstance(item, _Token)

        changed = True
        while changed:
            changed = False
            for name, rule in self.defs.items():
                if name != "root" and name not in terminal and all(is_terminal(i) for seq in rule.alts for i in seq):
                    terminal.add(name)
                    changed = True
        return terminal


def _cycles(edges: dict[str, list[_Ref]]) -> list[list[str]]:
    """Strongly connected components that contain a cycle (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = edges[node]
            if i < len(targets):
                work.append((node, i + 1))
                nxt = targets[i].name
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1 or any(ref.name == node for ref in edges[node]):
                    found.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def _cycle_path(first: str, component: list[str], edges: dict[str, list[_Ref]]) -> list[_Ref]:
    """The references of a shortest cycle from ``first`` back to itself inside ``component``."""
    members = set(component)
    prev: dict[str, tuple[str, _Ref]] = {}
    frontier = [first]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for ref in edges[node]:
                if ref.name not in members:
                    continue
                if ref.name == first:
                    path = [ref]
                    while node != first:
                        node, back = prev[node]
                        path.append(back)
                    return path[::-1]
                if ref.name not in prev:
                    prev[ref.name] = (node, ref)
                    nxt_frontier.append(ref.name)
        frontier = nxt_frontier
    raise AssertionError("a strongly connected component without a cycle")


# ---------------------------------------------------------------------------------------------
# Public API


def _parse(text: str, portable: bool) -> _Parser:
    nul = text.find("\0")
    parser = _Parser(text[:nul] if nul >= 0 else text, portable)
    parser.parse()
    if nul >= 0:
        parser.issue(nul, "NUL character: llama.cpp stops reading the grammar here", "syntax", "nul")
    return parser


def check_gbnf(text: str, *, portable: bool = True) -> list[GbnfIssue]:
    """Every problem llama.cpp (and, with ``portable``, llguidance/xgrammar) would have with ``text``.

    An empty list means the grammar is fine. Issues are ordered by position.

    Example::

        >>> [i.code for i in check_gbnf('root ::= | "x"\\n')]
        ['empty-alternative']
        >>> check_gbnf('root ::= | "x"\\n', portable=False)
        []
    """
    parser = _parse(text, portable)
    had_syntax = any(kind == "syntax" for _, _, kind, _ in parser.issues)
    _Semantics(parser).run(had_syntax)
    lines = _LineIndex(text)
    issues = []
    for pos, message, kind, code in sorted(parser.issues, key=lambda issue: issue[0]):
        line, col = lines.locate(pos)
        issues.append(GbnfIssue(line, col, f"line {line}, column {col}: {message}", kind, code))
    return issues


def assert_valid_gbnf(text: str, *, portable: bool = True) -> None:
    """Raise ``GrammarError`` listing every issue of ``text`` (see ``check_gbnf``); return None when valid.

    Example::

        >>> assert_valid_gbnf('root ::= "x" | y\\n')
        Traceback (most recent call last):
        ...
        chat_autoparser.errors.GrammarError: invalid GBNF grammar (1 issue(s)):
          line 1, column 16: undefined rule 'y' [semantic]
    """
    issues = check_gbnf(text, portable=portable)
    if issues:
        raise GrammarError(issues)


def rule_names(text: str) -> list[str]:
    """The names of the rules ``text`` defines, in order of first definition (syntax errors skipped).

    Example::

        >>> rule_names('root ::= a\\na ::= "x"\\n')
        ['root', 'a']
    """
    parser = _parse(text, portable=False)
    return list(dict.fromkeys(rule.name for rule in parser.rules))
