"""Real grammar engines as acceptance oracles for our GBNF (no model weights, no GPU).

- ``LLGuidanceChecker``: llguidance (a test extra) over a 257-token byte vocabulary.
- ``LlamaCppChecker``: llama.cpp through ``llama_cpp`` (llama-cpp-python) over a vocab-only GGUF,
  only when that package imports (``llama_cpp_available()``); it has no wheel and compiles for
  8-12 minutes, so CI does not install it by default.

Both answer one question: does the grammar, as that engine reads it, accept the whole text and
then allow end-of-sequence? Example::

    >>> checker = LLGuidanceChecker('root ::= "a" [0-9]+\\n')
    >>> checker.accepts("a42"), checker.accepts("a"), checker.accepts("a4b")
    (True, False, False)
"""

from __future__ import annotations

import ctypes
import importlib
import math
import os
import re
import tempfile
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from pathlib import Path
from typing import Any, Collection, Sequence

from chat_autoparser.errors import EngineError

from ..triggers import trigger_start

__all__ = ["EngineError", "LarkChecker", "LLGuidanceChecker", "LlamaCppChecker", "LlamaCppWorker", "LlamaRun", "llama_cpp_available",
           "llama_cpp_pattern", "grammar_verdict", "llama_cpp_verdict"]


# ---------------------------------------------------------------------------------------------
# llguidance

_EOS = 256  # token id of end-of-sequence in the byte vocabulary


class _ByteTokenizer:
    """What ``llguidance.TokenizerWrapper`` needs: 256 one-byte tokens and an EOS token."""

    eos_token_id = _EOS
    bos_token_id = None
    tokens = [bytes([b]) for b in range(256)] + [b"<eos>"]
    special_token_ids = [_EOS]

    def __call__(self, text: str | bytes) -> list[int]:
        return list(text.encode("utf-8") if isinstance(text, str) else text)


@lru_cache(maxsize=1)
def _byte_tokenizer() -> Any:
    import llguidance

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokenizer()))


class LarkChecker:
    """A grammar in llguidance's Lark dialect compiled by llguidance; ``accepts(text)`` matches
    whole texts. A grammar llguidance refuses raises ``EngineError`` with its message. Each
    ``accepts`` works on a ``deep_copy`` of one matcher built up front.

    Example::

        >>> LarkChecker('start: "a" /[0-9]+/').accepts("a42")
        True
    """

    engine = "llguidance"

    def __init__(self, lark: str) -> None:
        try:
            import llguidance
        except ImportError as e:  # pragma: no cover - llguidance is a dependency
            raise EngineError(self.engine, f"not installed ({e}); pip install llguidance") from e
        self.lark = lark
        tokenizer = _byte_tokenizer()
        try:
            grammar = llguidance.LLMatcher.grammar_from_lark(self.lark)
        except Exception as e:
            raise EngineError(self.engine, f"grammar refused: {e}") from e
        error = llguidance.LLMatcher.validate_grammar(grammar, tokenizer)
        if error:
            raise EngineError(self.engine, f"grammar refused: {error}")
        self._matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        if self._matcher.is_error():
            raise EngineError(self.engine, f"grammar refused: {self._matcher.get_error()}")

    def accepts(self, text: str) -> bool:
        """True iff all of ``text`` (its UTF-8 bytes) is consumed and EOS is then allowed."""
        matcher = self._matcher.deep_copy()
        return matcher.consume_tokens(list(text.encode("utf-8"))) and matcher.is_accepting()

    def accepted_prefix(self, text: str) -> tuple[int, int]:
        """(end of the longest prefix of ``text`` the grammar accepts as a whole output, -1 for
        none; characters consumed before the grammar refused the next byte).

        Example::

            >>> LarkChecker('start: "ab"').accepted_prefix("abc")
            (2, 2)
        """
        m = self._matcher.deep_copy()
        data = text.encode("utf-8")
        best, consumed = (0 if m.is_accepting() else -1), 0
        for i, byte in enumerate(data):
            if not m.consume_token(byte):
                break
            consumed = i + 1
            if m.is_accepting():
                best = i + 1

        def chars(n: int) -> int:
            return len(data[:n].decode("utf-8", "ignore"))
        return (chars(best) if best >= 0 else -1), chars(consumed)


