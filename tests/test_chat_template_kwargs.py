"""A request's ``chat_template_kwargs`` (the engines' form) select the parser's start state.

Each case shows the default parser reading the output wrongly (what a server got before the
kwargs could be passed) and the parser built from the request's kwargs reading it right, through
``ChatTemplate.parser`` (which renders kwargs the analysis did not probe) and ``generate_parser``
(probed settings only).
"""

from __future__ import annotations

import pytest

from chat_autoparser import ChatTemplate
from chat_autoparser.analyzer import analyze_template
from chat_autoparser.generator import generate_parser
from chat_autoparser.generator.state import kwargs_state

# a custom switch the analysis cannot name as a thinking control: only a render tells
CUSTOM = """{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% if deep_mode %}<think>
{% else %}<think>

</think>

{% endif %}{% endif %}"""

CORPUS_CASES = [
    # (template, kwargs, output, reasoning, content)
    ("extra/NousResearch-Hermes-4-14B.jinja", {"thinking": True}, "<think>plan</think>Answer", "plan", "Answer"),
    ("extra/tencent-DeepSeek-V3.1-Terminus-W4AFP8.jinja", {"thinking": True}, "plan</think>Answer", "plan", "Answer"),
    ("llama.cpp/ibm-granite-granite-3.3-2B-Instruct.jinja", {"thinking": True}, "<think>plan</think>Answer",
     "plan", "Answer"),
    ("llama.cpp/tencent-Hy3.jinja", {"reasoning_effort": "high"}, "plan</think:opensource>Answer", "plan", "Answer"),
]


@pytest.mark.parametrize("name,kwargs,output,reasoning,content", CORPUS_CASES, ids=[c[0] for c in CORPUS_CASES])
def test_corpus_kwarg_selects_setting(corpus_root, name, kwargs, output, reasoning, content):
    ct = ChatTemplate.from_pretrained(corpus_root / name)
    before = ct.parser().parser.parse(output)
    assert before.get("reasoning_content") != reasoning  # the default setting misreads it
    for params in (ct.parser(chat_template_kwargs=kwargs), generate_parser(ct.analysis, chat_template_kwargs=kwargs)):
        message = params.parser.parse(output)
        assert (message["reasoning_content"], message["content"]) == (reasoning, content)
        assert params.chat_template_kwargs == kwargs
        assert params.start["template_kwargs"] == kwargs
        # streamed in 3-character pieces: the same message
        stream = params.parser.stream()
        for i in range(0, len(output), 3):
            stream.feed(output[i:i + 3])
        assert stream.finish()[0] == message


def test_custom_kwarg_rendered_on_demand():
    ct = ChatTemplate.from_string(CUSTOM, name="custom.jinja")
    assert "deep_mode" not in ct.analysis.caps.thinking_controls
    output = "plan</think>Answer"
    assert ct.parser().parser.parse(output)["reasoning_content"] is None
    params = ct.parser(chat_template_kwargs={"deep_mode": True})
    assert params.parser.parse(output) == {"role": "assistant", "content": "Answer", "reasoning_content": "plan"}
    assert params.start["source"] == "render:chat_template_kwargs"
    assert params.start["unprobed_kwargs"] == ["deep_mode"]
    assert params.generation_prompt == "<|im_start|>assistant\n<think>\n"
    off = ct.parser(chat_template_kwargs={"deep_mode": False})
    assert off.start["reasoning_mode"] == "REASONING_DISABLED"
    # without a renderer the kwarg cannot be taken into account: said, not raised
    bare = generate_parser(ct.analysis, chat_template_kwargs={"deep_mode": True})
    assert bare.start["unprobed_kwargs"] == ["deep_mode"] and bare.start["source"] == "setting:default"


def test_prompt_has_the_last_word():
    ct = ChatTemplate.from_string(CUSTOM, name="custom.jinja")
    params = ct.parser(chat_template_kwargs={"deep_mode": True}, prompt="<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert params.start["reasoning_mode"] == "REASONING_DISABLED"
    assert params.start["source"] == "prompt" and params.start["template_kwargs"] == {"deep_mode": True}


def test_kwargs_never_raise():
    ct = ChatTemplate.from_pretrained("templates/chatml-think.jinja")
    params = ct.parser(chat_template_kwargs={"messages": [], "tools": 1, "enable_thinking": False})
    assert params.start["ignored_kwargs"] == ["messages", "tools"]
    assert params.start["reasoning_mode"] == "REASONING_DISABLED"
    deep: dict = {}
    for _ in range(3000):
        deep = {"x": deep}
    assert ct.parser(chat_template_kwargs={"nested": deep}).start["unprobed_kwargs"] == ["nested"]


def test_template_refusing_kwargs_is_reported(corpus_root):
    ct = ChatTemplate.from_pretrained(corpus_root / "llama.cpp/tencent-Hy3.jinja")
    params = ct.parser(chat_template_kwargs={"reasoning_effort": "medium"})
    assert "should be no_think/low/high" in params.start["render_error"]
    assert params.start["unprobed_kwargs"] == ["reasoning_effort"]


def test_kwargs_state_probed_settings():
    a = analyze_template("templates/chatml-think.jinja")
    assert kwargs_state(a, {}).source == "setting:default"
    assert kwargs_state(a, {"enable_thinking": True}).source == "setting:enable_thinking=true"
    # enable_thinking as a keyword joins the kwargs unless they set it
    p = generate_parser(a, enable_thinking=False, chat_template_kwargs={})
    assert p.start["source"] == "setting:enable_thinking=false"


def test_render_takes_kwargs_dict():
    ct = ChatTemplate.from_string(CUSTOM, name="custom.jinja")
    messages = [{"role": "user", "content": "Hi"}]
    assert ct.render(messages, chat_template_kwargs={"deep_mode": True}).endswith("<think>\n")
    assert ct.render(messages, chat_template_kwargs={"deep_mode": True}, deep_mode=False).endswith("</think>\n\n")


def test_kwargs_decide_where_the_prompt_cannot(corpus_root):
    """Hermes-4 writes the same generation prompt with and without ``thinking``: given the
    rendered prompt too, the request's kwargs still pick the setting (prompt= no longer hides
    them), and without kwargs the prompt reads as the default setting."""
    ct = ChatTemplate.from_pretrained(corpus_root / "extra/NousResearch-Hermes-4-14B.jinja")
    prompt = ct.render([{"role": "user", "content": "hi"}], chat_template_kwargs={"thinking": True})
    on = ct.parser(prompt=prompt, chat_template_kwargs={"thinking": True})
    assert on.parser.parse("<think>plan</think>Answer")["reasoning_content"] == "plan"
    assert ct.parser(prompt=prompt).start["reasoning_mode"] == "REASONING_NONE"
