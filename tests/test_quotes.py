"""A measured number has one source: the generated tables (which tests/test_paper.py and
test_length.py check against results/*.json) and the notebooks' own outputs. Hand-written prose
(README, docs, notebook markdown) quotes none, so two places can never give the same quantity
two values: only the paper's own figures and the spec strings appear there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a decimal with two or more places (an NLL, a ratio), or a percentage with a decimal (a gap)
MEASURED = re.compile(r"(?<![\w.`=:-])[-+]?\d+\.(?:\d{2,}(?!\d|%|\.\d)|\d+%)")


def prose(markdown: str) -> str:
    """Markdown without what is generated or literal: marked blocks, code, tables, math."""
    text = re.sub(r"<!-- (\w+):begin -->.*?<!-- \1:end -->", "", markdown, flags=re.S)
    text = re.sub(r"```.*?```|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("|"))


def notebook_markdown(path: Path) -> str:
    """The markdown cells of a jupytext percent-format notebook, comment marks removed."""
    cells = re.split(r"^# %%", path.read_text(), flags=re.M)
    md = [c for c in cells if c.startswith(" [markdown]")]
    return "\n".join(re.sub(r"^# ?", "", line) for c in md for line in c.splitlines()[1:])


def the_papers_numbers() -> set[str]:
    """Numbers looped/paper.py states (the paper's tolerances, savings and recipes), in the
    forms prose writes them."""
    source = (ROOT / "looped" / "paper.py").read_text()
    found = set()
    for x in re.findall(r"\d+\.\d+", source):
        found |= {x, f"{float(x):.1%}", f"{float(x):.0%}"}
    return found


def quoted(text: str) -> list[str]:
    allowed = the_papers_numbers()
    return [m for m in MEASURED.findall(prose(text)) if m.lstrip("+-") not in allowed]


def test_hand_written_prose_quotes_no_measured_number():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = {str(p.relative_to(ROOT)): quoted(p.read_text()) for p in pages}
    for nb in sorted((ROOT / "notebooks").glob("*.py")):
        found[str(nb.relative_to(ROOT))] = quoted(notebook_markdown(nb))
    found = {k: v for k, v in found.items() if v}
    assert not found, f"measured numbers in prose (put them in a generated table): {found}"


def test_the_rule_catches_a_quoted_number():
    text = "Fixed-first ends 2.4% behind, at NLL 3.516.\n| 3.516 | table |\n`x=1.25`\n"
    assert quoted(text) == ["2.4%", "3.516"]
    assert quoted("within 0.5% of uniform, K=4 for 80%") == []  # the paper's tolerance
    assert quoted("<!-- t:begin -->\n3.516\n<!-- t:end -->\nsee $1.18$") == []
