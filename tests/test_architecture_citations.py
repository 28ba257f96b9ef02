"""The design is split by layer, and every citation of it leads to a section that exists.

docs/architecture.md opens with the tree and the layers, then names the file of each
layer (docs/architecture/*.md) and its sections. Code, tests, benches and docs cite
the design as ``docs/architecture/<layer>.md, "<Section>"`` (or ``rule N`` of the
store's rules); a citation whose file or section is gone fails here, so a section
renamed or moved takes its citations with it.

Covers: (the design documents; no source module).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INDEX = ROOT / "docs" / "architecture.md"
LAYER_DOCS = sorted((ROOT / "docs" / "architecture").glob("*.md"))
CITING = [
    path
    for folder in ("fractal_nb", "tests", "bench", "docs")
    for path in sorted((ROOT / folder).rglob("*"))
    if path.suffix in {".py", ".sql", ".md", ".txt"} and path.is_file()
] + [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / ".ci" / "run"]
# A citation: the file, then (after a comma, across a wrapped comment) a quoted section or a rule.
CITATION = re.compile(r"(?:docs/)?architecture(?:/(?P<layer>[a-z-]+))?\.md")
WRAP = re.compile(r"\s*\n\s*(?:#|--|\*)?\s*")


def headings(path: Path) -> set[str]:
    """The section titles of one design file, ``##`` and ``###``."""
    return {m.group(1).strip() for m in re.finditer(r"^#{2,3} (.+)$", path.read_text(encoding="utf-8"), re.M)}


def cited_sections(after: str) -> list[str]:
    """The quoted sections a citation names right after its file (``, "A", "B"``), if it names any."""
    m = re.match(r'`?\)?,? \(?("[^"]+"(?:,? (?:and )?"[^"]+")*)', WRAP.sub(" ", after))
    return [" ".join(s.split()) for s in re.findall(r'"([^"]+)"', m.group(1))] if m else []


def test_the_index_opens_with_the_tree_and_names_every_layer_file() -> None:
    text = INDEX.read_text(encoding="utf-8")
    first_section = text.split("\n## ", 1)[1]
    assert first_section.startswith("Layers\n\n```\nfractal_nb/\n"), "the design opens with the tree"
    assert LAYER_DOCS, "the layers' design files are in docs/architecture/"
    where = text.split("## Where each part is described", 1)[1].split("\n## ", 1)[0]
    for doc in LAYER_DOCS:
        line = next((li for li in where.splitlines() if f"(architecture/{doc.name})" in li), None)
        assert line is not None, f"the index does not name {doc.name}"
        listed = {" ".join(s.split()) for s in re.findall(r'"([^"]+)"', line)}
        assert listed == headings(doc), f"the index's sections of {doc.name} differ from its headings"


def test_every_relative_link_of_the_design_leads_to_a_file() -> None:
    for doc in [INDEX, *LAYER_DOCS]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
            assert (doc.parent / target).exists(), f"{doc.name}: a link to {target} leads nowhere"


def test_every_citation_names_a_section_of_the_file_it_cites() -> None:
    sections = {doc.stem: headings(doc) for doc in LAYER_DOCS}
    rules = set(re.findall(r"^ *(\d+)\. \*\*", (ROOT / "docs/architecture/store.md").read_text(), re.M))
    index_sections = headings(INDEX)
    wrong: list[str] = []
    for path in CITING:
        text = path.read_text(encoding="utf-8")
        for m in CITATION.finditer(text):
            where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            layer, after = m.group("layer"), text[m.end() : m.end() + 200]
            if layer is not None and layer not in sections:
                wrong.append(f"{where}: no docs/architecture/{layer}.md")
                continue
            rule = re.match(r",? rules? (\d+)", WRAP.sub(" ", after))
            for section in cited_sections(after):
                if section not in (sections[layer] if layer else index_sections):
                    wrong.append(f'{where}: "{section}" is no section of {m.group(0)}')
            if rule is not None and (layer != "store" or rule.group(1) not in rules):
                wrong.append(f"{where}: rule {rule.group(1)} is not in docs/architecture/store.md")
    assert not wrong, "citations that lead nowhere:\n" + "\n".join(wrong)


def test_the_layer_files_cite_one_another_by_sections_that_exist() -> None:
    sections = {doc.stem: headings(doc) for doc in LAYER_DOCS}
    sibling = re.compile(r"(?<![/\w])(?P<layer>" + "|".join(sections) + r")\.md")
    wrong = []
    for doc in LAYER_DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in sibling.finditer(text):
            for section in cited_sections(text[m.end() : m.end() + 200]):
                if section not in sections[m.group("layer")]:
                    wrong.append(f'{doc.name}: "{section}" is no section of {m.group(0)}')
    assert not wrong, "\n".join(wrong)
