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
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from .triggers import trigger_start

__all__ = ["EngineError", "LLGuidanceChecker", "LlamaCppChecker", "llama_cpp_available", "grammar_verdict"]


class EngineError(ValueError):
    """An engine refused a grammar (or could not be set up); the message names the engine."""

    def __init__(self, engine: str, message: str) -> None:
        self.engine = engine
        super().__init__(f"{engine}: {message.strip()}")


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


class LLGuidanceChecker:
    """A GBNF grammar compiled by llguidance; ``accepts(text)`` matches whole texts.

    The grammar goes through llguidance's own GBNF→Lark converter (``gbnf_to_lark``; we call it
    directly rather than ``grammar_from("gbnf", ...)``, which passes text through unconverted when
    a line looks like Lark, e.g. a rule named ``start``). A grammar llguidance refuses raises
    ``EngineError`` with its message. Each ``accepts`` works on a ``deep_copy`` of one matcher
    built up front.

    Measured on a 2-core machine (llguidance 1.9.1, idle): the tool-call grammar of the tests compiles
    in about 4 ms (llama.cpp's json.gbnf in about 6 ms) and a 95-byte text matches in about 0.12 ms.

    Example::

        >>> LLGuidanceChecker('root ::= "\\\\u00e9"\\n')
        Traceback (most recent call last):
        ...
        generator.engines.EngineError: llguidance: grammar refused: ...
    """

    engine = "llguidance"

    def __init__(self, gbnf: str) -> None:
        try:
            import llguidance
            from llguidance.gbnf_to_lark import gbnf_to_lark
        except ImportError as e:  # pragma: no cover - llguidance is a test extra
            raise EngineError(self.engine, f"not installed ({e}); pip install llguidance") from e
        try:
            self.lark = gbnf_to_lark(gbnf)
        except Exception as e:  # the converter raises bare Exceptions
            raise EngineError(self.engine, f"GBNF to Lark conversion failed: {e}") from e
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

            >>> LLGuidanceChecker('root ::= "ab"\\n').accepted_prefix("abc")
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
    rest = text[end:] if end >= 0 else text
    if end >= 0 and not any(n in rest for n in tool_names) and (
            not params.grammar_lazy or trigger_start(rest, params.grammar_triggers) is None):
        return "pass", "", text[:end]
    where = f"llguidance refuses the byte at character {consumed}: …{text[max(0, consumed - 30):consumed]!r} ▸ " \
            f"{text[consumed:consumed + 30]!r}" if consumed < len(text) else "llguidance needs more text at the end"
    return "fail", where, text



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
    grammar rules; keep them out of the texts. Only usable when ``llama_cpp_available()``.

    Example (needs llama-cpp-python and a GGUF from ``fetch-corpus``, so not run as a doctest)::

        >>> from analyzer.corpus import vocab_dir
        >>> checker = LlamaCppChecker('root ::= "hi" [0-9]\\n', vocab_dir() / "ggml-vocab-qwen2.gguf")  # doctest: +SKIP
        >>> checker.accepts("hi7"), checker.accepts("hi")  # doctest: +SKIP
        (True, False)
    """

    engine = "llama.cpp"

    def __init__(self, gbnf: str, vocab_path: str | os.PathLike[str]) -> None:
        if not llama_cpp_available():
            raise EngineError(self.engine, "llama_cpp (llama-cpp-python) is not installed")
        import llama_cpp as ll

        self._ll = ll
        self.gbnf = gbnf
        self.vocab_path = Path(vocab_path)
        self._model, self._vocab = _load_vocab(str(self.vocab_path))
        sampler = self._new_sampler()
        ll.llama_sampler_free(sampler)

    def _new_sampler(self) -> Any:
        with _StderrCapture() as log:
            sampler = self._ll.llama_sampler_init_grammar(self._vocab, self.gbnf.encode("utf-8"), b"root")
        if not sampler:
            reason = log.text.strip() or "no reason printed"
            raise EngineError(self.engine, f"grammar refused: {reason[:2000]}")
        return sampler

    def tokenize(self, text: str) -> list[int]:
        ll = self._ll
        data = text.encode("utf-8")
        size = len(data) + 16
        buffer = (ll.llama_token * size)()
        n = ll.llama_tokenize(self._vocab, data, len(data), buffer, size, False, True)
        if n < 0:
            buffer = (ll.llama_token * -n)()
            n = ll.llama_tokenize(self._vocab, data, len(data), buffer, -n, False, True)
        return list(buffer[:n])

    def _allowed(self, sampler: Any, token: int) -> bool:
        ll = self._ll
        candidate = ll.llama_token_data(id=token, logit=0.0, p=0.0)
        array = ll.llama_token_data_array(data=ctypes.pointer(candidate), size=1, selected=-1, sorted=False)
        ll.llama_sampler_apply(sampler, ctypes.byref(array))
        return not math.isinf(array.data[0].logit)

    def accepts(self, text: str) -> bool:
        """True iff every token of ``text`` is allowed in turn and EOS is allowed after the last."""
        ll = self._ll
        sampler = self._new_sampler()
        try:
            for token in self.tokenize(text):
                # never accept a rejected token: llama.cpp aborts the process on that
                if not self._allowed(sampler, token):
                    return False
                ll.llama_sampler_accept(sampler, token)
            return self._allowed(sampler, ll.llama_vocab_eos(self._vocab))
        finally:
            ll.llama_sampler_free(sampler)