class LLGuidanceChecker(LarkChecker):
    """A GBNF grammar compiled by llguidance; ``accepts(text)`` matches whole texts.

    The grammar goes through llguidance's own GBNF→Lark converter (``gbnf_to_lark``; we call it
    directly rather than ``grammar_from("gbnf", ...)``, which passes text through unconverted when
    a line looks like Lark, e.g. a rule named ``start``), then :class:`LarkChecker`.

    Measured on a 2-core machine (llguidance 1.9.1, idle): the tool-call grammar of the tests compiles
    in about 4 ms (llama.cpp's json.gbnf in about 6 ms) and a 95-byte text matches in about 0.12 ms.

    Example::

        >>> LLGuidanceChecker('root ::= "\\\\u00e9"\\n')
        Traceback (most recent call last):
        ...
        chat_autoparser.errors.EngineError: llguidance: grammar refused: ...
    """

    def __init__(self, gbnf: str) -> None:
        try:
            from llguidance.gbnf_to_lark import gbnf_to_lark
        except ImportError as e:  # pragma: no cover - llguidance is a dependency
            raise EngineError(self.engine, f"not installed ({e}); pip install llguidance") from e
        try:
            lark = gbnf_to_lark(gbnf)
        except Exception as e:  # the converter raises bare Exceptions
            raise EngineError(self.engine, f"GBNF to Lark conversion failed: {e}") from e
        super().__init__(lark)



def accepted_prefix(checker: Any, text: str) -> tuple[int, int]:
    """See ``LLGuidanceChecker.accepted_prefix``; a checker without it has only ``accepts``."""
    if hasattr(checker, "accepted_prefix"):
        return checker.accepted_prefix(text)
    return (len(text), len(text)) if checker.accepts(text) else (-1, 0)


def grammar_verdict(checker: Any, params: Any, generated: str, with_calls: bool,
                    tool_names: Sequence[str]) -> tuple[str, str, str]:
    """(status, note, text fed) for one output and one grammar.

    What is fed is what the grammar constrains: the whole output for a non-lazy grammar, the
    text from the trigger on for a lazy one. The grammar must accept a prefix of it after which
    no tool call remains (no tool name, no trigger): text the template writes after the calls
    (end of turn, a tool-response header, content it puts after calls) is where the model stops
    with end-of-sequence, outside the grammar. An output without calls must not fire a lazy
    grammar's trigger at all.
    """
    start = trigger_start(generated, params.grammar_triggers) if params.grammar_lazy else 0
    if not with_calls and params.grammar_lazy:
        return (("pass", "no trigger fires", "") if start is None else
                ("fail", "a trigger fires in an output without tool calls", generated[start:]))
    if start is None:
        return "fail", "no trigger fires before the tool calls", generated
    text = generated[start:]
    end, consumed = accepted_prefix(checker, text)
    return _prefix_verdict(getattr(checker, "engine", "llguidance"), params, text, end, consumed, tool_names)


def _prefix_verdict(engine: str, params: Any, text: str, end: int, consumed: int,
                    tool_names: Sequence[str]) -> tuple[str, str, str]:
    """Pass when the grammar accepted ``text[:end]`` and no tool call is left after it."""
    rest = text[end:] if end >= 0 else text
    if end >= 0 and not any(n in rest for n in tool_names) and (
            not params.grammar_lazy or trigger_start(rest, params.grammar_triggers) is None):
        return "pass", "", text[:end]
    where = f"{engine} refuses the text at character {consumed}: …{text[max(0, consumed - 30):consumed]!r} ▸ " \
            f"{text[consumed:consumed + 30]!r}" if consumed < len(text) else f"{engine} needs more text at the end"
    return "fail", where, text


def llama_cpp_verdict(run: LlamaRun, params: Any, generated: str, with_calls: bool,
                      tool_names: Sequence[str]) -> tuple[str, str, str]:
    """``grammar_verdict`` for llama.cpp, which was fed the whole output: a lazy grammar found
    its trigger itself, with its own patterns (``LlamaCppChecker(..., triggers=...)``). It must
    have started (refused EOS somewhere) in an output with calls, and never in one without."""
    if params.grammar_lazy and not with_calls:
        if run.constrained or run.consumed < run.stop:
            return "fail", "llama.cpp's lazy grammar starts in an output without tool calls", generated
        return "pass", "no trigger fires", ""
    if params.grammar_lazy and not run.constrained:
        return "fail", "llama.cpp's lazy grammar never starts: no trigger pattern matches", generated
    return _prefix_verdict("llama.cpp", params, generated, run.end, run.consumed, tool_names)



# ---------------------------------------------------------------------------------------------
# llama.cpp (optional)


