"""The public parser: :class:`MessageParser` (one-shot) and :class:`MessageStream` (streaming),
and the thinking setting a request runs under.

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> p = MessageParser(analyze_template("templates/chatml-think.jinja"))
    >>> s = p.stream()
    >>> [e["text"] for c in ("<think>\\nh", "m\\n</think>\\nHi") for e in s.feed(c) if e["type"] == "region_chunk"]
    ['h', 'm', 'Hi']
    >>> s.finish()[0]["content"]
    'Hi'
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from chat_autoparser.errors import ParseError
from chat_autoparser.analyzer.structures import TemplateAnalysis, ToolCallStructure

from .assemble import FIELD, Assembler, CallShape, CallState, IdFactory
from .message import build_message_grammar
from .state import PromptRenderer, StartState, start_state
from .values import encode_string
from .peg import FAIL, Parser, Session


class MessageStream:
    """Incremental parser: ``feed(chunk) -> events``, ``finish() -> (message, events)``.

    Each event is a region event (``region_open``/``region_chunk``/``region_close`` with a
    ``field``); :func:`as_delta` reads it as an OpenAI delta.
    """

    def __init__(self, grammar: Parser, ts: ToolCallStructure, tools: Mapping[str, Any] | None,
                 strict: bool = False, id_factory: IdFactory | None = None, shape: CallShape | None = None) -> None:
        self._session = Session(grammar)
        self._asm = Assembler(ts, tools, id_factory, shape)
        self._strict = strict
        self._done = False
        # the hot path: while the parser waits in plain text (``_arm``), a chunk without any
        # of ``_hot`` characters is appended to ``_tail`` and reported at once; what the
        # parser's input owes for it is settled before the next chunk that is not (``_settle``)
        self._hot: frozenset[str] | None = None
        # whitespace a stop marker may take before it (``_Fast.ws``): held back at a chunk's end,
        # emitted with the text that goes on (``_held``: what is held now)
        self._hot_end = ""  # (``_Fast.hold``)
        self._hold_last = ""  # (``_Fast.ends``)
        # ``_hot`` is ``_narrow`` while ``_plain``, ``_wide`` otherwise. ``_wide``: the stop's
        # characters; ``_narrow``: also the line breaks after which a stop may take whitespace,
        # so that a chunk without them, when nothing is held, holds nothing back (a chunk with
        # them takes ``_unplain``). ``_spaced``: the stop takes spaces without a line break, so a
        # plain chunk's last character is tested instead
        self._narrow: frozenset[str] | None = None
        self._wide: frozenset[str] | None = None
        self._spaced = False
        # armed in JSON arguments: the value's scanner (``_JsonScan``), which reads a chunk alone
        # while the value goes on (see ``_feed_scanned``); ``_hot`` is its ``stop``
        self._scan: Any = None
        # armed in text or arguments, nothing held and nothing to escape: a chunk without
        # ``_narrow`` characters (and, ``_spaced``, not ending in ``_hold_last``) is appended
        # and reported as it is
        self._plain = False
        self._held = ""
        self._held0 = 0  # how much was held when the hot path was armed
        self._tail: list[str] = []
        self._since = 0  # ``_tail[_since:]`` came by the hot path, the input owes for it
        self._field = ""
        self._index = -1  # the call whose arguments the text is; -1: content/reasoning; -2: none (a wait)
        self._escape = False  # the text is a string value of tagged arguments (streamed JSON-escaped)
        self._fed = 0  # characters the input owes (fed by the hot path since it was armed)
        self._owed_chunks = 0  # chunks the input owes (content compacted out of ``_tail``)
        # the text of the open call while it has no name, from its start (kept as content if it
        # never gets one); a list of chunks, so that keeping it costs no copying
        self._keep: list[str] | None = None
        self._keep_call: CallState | None = None
        self._asm.raw = self._raw

    def feed(self, chunk: str) -> list[dict[str, Any]]:
        hot = self._hot
        if hot is not None and chunk and (hot.isdisjoint(chunk) or self._line_break(chunk)):
            # (a chunk is emitted as it is unless something is held back or escaped (``_plain``),
            # or it ends in whitespace a stop may take: see ``_narrow``)
            if not self._plain or self._spaced and chunk[-1] in self._hold_last:
                chunk = self._unplain(chunk)
                if not chunk:
                    return []
            index = self._index
            if index == -1:
                tail = self._tail
                tail.append(chunk)
                if len(tail) >= 256:
                    self._compact()
                return [{"type": "region_chunk", "field": self._field, "text": chunk, "dirty": False}]
            if index >= 0:
                self._tail.append(chunk)
                return [{"type": "region_chunk", "field": "tool_calls", "index": index, "text": chunk,
                         "dirty": False}]
            # the parser waits for a bracket or a quote: nothing to report
            inp = self._session.inp
            if self._keep is not None:
                self._keep.append(chunk)
            inp.feed(chunk)
            inp.fast.emitted = inp.end
            return []
        if self._scan is not None and chunk:  # JSON arguments: the scanner reads the chunk alone
            out = self._feed_scanned(chunk)
            if out is not None:
                return out
        if self._done:
            raise RuntimeError("feed() after finish()")
        self._settle()
        out = self._feed(chunk)
        self._arm()
        return out

    def _line_break(self, chunk: str) -> bool:
        """Whether a chunk that is not plain text only for its line breaks (see ``_narrow``) is
        still the hot path's: it is, and is not plain when it ends in whitespace a stop may take."""
        wide = self._wide
        if wide is self._hot or not wide.isdisjoint(chunk):
            return False
        if chunk[-1] in self._hold_last:
            self._hot, self._plain = wide, False
        return True

    def _unplain(self, chunk: str) -> str:
        """What a hot-path chunk emits when it is not plain: with the text held back before it,
        less the whitespace a stop may take after it (held back now); a string value's text as
        the JSON string's (its quotes are written apart)."""
        if self._held or chunk[-1] in self._hot_end or \
                chunk[-1] in self._hold_last and ("\n" in chunk or "\r" in chunk):
            text = self._held + chunk
            chunk = text.rstrip(self._session.inp.fast.ws)
            held = text[len(chunk):]
            if held and not self._spaced and "\n" not in held and "\r" not in held:
                chunk, held = text, ""  # spaces after text, not after a line break: no stop takes them
            self._held = held
        self._plain = not self._held and not self._escape
        self._hot = self._narrow if self._plain else self._wide
        if self._escape and chunk:
            self._fed += len(chunk)
            chunk = encode_string(chunk)[1:-1]
        return chunk

    def _feed_scanned(self, chunk: str) -> list[dict[str, Any]] | None:
        """A chunk of JSON arguments the value goes on past (None: it ends or breaks the value,
        the parser reads it): emitted as it is, the input owes it (see ``_settle``)."""
        scan = self._scan
        if self._held or not scan.goes_on(chunk):
            return None
        self._hot = self._wide = self._narrow = scan.stop
        self._tail.append(chunk)
        return [{"type": "region_chunk", "field": "tool_calls", "index": self._index, "text": chunk, "dirty": False}]

    def _compact(self) -> None:
        """The text's chunks joined (counted first: see ``_count_owed``)."""
        self._count_owed()
        self._asm.text[self._field].compact()
        self._since = 0

    def _count_owed(self) -> None:
        """The chunks the hot path added to ``_tail`` and their characters (counted here, not
        per chunk; escaped text is counted as it comes)."""
        tail, since = self._tail, self._since
        n = len(tail)
        self._owed_chunks += n - since
        if not self._escape:
            self._fed += len(tail[since]) if n - since == 1 else sum(map(len, tail[since:]))
        self._since = n

    def _settle(self) -> None:
        """The input positions the hot path owes: its chunks were emitted, nothing of them is
        read again but the whitespace it holds back."""
        if (self._hot is not None or self._scan is not None) and self._index != -2:
            if len(self._tail) != self._since:
                self._count_owed()
            if self._held or self._held0:
                self._fed += len(self._held) - self._held0  # (fed = text emitted + what it holds more)
                self._held0 = len(self._held)
        if self._owed_chunks:
            inp = self._session.inp
            held = self._held
            inp.end += self._fed
            inp.text, inp.base = held, inp.end - len(held)
            inp.fast.emitted = inp.keep_from = inp.chunk_pos = inp.base
            inp.chunks += self._owed_chunks
            inp.soft_pins.clear()
            self._fed = self._owed_chunks = 0
        elif self._fed:  # whitespace only, held with what was
            self._session.inp.feed(self._held[len(self._held) - self._fed:])
            self._fed = 0

    def _arm(self) -> None:
        """Whether the parser now waits in plain text of the message (content, reasoning, the
        arguments of an announced call or a string value of its tagged arguments) with nothing
        to read back."""
        self._hot = self._scan = None  # (what else the hot path reads is set before it is armed again)
        session = self._session
        inp = session.inp
        fast = inp.fast
        if fast is None or fast.stop is None and not fast.scan or session.result is not None:
            return
        tag = fast.tag
        if not tag:
            if fast.emitted == inp.end and not fast.ws and fast.stop is not None:
                self._hot = self._wide = fast.stop
                self._index, self._plain, self._spaced = -2, True, False
            return
        if inp.pins:
            return
        fld = FIELD.get(tag)
        if fld is not None:
            self._field, self._index, self._tail, self._escape = fld, -1, self._asm.text[fld].tail, False
        else:
            call = self._asm.current
            if call is None or not call.announced or not (tag == "tool_args" or tag == "arg_value"
                                                          and call.value_streaming):
                return
            self._index, self._tail, self._escape = call.index, call.args, tag == "arg_value"
        held = inp.get(fast.emitted, inp.end) if fast.emitted != inp.end else ""  # (``_Fast.held``)
        stop = self._wide = fast.stop
        self._hot_end = fast.hold
        self._hold_last = fast.ends  # (a chunk ending in one of these may hold whitespace back)
        self._spaced = bool(fast.hold.strip("\r\n"))
        breaks = "" if self._spaced or stop is None else "\r\n" if fast.lines and fast.ends else fast.hold
        self._narrow = stop.union(breaks) if breaks else stop
        self._held = held
        self._held0 = len(held)
        self._since = len(self._tail)
        self._plain = not self._held and not self._escape
        self._hot = self._narrow if self._plain else stop
        if fast.scan and tag == "tool_args" and not inp.holds:
            self._scan = fast

    def _feed(self, chunk: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self._keep is not None:
            self._keep.append(chunk)
        tag = self._session.take(chunk)
        if tag is None:
            self._asm.handle(self._session.inp.drain(), out)
            self._track_call()
        elif tag and self._session.taken:
            self._asm.chunk(tag, self._session.taken, out)
        return out

    def _track_call(self) -> None:
        """Keeps the open call's text from its start while it has no name."""
        call = self._asm.current
        if call is None or call.name:
            self._keep = self._keep_call = None
        elif call is not self._keep_call:
            inp = self._session.inp
            self._keep_call = call
            self._keep = [inp.get(call.start, inp.end)] if call.start >= inp.base else None

    def _raw(self, a: int, b: int) -> str | None:
        """The output's text from ``a`` to ``b``, if still at hand (see ``Assembler.raw``)."""
        if self._keep is not None and a >= self._keep_call.start:
            text = "".join(self._keep)
            self._keep = [text]
            at = self._keep_call.start
            return text[a - at:b - at] if b - at <= len(text) else None
        inp = self._session.inp
        return inp.get(a, b) if inp.base <= a <= b <= inp.end else None

    def whole(self, text: str, *, plans: bool = True) -> dict[str, Any]:
        """One-shot: the message of a complete output fed at once (no region events are built).
        ``plans`` off: calls are read part by part even where they could be read whole
        (:mod:`chat_autoparser.generator.plan`), as streaming reads them (for checks)."""
        if self._done or self._session.inp.end:
            raise RuntimeError("whole() on a stream that was fed")
        self._asm.quiet = True
        self._asm.raw = lambda a, b: text[a:b]
        self._session.start_whole(text, whole=plans)
        return self.finish()[0]

    def finish(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        self._settle()
        self._done = True
        self._hot = self._scan = None
        end, events = self._session.finish()
        out: list[dict[str, Any]] = []
        self._asm.handle(events, out)
        if end == FAIL:  # the grammar cannot fail at top level; keep the rule explicit anyway
            inp = self._session.inp
            self._asm.errors.append({"position": inp.error_pos, "message": inp.error})
        message = self._asm.message()
        if self._strict:
            err = message.get("parse_error") or min(self.deviations, key=lambda d: d["position"], default=None)
            if err is not None:
                raise ParseError(err["message"], position=err["position"])
        return message, out

    @property
    def deviations(self) -> list[dict[str, Any]]:
        """The forms read so far that the template does not write (``position``, ``message``):
        whitespace other than the template's, a marker written again or left out, a call in
        another shape. The message does not change for them; ``strict`` refuses them."""
        return self._asm.deviations


class MessageParser:
    """Parses one model's output into an OpenAI-style assistant message.

    Example::

        >>> from chat_autoparser.analyzer import analyze_template
        >>> p = MessageParser(analyze_template("templates/chatml-think.jinja"))
        >>> p.parse("<think>\\nhmm\\n</think>\\nHi!")["content"]
        'Hi!'
    """

    def __init__(self, analysis: TemplateAnalysis, *, tools: Sequence[Mapping[str, Any]] | None = None,
                 tool_choice: str = "auto", parallel_tool_calls: bool = True, enable_thinking: bool | None = None,
                 prompt: str | None = None, calls_in_reasoning: bool = True,
                 id_factory: IdFactory | None = None, chat_template_kwargs: Mapping[str, Any] | None = None,
                 prompt_renderer: PromptRenderer | None = None) -> None:
        self.analysis = analysis
        self.id_factory = id_factory
        self.tools = {t.get("function", t)["name"]: t.get("function", t) for t in (tools or [])}
        self._shape = CallShape.of(analysis.tool_call_structure)
        self.state = start_state(analysis, enable_thinking=enable_thinking, prompt=prompt, with_tools=bool(self.tools),
                                 chat_template_kwargs=chat_template_kwargs, render=prompt_renderer)
        self.mode = self.state.mode
        self.tools_enabled = tool_choice != "none"
        self.parallel = parallel_tool_calls and analysis.tool_call_structure.supports_parallel
        self._calls_in_reasoning = calls_in_reasoning
        self.grammar = self._grammar(self.state)
        # the prompt ends with the start of a marker: the grammar for an output that completes it
        self.completed = self._grammar(self.state.completed) if self.state.completed is not None else None

    def _grammar(self, state: StartState) -> Parser:
        return build_message_grammar(self.analysis, mode=state.mode, tools_enabled=self.tools_enabled,
                                     parallel=self.parallel, tool_names=frozenset(self.tools) if self.tools else None,
                                     calls_in_reasoning=self._calls_in_reasoning, open_content=state.open_content)

    def _stream(self, grammar: Parser, strict: bool) -> MessageStream:
        return MessageStream(grammar, self.analysis.tool_call_structure, self.tools, strict, self.id_factory, self._shape)

    def stream(self, *, strict: bool = False) -> MessageStream | CompletingStream:
        """An incremental parser: ``feed(chunk) -> events``, ``finish() -> (message, events)``."""
        if self.completed is None:
            return self._stream(self.grammar, strict)
        return CompletingStream(self.state.completion, lambda done: self._stream(
            self.completed if done else self.grammar, strict))

    def parse(self, text: str, *, strict: bool = False) -> dict[str, Any]:
        """The message in ``text`` (raises ParseError only when ``strict``)."""
        if self.completed is not None and text.startswith(self.state.completion):
            return self._stream(self.completed, strict).whole(text[len(self.state.completion):])
        return self._stream(self.grammar, strict).whole(text)


class CompletingStream:
    """A stream whose output may start by completing a marker the prompt ended with: the first
    characters decide (and, when they complete it, are not the output's text)."""

    def __init__(self, completion: str, make: Callable[[bool], MessageStream]) -> None:
        self.completion = completion
        self.make = make
        self.head = ""
        self.inner: MessageStream | None = None

    def _decide(self, done: bool) -> list[dict[str, Any]]:
        self.inner = self.make(done)
        rest = self.head[len(self.completion):] if done else self.head
        return self.inner.feed(rest) if rest else []

    def feed(self, chunk: str) -> list[dict[str, Any]]:
        if self.inner is not None:
            return self.inner.feed(chunk)
        self.head += chunk
        if len(self.head) < len(self.completion) and self.completion.startswith(self.head):
            return []  # not decided yet
        return self._decide(self.head.startswith(self.completion))

    def finish(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        out = self._decide(False) if self.inner is None else []
        assert self.inner is not None
        message, events = self.inner.finish()
        return message, out + events

    @property
    def deviations(self) -> list[dict[str, Any]]:
        """See :attr:`MessageStream.deviations`."""
        return self.inner.deviations if self.inner is not None else []
