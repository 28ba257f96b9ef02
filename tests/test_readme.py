"""The README's Python examples run as written (docs are tests)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_opens_with_the_two_setup_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ['pip install -e . && fractal-nb demo', 'pip install -e ".[test]" && pytest']


@pytest.mark.parametrize("block", python_blocks())
def test_readme_python_runs(block: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-placeholder")  # clients are built, never called
    namespace: dict[str, object] = {}
    exec(compile(block, str(README), "exec"), namespace)
    store = namespace.get("store")
    if store is not None:
        store.close()  # type: ignore[attr-defined]