@lru_cache(maxsize=1)
def llama_cpp_available() -> bool:
    """True when ``llama_cpp`` (llama-cpp-python) imports, with its shared library."""
    try:
        importlib.import_module("llama_cpp")
    except Exception:  # ImportError, or OSError when the shared library fails to load
        return False
    return True


class _StderrCapture:
    """Collects what C code writes to file descriptor 2 (llama.cpp prints grammar errors there)."""

    def __enter__(self) -> _StderrCapture:
        self.text = ""
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *exc: object) -> None:
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode("utf-8", "replace")
        self._file.close()


@lru_cache(maxsize=4)
def _load_vocab(path: str) -> tuple[Any, Any]:
    """(model, vocab) of a vocab-only GGUF, loaded once per path and kept for the process."""
    import llama_cpp as ll
    from llama_cpp._logger import set_verbose

    set_verbose(False)  # errors only (a grammar's refusal); not the lazy grammar's per-token debug lines
    ll.llama_backend_init()
    params = ll.llama_model_default_params()
    params.vocab_only = True
    with _StderrCapture() as log:
        model = ll.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise EngineError("llama.cpp", f"cannot load vocabulary {path}: {log.text[-500:]}")
    return model, ll.llama_model_get_vocab(model)


class LlamaCppChecker:
    """A GBNF grammar run by llama.cpp's own sampler over a real (vocab-only) tokenizer.

    ``accepts(text)`` tokenizes ``text`` with the vocabulary (special tokens parsed), then for each
    token asks the grammar sampler about a one-candidate array: a logit of -inf means rejected;
    otherwise the token is accepted and the next one tried. At the end the vocabulary's EOS must
    be allowed. A fresh sampler per call keeps calls independent. Measured (llama-cpp-python 0.3.36,
    2 cores): loading ggml-vocab-qwen2.gguf 0.4 s once per process, building the tool-call grammar
    0.2 ms, checking a 95-byte text (32 tokens) 0.43 ms.

    Tokens of the vocabulary that are end-of-generation (e.g. ``<|im_end|>``) are never matched by
    grammar rules: ``run`` stops at them (see its ``stops``). Only usable when
    ``llama_cpp_available()``.

    With ``triggers`` the grammar is lazy: llama.cpp finds the start itself. It aborts the whole
    process when a trigger pattern is not a valid std::regex, or when the text from the trigger
    on does not fit the grammar; ``LlamaCppWorker`` runs the checker in a child process for that.

    Example (needs llama-cpp-python and a GGUF from ``fetch-corpus``, so not run as a doctest)::

        >>> from chat_autoparser.analyzer.corpus import vocab_dir
        >>> checker = LlamaCppChecker('root ::= "hi" [0-9]\\n', vocab_dir() / "ggml-vocab-qwen2.gguf")  # doctest: +SKIP
        >>> checker.accepts("hi7"), checker.accepts("hi")  # doctest: +SKIP
        (True, False)
    """

    engine = "llama.cpp"

    def __init__(self, gbnf: str, vocab_path: str | os.PathLike[str],
                 triggers: Sequence[dict[str, str]] | None = None) -> None:
        if not llama_cpp_available():
            raise EngineError(self.engine, "llama_cpp (llama-cpp-python) is not installed")
        import llama_cpp as ll

        self._ll = ll
        self.gbnf = gbnf
        self.vocab_path = Path(vocab_path)
        self._model, self._vocab = _load_vocab(str(self.vocab_path))
        # a lazy grammar: llama.cpp's own trigger patterns (std::regex), as its server builds them
        self.patterns = None if triggers is None else [llama_cpp_pattern(t) for t in triggers]
        sampler = self._new_sampler()
        ll.llama_sampler_free(sampler)

    def _new_sampler(self) -> Any:
        ll = self._ll
        with _StderrCapture() as log:
            if self.patterns is None:
                sampler = ll.llama_sampler_init_grammar(self._vocab, self.gbnf.encode("utf-8"), b"root")
            else:
                patterns = (ctypes.c_char_p * max(1, len(self.patterns)))(*(p.encode("utf-8") for p in self.patterns))
                sampler = ll.llama_sampler_init_grammar_lazy_patterns(
                    self._vocab, self.gbnf.encode("utf-8"), b"root", patterns, len(self.patterns),
                    (ll.llama_token * 1)(), 0)
        if not sampler:
            reason = log.text.strip() or "no reason printed"
            raise EngineError(self.engine, f"grammar refused: {reason[:2000]}")
        return sampler

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        """Token ids of ``text``; with ``special``, special tokens written in it are parsed."""
        ll = self._ll
        data = text.encode("utf-8")
        size = len(data) + 16
        buffer = (ll.llama_token * size)()
        n = ll.llama_tokenize(self._vocab, data, len(data), buffer, size, False, special)
        if n < 0:
            buffer = (ll.llama_token * -n)()
            n = ll.llama_tokenize(self._vocab, data, len(data), buffer, -n, False, special)
        return list(buffer[:n])

    def _allowed(self, sampler: Any, token: int) -> bool:
        ll = self._ll
        candidate = ll.llama_token_data(id=token, logit=0.0, p=0.0)
        array = ll.llama_token_data_array(data=ctypes.pointer(candidate), size=1, selected=-1, sorted=False)
        ll.llama_sampler_apply(sampler, ctypes.byref(array))
        return not math.isinf(array.data[0].logit)

    def accepts(self, text: str) -> bool:
        """True iff every token of ``text`` is allowed in turn and EOS is allowed after the last."""
        return self.run(text).end == len(text)

    def accepted_prefix(self, text: str) -> tuple[int, int]:
        """(end of the longest prefix, at a token boundary, after which EOS is allowed, -1 for
        none; characters of the tokens allowed before the first refused one), as
        ``LLGuidanceChecker.accepted_prefix``."""
        r = self.run(text)
        return r.end, r.consumed

    def piece(self, token: int) -> bytes:
        ll = self._ll
        buffer = ctypes.create_string_buffer(64)
        n = ll.llama_token_to_piece(self._vocab, token, buffer, 64, 0, True)
        if n < 0:
            buffer = ctypes.create_string_buffer(-n)
            n = ll.llama_token_to_piece(self._vocab, token, buffer, -n, 0, True)
        return buffer.raw[:n]

    def run(self, text: str, stops: Collection[str] | None = None) -> LlamaRun:
        """Feeds the tokens of ``text`` one by one (see ``LlamaRun``). A text holding an
        end-of-generation token is fed up to it: that token is where the output stops. With
        ``stops`` (the template's own end-of-turn markers), an end-of-generation token of this
        vocabulary that is not one of them is fed as plain text: it is this vocabulary's, not
        the model's.

        Inside a token that spans several characters, the grammar may end (``_inside``): the
        vocabulary merges text across the end of what the grammar covers (``>`` of a closing tag
        with the ``<`` of the end-of-turn text after it) where a model would have stopped after
        the ``>``."""
        ll = self._ll
        tokens = self.tokenize(text)
        queue = list(zip(tokens, map(self.piece, tokens)))
        if b"".join(p for _, p in queue) != text.encode("utf-8"):
            raise EngineError(self.engine, f"the vocabulary does not give back the text it tokenized: {text[:80]!r}")
        # characters wholly before each byte offset
        ends = list(accumulate(len(c.encode("utf-8")) for c in text))
        eos = ll.llama_vocab_eos(self._vocab)
        sampler = self._new_sampler()
        try:
            # a lazy grammar allows EOS anywhere before its trigger: only an EOS allowed after
            # the grammar has refused one (it is at work) ends an accepted prefix
            lazy = self.patterns is not None
            end = 0 if not lazy and self._allowed(sampler, eos) else -1
            consumed, refused_eos, at, stop, i = 0, False, 0, len(text), 0
            while i < len(queue):
                token, piece = queue[i]
                if ll.llama_vocab_is_eog(self._vocab, token):
                    if stops is not None and piece.decode("utf-8", "replace") not in stops:
                        queue[i:i + 1] = [(t, self.piece(t)) for t in self.tokenize(piece.decode("utf-8"), special=False)]
                        continue
                    stop = bisect_right(ends, at)
                    break
                at_work = refused_eos or not lazy
                inner, inner_consumed = self._inside(sampler, text, ends, at, piece) if at_work else (-1, -1)
                # never accept a refused token: llama.cpp aborts the process on that
                if not self._allowed(sampler, token):
                    end, consumed = max(end, inner), max(consumed, inner_consumed)
                    break
                ll.llama_sampler_accept(sampler, token)
                at += len(piece)
                consumed = bisect_right(ends, at)
                i += 1
                if not self._allowed(sampler, eos):
                    refused_eos = True
                    end = max(end, inner)
                elif at_work:
                    end = consumed
            return LlamaRun(end, consumed, refused_eos, stop)
        finally:
            ll.llama_sampler_free(sampler)

    def _inside(self, sampler: Any, text: str, ends: list[int], at: int, piece: bytes) -> tuple[int, int]:
        """For a token of several characters from byte ``at``, tried one character at a time on
        a copy of the sampler: (the last character before the token's last after which the
        grammar allows EOS, -1 for none; the characters allowed so far)."""
        first, last = bisect_right(ends, at), bisect_right(ends, at + len(piece))
        if last - first < 2 or (ends[first - 1] if first else 0) != at:
            return -1, first
        ll, eos, best = self._ll, self._ll.llama_vocab_eos(self._vocab), -1
        probe = ll.llama_sampler_clone(sampler)
        try:
            for k in range(first, last - 1):
                for t in self.tokenize(text[k], special=False):
                    if not self._allowed(probe, t):
                        return best, k
                    ll.llama_sampler_accept(probe, t)
                if self._allowed(probe, eos):
                    best = k + 1
            return best, last - 1
        finally:
            ll.llama_sampler_free(probe)


