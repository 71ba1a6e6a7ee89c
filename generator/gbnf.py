"""GBNF grammar emission (filled in below)."""


def attach_grammar(params, analysis, tools, tool_choice, parallel_tool_calls) -> None:
    return None
