"""``ChatTemplate``: loading from every source (a Hugging Face id through a local hub cache, never
the network), rendering whole and incrementally, polyfills only where the caps say so, the parser,
the exports and the OpenAI chunks of one request. Rendering parity with transformers over the
corpus is ``test_render_parity`` (its renderer is a ChatTemplate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chat_autoparser.errors import ChatAutoparserError, RenderError, TemplateError
from chat_autoparser.generator import ChatTemplate

REPO = Path(__file__).resolve().parents[1]
CHATML = REPO / "templates" / "chatml-think.jinja"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}]
USER = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hub cache holding ``acme/tiny-chat`` at one commit, offline (as ``HF_HUB_OFFLINE=1``)."""
    import huggingface_hub.constants as c
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--acme--tiny-chat"
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    (snap / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": CHATML.read_text(), "bos_token": "<|bos|>", "eos_token": "<|im_end|>"}))
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    return tmp_path


def test_sources_give_the_same_template(tmp_path: Path, hub_cache: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "chat_template.jinja").write_text(CHATML.read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML.read_text()}))
    sources = [CHATML, str(CHATML), model_dir, tmp_path / "tokenizer_config.json", CHATML.read_text(),
               "acme/tiny-chat"]
    renders = {ChatTemplate.from_pretrained(s).render(USER) for s in sources}
    assert renders == {"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"}
    assert ChatTemplate.from_string(CHATML.read_text()).render(USER) in renders
    hub = ChatTemplate.from_pretrained("acme/tiny-chat")
    assert hub.template.bos_token == "<|bos|>" and hub.caps.supports_tools


def test_unknown_sources_are_template_errors(hub_cache: Path) -> None:
    with pytest.raises(TemplateError, match="not found on the Hugging Face hub or in its cache"):
        ChatTemplate.from_pretrained("acme/missing-model")
    with pytest.raises(TemplateError, match="no such file"):
        ChatTemplate.from_pretrained("no/such/dir/model.jinja")
    with pytest.raises(TemplateError, match="revision applies"):
        ChatTemplate.from_pretrained(CHATML, revision="main")


def test_render_incremental_is_the_difference_and_cached() -> None:
    ct = ChatTemplate.from_pretrained(CHATML)
    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "More"}]
    pieces = [ct.render_incremental(conv[:n]) for n in range(1, 4)]
    assert "".join(pieces) == ct.render(conv, add_generation_prompt=False)
    assert pieces[2] == "<|im_start|>user\nMore<|im_end|>\n"
    assert ct.render_incremental(conv, add_generation_prompt=True).endswith("<|im_start|>assistant\n")


def test_render_incremental_refuses_a_rewritten_history() -> None:
    ct = ChatTemplate.from_string("{% for m in messages %}{{ m.content }}{% if loop.last %}.{% endif %}{% endfor %}")
    ct.render_incremental([{"role": "user", "content": "a"}])
    with pytest.raises(RenderError, match="differently"):
        ct.render_incremental([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])


def test_polyfills_apply_only_where_caps_lack_the_feature() -> None:
    bare = ChatTemplate.from_string("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}")
    assert not bare.caps.supports_tools
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "get_weather", "arguments": {"location": "Paris"}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    p = bare.polyfill(conv, TOOLS)
    assert p.tools is None and "tools described in the system message" in p.applied
    assert '"name": "get_weather"' in bare.render(conv, TOOLS, polyfill=True)
    full = ChatTemplate.from_pretrained(CHATML)
    done = full.polyfill(conv, TOOLS)
    assert done.applied == () and done.tools == TOOLS
    assert full.render(conv, TOOLS, polyfill=True) == full.render(conv, TOOLS)


def test_parser_export_and_chunks_of_one_request() -> None:
    ct = ChatTemplate.from_pretrained(CHATML)
    params = ct.parser(tools=TOOLS)
    text = '<think>\nhm\n</think>\n<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'
    message = params.parser.parse(text)
    stream = ct.chunks(params, completion_id="chatcmpl-x", created=0, model="m")
    chunks = [c for piece in (text[:20], text[20:50], text[50:]) for c in stream.feed(piece)] + stream.finish()
    calls = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    assert calls[0]["id"] == message["tool_calls"][0]["id"] == stream.message["tool_calls"][0]["id"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert ct.export("hf")["start_anchor"] == "<|im_start|>assistant\n"
    assert ct.export("gbnf", tools=TOOLS).startswith("root ::=")
    assert ct.export("structural-tag", tools=TOOLS)["triggers"] == ["<tool_call>"]
    with pytest.raises(ChatAutoparserError, match="unknown format"):
        ct.export("yaml")


def test_readme_serving_loop_runs(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import re
    code = re.search(r"## Serve.*?```python\n(.*?)```", (REPO / "README.md").read_text(), re.S).group(1)
    monkeypatch.chdir(REPO)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "{'role': 'assistant', 'content': ''}" and printed[-1] == "tool_calls"
    assert scope["chunks"].message["tool_calls"][0]["id"] in "\n".join(printed)


def test_lark_without_llguidance_says_so(monkeypatch):
    """The Lark form is llguidance's dialect, written by its converter: without llguidance a
    typed error says so (it was a silent None)."""
    import sys
    from chat_autoparser.generator.export import ExportError
    ct = ChatTemplate.from_pretrained("templates/chatml-think.jinja")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    params = ct.parser(tools=tools)
    assert params.lark_grammar and "%llguidance" in params.lark_grammar
    monkeypatch.setitem(sys.modules, "llguidance.gbnf_to_lark", None)
    with pytest.raises(ExportError, match="pip install llguidance"):
        params.lark_grammar
    with pytest.raises(ExportError, match="pip install llguidance"):
        ct.export("lark", tools=tools)
    assert ct.parser().lark_grammar is None  # no tools, no grammar