@dataclass(frozen=True)
class LlamaRun:
    """What llama.cpp's sampler made of a text: ``end`` and ``consumed`` as in
    ``accepted_prefix`` (for a lazy grammar, ``end`` counts only once the grammar is at work);
    ``constrained``: EOS was refused after some token, i.e. the grammar was
    at work (a lazy grammar that never triggers allows EOS everywhere); ``stop``: where feeding
    stopped, at an end-of-generation token or the end of the text."""

    end: int
    consumed: int
    constrained: bool
    stop: int


def llama_cpp_pattern(trigger: dict[str, str]) -> str:
    r"""A trigger as the std::regex pattern llama.cpp's server hands to the lazy grammar
    (``common/sampling.cpp``): a word escaped, a pattern as it is, a full pattern anchored.

    Example::

        >>> print(llama_cpp_pattern({"type": "word", "value": "[TOOL_CALLS]"}))
        \[TOOL_CALLS\]
        >>> print(llama_cpp_pattern({"type": "pattern_full", "value": r"\s*(\{)[\s\S]*"}))
        ^\s*(\{)[\s\S]*$
    """
    value = trigger["value"]
    if trigger["type"] == "word":
        return re.sub(r"[.^$|()*+?\[\]{}\\]", lambda m: "\\" + m.group(), value)
    if trigger["type"] == "pattern_full":
        return ("" if value.startswith("^") else "^") + value + ("" if value.endswith("$") else "$")
    return value


