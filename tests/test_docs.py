"""The README's and the topic documents' examples run as written (docs are tests).

The documents are README.md and every docs/*.md but docs/architecture.md (the design,
whose snippets are excerpts, not examples). Each ```python block runs alone, in a fresh
namespace and an empty working directory; every ``fractal-nb ...`` line of a ```bash
block parses with the CLI's parser; every ```json block is JSON, and the MCP
configurations among them start our server.
"""

import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "architecture.md")]
MCP_DOC = ROOT / "docs" / "mcp.md"


def blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(), flags=re.DOTALL)


def python_blocks() -> list[pytest.param]:
    return [
        pytest.param(path, block, id=f"{path.relative_to(ROOT)}#{number}")
        for path in DOCS
        for number, block in enumerate(blocks(path, "python"), start=1)
    ]


def shell_commands() -> list[list[str]]:
    lines = [
        line.split("#")[0].strip()
        for path in DOCS
        for block in blocks(path, "bash")
        for line in block.splitlines()
    ]
    return [shlex.split(line)[1:] for line in lines if line.startswith("fractal-nb ")]


def test_the_documents_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in DOCS}
    assert {"README.md", "docs/notebook.md", "docs/mcp.md", "docs/store.md"} <= names
    assert "docs/architecture.md" not in names


def test_readme_opens_with_the_two_setup_commands() -> None:
    first_block = blocks(README, "bash")[0]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()]
    assert commands == ["pip install -e . && fractal-nb demo", 'pip install -e ".[test]" && pytest']


def test_readme_stays_a_quick_start_and_a_map() -> None:
    readme = README.read_text()
    assert len(readme.splitlines()) <= 300
    for path in DOCS[1:]:
        assert f"](docs/{path.name})" in readme, f"the README's map lacks docs/{path.name}"
        assert "](../README.md)" in path.read_text(), f"docs/{path.name} has no link back to the README"
    assert "](docs/architecture.md)" in readme


def test_relative_links_lead_to_files_and_headings_that_exist() -> None:
    def anchors(path: Path) -> set[str]:
        headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL), re.M)
        return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}

    for path in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            assert linked.exists(), f"{path.name}: {target} leads nowhere"
            if anchor:
                assert anchor in anchors(linked), f"{path.name}: {target} names no heading of {linked.name}"


@pytest.mark.parametrize(("path", "block"), python_blocks())
def test_python_runs(path: Path, block: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-placeholder")  # clients are built, never called
    namespace: dict[str, object] = {}
    exec(compile(block, str(path), "exec"), namespace)
    store = namespace.get("store")
    if store is not None:
        store.close()  # type: ignore[attr-defined]


def test_mcp_configurations_are_valid_json_for_our_cli() -> None:
    from fractal_nb.cli.parser import build_parser

    configs = [json.loads(block) for path in DOCS for block in blocks(path, "json")]
    servers = [c["mcpServers"]["fractal"] for c in configs if "mcpServers" in c]
    stdio = next(s for s in servers if "command" in s)
    assert stdio["command"] == "fractal-nb"
    assert build_parser().parse_args(stdio["args"]).command == "serve-mcp"
    http = next(s for s in servers if "url" in s)
    assert http["url"].startswith("http://127.0.0.1:") and http["url"].endswith("/mcp")


def test_shell_commands_parse() -> None:
    from fractal_nb.cli.parser import build_parser

    commands = shell_commands()
    assert any(c[0] == "worker" for c in commands) and any(c[0] == "serve-mcp" for c in commands)
    for command in commands:
        build_parser().parse_args(command)


def test_every_mcp_tool_is_documented() -> None:
    from fractal_nb.mcp.reads import READS
    from fractal_nb.mcp.tools import TOOLS

    rows = [line for line in MCP_DOC.read_text().splitlines() if line.startswith("| `fractal_")]
    documented = {name for row in rows for name in re.findall(r"`(fractal_\w+)", row.split(" | ")[0])}
    tools = {tool.name for tool in TOOLS} | {read.name for read in READS}
    assert sorted(tools - documented) == [], "tools without a row in docs/mcp.md"
    assert sorted(documented - tools) == [], "rows in docs/mcp.md for tools that do not exist"
