"""``debug-template-parser``: reports, JSON, requests and parsing; exit codes and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chat_autoparser.tools.debug_template_parser import EXIT_ANALYSIS, EXIT_INPUT, EXIT_OK, main

REPO = Path(__file__).resolve().parents[1]
OWN = str(REPO / "templates" / "chatml-think.jinja")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
OUTPUT = ('<think>\nhmm\n</think>\nSure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
          '\n</tool_call>')


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_report_and_json(capsys):
    code, out, _ = run(capsys, OWN)
    assert code == EXIT_OK and "Reasoning and content" in out and "<think>" in out
    code, out, _ = run(capsys, OWN, "--json")
    assert code == EXIT_OK
    data = json.loads(out)
    assert data["content_structure"]["reasoning_start"].strip() == "<think>"


def test_tools_and_parse(tmp_path, capsys):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": TOOLS}))
    out_file = tmp_path / "out.txt"
    out_file.write_text(OUTPUT)
    code, out, _ = run(capsys, OWN, "--tools", str(tools), "--parse", str(out_file), "--chunk", "3", "--json")
    assert code == EXIT_OK
    data = json.loads(out)
    assert data["chat_params"]["grammar_triggers"] == [{"type": "word", "value": "<tool_call>"}]
    assert "root ::=" in data["chat_params"]["grammar"]
    assert data["message"]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert "".join(d.get("content", "") for d in data["deltas"]) == "Sure."
    code, out, _ = run(capsys, OWN, "--tools", str(tools), "--parse", str(out_file))
    assert code == EXIT_OK and "GBNF grammar" in out and "Parsed message" in out


def test_strict_parse_error_exits_1(tmp_path, capsys):
    out_file = tmp_path / "out.txt"
    out_file.write_text('<tool_call>\n{"name": "get_weather", "arguments": {"city": ')
    code, out, err = run(capsys, OWN, "--parse", str(out_file), "--json")
    assert code == EXIT_OK and "parse_error" in json.loads(out)["message"]
    code, _, err = run(capsys, OWN, "--parse", str(out_file), "--strict")
    assert code == EXIT_ANALYSIS and err.startswith("parse error:") and "position" in err


def test_forms_the_template_does_not_write_are_listed_and_strict_refuses_them(tmp_path, capsys):
    out_file = tmp_path / "out.txt"
    out_file.write_text('<tool_call>\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n</tool_call>')
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    code, out, _ = run(capsys, OWN, "--tools", str(tools), "--parse", str(out_file), "--json")
    data = json.loads(out)
    assert code == EXIT_OK and data["message"]["tool_calls"]
    assert [d["message"] for d in data["deviations"]] == ["the call's 'parameters' key where the template writes "
                                                          "'arguments'"]
    code, out, _ = run(capsys, OWN, "--tools", str(tools), "--parse", str(out_file))
    assert code == EXIT_OK and "Read leniently" in out
    code, _, err = run(capsys, OWN, "--tools", str(tools), "--parse", str(out_file), "--strict")
    assert code == EXIT_ANALYSIS and "'parameters' key" in err


@pytest.mark.parametrize("make, expect", [
    (lambda d: ["/nonexistent/x.jinja"], "x.jinja"),
    (lambda d: [str(d / "bad.json")], "bad.json"),
    (lambda d: [str(d / "syntax.jinja")], "syntax.jinja"),
    (lambda d: [OWN, "--tools", str(d / "bad.json")], "bad.json"),
    (lambda d: [OWN, "--tools", str(d / "notools.json")], "notools.json"),
    (lambda d: [OWN, "--parse", str(d / "missing.txt")], "missing.txt"),
    (lambda d: [OWN, "--chunk", "4"], "--chunk"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, make, expect):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "syntax.jinja").write_text("{% for x in %}")
    (tmp_path / "notools.json").write_text('{"tools": [{"nope": 1}]}')
    code, out, err = run(capsys, *make(tmp_path))
    assert code == EXIT_INPUT
    assert out == "" and len(err.strip().splitlines()) == 1 and expect in err


def test_template_raising_for_every_probe_is_an_analysis_error(tmp_path, capsys):
    t = tmp_path / "raises.jinja"
    t.write_text("{{ raise_exception('this template refuses everything') }}")
    code, out, err = run(capsys, str(t))
    assert code == EXIT_ANALYSIS and out == ""
    assert len(err.strip().splitlines()) == 1 and "raises.jinja" in err


def test_console_script_is_installed():
    """The entry point runs as a program (what the README's first command does)."""
    r = subprocess.run([sys.executable, "-m", "chat_autoparser.tools.debug_template_parser", OWN, "--json"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["template"]


def test_version(capsys):
    from chat_autoparser import __version__
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and __version__ in capsys.readouterr().out


def test_packaging_installs_one_top_level_name_and_ships_the_manifest():
    import tomllib

    from chat_autoparser.tools import shipped

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    setup = project["tool"]["setuptools"]
    assert {p.split(".")[0] for p in setup["packages"]} == {"chat_autoparser"}
    # every package folder of the checkout is installed (a new subpackage left out of the list
    # would be missing from the wheel, yet import fine from the checkout)
    folders = {"chat_autoparser": "chat_autoparser", **{k: v for k, v in setup["package-dir"].items()}}
    found = {"chat_autoparser.templates"}
    for name, folder in folders.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            found.add(".".join([name, *rel]))
    assert found == set(setup["packages"])
    assert all(v.startswith("chat_autoparser.tools.") for v in project["project"]["scripts"].values())
    assert setup["package-dir"]["chat_autoparser.templates"] == "templates"
    assert shipped("corpus-manifest.tsv").is_file() and shipped("chatml-think.jinja").is_file()


@pytest.mark.parametrize("fmt", ["hf", "edgellm", "structural-tag", "gbnf", "lark"])
def test_export_writes_the_raw_artefact(tmp_path, capsys, fmt):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    code, out, err = run(capsys, OWN, "--export", fmt, "--tools", str(tools))
    assert code == EXIT_OK and not err
    from chat_autoparser.generator import ChatTemplate
    expected = ChatTemplate.from_pretrained(OWN).export(fmt, tools=TOOLS)
    assert (json.loads(out) if isinstance(expected, dict) else out) == expected
    target = tmp_path / "artefact"
    assert run(capsys, OWN, "--export", fmt, "--tools", str(tools), "-o", str(target))[1] == ""
    assert target.read_text() == out


def test_template_from_stdin_and_errors_as_json(capsys, monkeypatch):
    import io
    monkeypatch.setattr(sys, "stdin", io.StringIO(Path(OWN).read_text()))
    code, out, _ = run(capsys, "-", "--export", "hf")
    assert code == EXIT_OK and json.loads(out)["start_anchor"] == "<|im_start|>assistant\n"
    code, out, _ = run(capsys, OWN, "--export", "gbnf", "--json")  # no tools: nothing to constrain
    assert code == EXIT_ANALYSIS and json.loads(out)["error"]["type"] == "NotExpressible"
    code, out, _ = run(capsys, str(REPO / "no-such.jinja"), "--json")
    assert code == EXIT_INPUT and json.loads(out)["error"] == {
        "type": "TemplateError", "message": f"{REPO / 'no-such.jinja'}: no such file or directory", "exit": EXIT_INPUT}


def test_chat_template_kwargs_set_where_the_output_starts(tmp_path, capsys):
    out_file = tmp_path / "out.txt"
    out_file.write_text("Plain answer.")
    source = (REPO / "templates" / "chatml-think.jinja").read_text()
    forced = tmp_path / "forced.jinja"  # opens reasoning in the prompt only when asked to
    prompt = "{%- if add_generation_prompt %}\n<|im_start|>assistant\n{{ '' }}"
    forced.write_text(source.replace(prompt, prompt + "{% if open_think %}<think>\n{% endif %}"))
    assert "open_think" in forced.read_text()
    msgs = {}
    for kwargs in ("{}", '{"open_think": true}'):
        code, out, _ = run(capsys, str(forced), "--chat-template-kwargs", kwargs, "--parse", str(out_file), "--json")
        assert code == EXIT_OK
        msgs[kwargs] = json.loads(out)["message"]
    assert msgs["{}"]["content"] == "Plain answer." and msgs['{"open_think": true}']["reasoning_content"] == "Plain answer."
