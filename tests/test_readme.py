"""The README's Python examples run as written (docs are tests)."""

import re
import shlex
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_opens_with_the_two_setup_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["pip install -e . && fractal-nb demo", 'pip install -e ".[test]" && pytest']


@pytest.mark.parametrize("block", python_blocks())
def test_readme_python_runs(block: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-placeholder")  # clients are built, never called
    namespace: dict[str, object] = {}
    exec(compile(block, str(README), "exec"), namespace)
    store = namespace.get("store")
    if store is not None:
        store.close()  # type: ignore[attr-defined]


def test_readme_mcp_configurations_are_valid_json_for_our_cli() -> None:
    import json

    from fractal_nb.cli.main import build_parser

    configs = [
        json.loads(block) for block in re.findall(r"```json\n(.*?)```", README.read_text(), flags=re.DOTALL)
    ]
    servers = [c["mcpServers"]["fractal"] for c in configs]
    stdio = next(s for s in servers if "command" in s)
    assert stdio["command"] == "fractal-nb"
    assert build_parser().parse_args(stdio["args"]).command == "serve-mcp"
    http = next(s for s in servers if "url" in s)
    assert http["url"].startswith("http://127.0.0.1:") and http["url"].endswith("/mcp")


def test_readme_shell_commands_parse() -> None:
    from fractal_nb.cli.main import build_parser

    lines = [
        line.split("#")[0].strip()
        for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.DOTALL)
        for line in block.splitlines()
    ]
    commands = [shlex.split(line)[1:] for line in lines if line.startswith("fractal-nb ")]
    assert any(c[0] == "worker" for c in commands) and any(c[0] == "serve-mcp" for c in commands)
    for command in commands:
        build_parser().parse_args(command)
