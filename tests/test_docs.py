"""The docs' cross-references: a section named in quotes ("Envs out of step") must exist.

README.md and docs/*.md point into docs/results*.md by a section's title in quotes, after "(", ".md, ", a
comma or "and" that follows another such name, or ";". A title renamed or a name mistyped leaves a pointer to
nothing; this finds it. A name may be the start of a heading or of a paragraph's bold lead, and may be cut
short with "...". A name followed by "in that section" is a paragraph's first words and is not checked.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# a quoted name, capitalised, of two words or more, right after what introduces a reference
REFERENCE = re.compile(r'(?:(?<=\()|(?<=\.md, )|(?<=", )|(?<=" and )|(?<=" or )|(?<=; ))'
                       r'"([A-Z][^"]{8,200}?)"(?! in that)')


def _titles():
    titles = []
    for path in DOCS:
        text = path.read_text()
        titles += [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
        titles += re.findall(r"\*\*([^*]+)\*\*", text)
    return [" ".join(t.split()) for t in titles]


def _references(text):
    for match in REFERENCE.finditer(text):
        name = " ".join(match.group(1).split())
        if len(name.split()) >= 2 and not re.search(r"[=`/$]", name):
            yield name, text.count("\n", 0, match.start()) + 1


def _missing(text, titles):
    out = []
    for name, line in _references(text):
        parts = [p.strip(" .") for p in name.split("...") if p.strip(" .")]
        if not any(all(p in t for p in parts) for t in titles):
            out.append(f"{line}: \"{name}\"")
    return out


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_named_sections_exist(path):
    missing = _missing(path.read_text(), _titles())
    assert not missing, (f"{path.name}: sections named but not found (rename the reference or the heading):\n"
                         + "\n".join(missing))


def test_the_check_finds_references_and_misses():
    text = 'as measured (docs/results.md, "Envs out of step"; "Held-out tasks", "An entropy\nfloor")'
    assert [n for n, _ in _references(text)] == ["Envs out of step", "Held-out tasks", "An entropy floor"]
    titles = ["Envs out of step: `env.desync`", "Held-out tasks: POPGym", "An entropy floor: the copy task"]
    assert _missing(text, titles) == []
    assert _missing(text.replace("Envs out", "Envs in"), titles) == ['1: "Envs in of step"']
    cut = '("Where the order ... went")'
    assert [n for n, _ in _references(cut)] == ["Where the order ... went"]
    assert _missing(cut, ["Where the order of magnitude went"]) == []
    assert _missing(cut, ["Where the order of steps"]) == ['1: "Where the order ... went"']