def _llama_cpp_runs(gbnf: str, vocab_path: str, triggers: Sequence[dict[str, str]] | None,
                    texts: Sequence[str], stops: Collection[str] | None) -> list[LlamaRun]:
    os.environ["GGML_NO_BACKTRACE"] = "1"  # an abort is expected here: no gdb backtrace on stderr
    checker = LlamaCppChecker(gbnf, vocab_path, triggers)
    return [checker.run(t, stops) for t in texts]


class LlamaCppWorker:
    """``LlamaCppChecker`` runs in a child process.

    llama.cpp does not always fail softly. On some inputs it aborts its whole process: a trigger
    pattern that std::regex cannot compile, or a lazy grammar whose trigger text the grammar
    refuses (the C++ exception crosses the C API). In the child, such an abort fails one call
    with an ``EngineError``, and the next call starts a new child. The child keeps the vocabulary
    loaded between calls.
    """

    def __init__(self, vocab_path: str | os.PathLike[str], timeout: float = 600.0) -> None:
        self.vocab_path = str(vocab_path)
        self.timeout = timeout
        self._pool: Any = None

    def runs(self, gbnf: str, texts: Sequence[str], triggers: Sequence[dict[str, str]] | None = None,
             stops: Collection[str] | None = None) -> list[LlamaRun]:
        """``LlamaCppChecker(gbnf, vocab, triggers).run(t, stops)`` for each text."""
        import concurrent.futures as cf
        import multiprocessing

        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
        future = self._pool.submit(_llama_cpp_runs, gbnf, self.vocab_path, triggers, list(texts),
                                   None if stops is None else list(stops))
        try:
            return future.result(timeout=self.timeout)
        except cf.process.BrokenProcessPool:
            self.close()
            raise EngineError("llama.cpp", "aborted its process on this grammar or text") from None
        except cf.TimeoutError:
            self.close(kill=True)
            raise EngineError("llama.cpp", f"no answer within {self.timeout:g} s") from None

    def close(self, kill: bool = False) -> None:
        if self._pool is not None:
            if kill:
                for process in list(getattr(self._pool, "_processes", {}).values()):
                    process.kill()
            self._pool.shutdown(wait=not kill, cancel_futures=True)
            self._pool = None
