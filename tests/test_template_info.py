"""Static facts read from a template's AST (``analyzer.template_info``): the switches guarded by
others and the content blocks a template writes."""

from __future__ import annotations

import pytest

from chat_autoparser.analyzer.caps import thinking_controls
from chat_autoparser.analyzer.template_info import MAX_BLOCK_KINDS, content_block_kinds, template_info


@pytest.mark.parametrize("source, controls", [
    # a switch tested only under a thinking switch is one too
    ("{% if thinking %}{% if not keep %}x{% endif %}{% endif %}{{ other }}", ("keep", "thinking")),
    # giving it a default (`is defined`) is not testing it elsewhere
    ("{% if keep is not defined %}{% set keep = false %}{% endif %}"
     "{% if enable_thinking %}{% if keep %}x{% endif %}{% endif %}", ("enable_thinking", "keep")),
    # tested elsewhere too: not a thinking switch
    ("{% if thinking %}{% if keep %}x{% endif %}{% endif %}{% if keep %}y{% endif %}", ("thinking",)),
    # what every caller passes is never a switch
    ("{% if enable_thinking %}{% if add_generation_prompt %}x{% endif %}{% endif %}", ("enable_thinking",)),
    # a name the template computes is not a switch
    ("{% set content = messages[0].content %}{% if thinking %}{% if content %}x{% endif %}{% endif %}",
     ("thinking",)),
    # an else branch is not guarded by the test
    ("{% if thinking %}x{% else %}{% if keep %}y{% endif %}{% endif %}", ("thinking",)),
])
def test_thinking_controls(source, controls):
    assert thinking_controls(template_info(source)) == controls


def test_block_kinds_through_macros_and_mappings():
    src = ("{% macro body(content) %}{% for b in content %}{% if b['type'] == 'note' %}{{ b['note'] }}"
           "{% elif b.type == 'text' %}{{ b.get('x') }}{{ b.text }}{% endif %}{% endfor %}{% endmacro %}"
           "{% for m in messages %}{% set blocks = m.content.parts %}{% for p in blocks %}"
           "{% if p.type == 'answer' %}{{ p.body }}{% endif %}{% endfor %}{{ body(m.content) }}{% endfor %}")
    kinds = [(k.container, k.type, k.field) for k in content_block_kinds(src)]
    assert sorted(kinds) == [("", "note", "note"), ("", "text", "text"), ("parts", "answer", "body")]


def test_block_kinds_are_bounded():
    branches = "".join(f"{{% elif b.type == 't{i}' %}}{{{{ b.f{i} }}}}" for i in range(500))
    src = f"{{% for b in message.content %}}{{% if b.type == 'x' %}}{{{{ b.x }}}}{branches}{{% endif %}}{{% endfor %}}"
    assert len(content_block_kinds(src)) == MAX_BLOCK_KINDS
