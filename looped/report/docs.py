"""What the docs list that the code already knows, written by `looped report` so it cannot drift:
the notebooks (how many, their titles and sections) and the map of the package.

README.md once said "six notebooks" when there were seven and left three modules out of its
map of the package; hand-typed lists drift. Here the notebooks are read from their jupytext
sources and the package from its directory, and the sections go between markers like the
measured ones (`<!-- notebooks:begin -->`, `<!-- codemap:begin -->`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

# the README's map of the package: one line per group of layers, lowest first (the import order
# of docs/ARCHITECTURE.md), (name, modules and subpackages, what they hold); a module or
# subpackage not named here joins the last line, so the map never leaves one out
CODE_MAP = (
    ("The paper's concepts", ("model", "kernels", "schedules", "flops", "paper", "config", "errors"),
     "P, one block A applied K times with input injection, H (hand-written RMSNorm and RoPE "
     "backward passes); which K each step trains at and what it costs in modeled FLOPs; the "
     "paper's recipes and reported numbers; configs"),
    ("Disk and devices", ("runtime",),
     "atomic writes, locks, checkpoints, the device and dtype, DDP / FSDP2, injected faults"),
    ("Data and evaluation", ("data", "eval"),
     "synthetic biographies and text corpora; token and fact NLL, recalled bits, baselines, "
     "downstream tasks at every serving depth, and the statistics that judge them"),
    ("Training and studies", ("training", "experiments", "bench"),
     "the training loop with exact resume and branching; the demo, the text track, the length "
     "study and the diagnosis on a pool of worker processes; the benchmark"),
    ("Reports and the command line", ("report", "cli"),
     "every figure, table and generated doc section, from the results files; one entry point "
     "routing to a module per subcommand"),
)  # fmt: skip

_NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
            "eleven", "twelve")  # fmt: skip


def count_word(n: int) -> str:
    """A count as prose writes it: 'seven', '13'."""
    return _NUMBERS[n] if n < len(_NUMBERS) else str(n)


@dataclass(frozen=True)
class Notebook:
    """One notebook as its source states it."""

    # file stem: 02_depth_schedules
    stem: str
    # the heading without its number: "Depth schedules: which K to train at, step by step"
    title: str
    # its numbered section headings, in order, without their numbers
    sections: tuple[str, ...]


def _markdown_lines(source: str) -> list[str]:
    """The prose lines of a jupytext percent-format notebook, outside code fences."""
    lines, in_markdown, fenced = [], False, False
    for line in source.splitlines():
        if line.startswith("# %%"):
            in_markdown, fenced = "[markdown]" in line, False
            continue
        if not in_markdown:
            continue
        text = line[2:] if line.startswith("# ") else line.lstrip("#")
        if text.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(text)
    return lines


def read_notebook(path: Path) -> Notebook:
    """A notebook's title (`# 02 · Title`) and numbered sections (`## 1. Heading`)."""
    prose = _markdown_lines(path.read_text())
    title = next(line[2:] for line in prose if line.startswith("# "))
    sections = tuple(m.group(1) for line in prose if (m := re.match(r"## \d+\. (.+)", line)))
    return Notebook(path.stem, re.sub(r"^\d+\s*·\s*", "", title).strip(), sections)


def notebooks(root: Path) -> list[Notebook]:
    """Every notebook of ROOT/notebooks, in reading order."""
    return [read_notebook(p) for p in sorted((root / "notebooks").glob("[0-9]*.py"))]


def _link(doc: Path, root: Path, target: str) -> str:
    """`target` (relative to the repository root) as a link from the file `doc`."""
    return Path(os.path.relpath(root / target, (root / doc).parent)).as_posix()


def notebooks_section(root: Path, doc: Path = Path("README.md")) -> str:
    """How many notebooks there are, and a table of them with their sections."""
    books = notebooks(root)
    lines = [
        f"{count_word(len(books)).capitalize()} notebooks teach the paper one idea at a time, in "
        "reading order. Each imports everything from `looped` and runs in seconds to a minute "
        "on a laptop CPU (`LOOPED_FULL=1` switches to full size).",
        "",
        "| notebook | its sections |",
        "|---|---|",
    ]
    for nb in books:
        link = _link(doc, root, f"notebooks/{nb.stem}.ipynb")
        number = nb.stem.split("_")[0]
        lines.append(f"| [{number} · {nb.title}]({link}) | {'; '.join(nb.sections)} |")
    return "\n".join(lines)


def package_parts(root: Path) -> list[str]:
    """The package's modules and subpackages by name (`model`, `data`), dunder files left out."""
    pkg = root / "looped"
    modules = [p.stem for p in pkg.glob("*.py") if not p.stem.startswith("__")]
    packages = [p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()]
    return sorted(modules + packages)


def code_map(root: Path, doc: Path = Path("README.md")) -> str:
    """The package in five lines, one per group of layers, each module and subpackage linked."""
    parts = package_parts(root)
    named = {m for _, modules, _ in CODE_MAP for m in modules}
    rows = [list(modules) for _, modules, _ in CODE_MAP]
    rows[-1] += [m for m in parts if m not in named]
    lines = []
    for (name, _, what), modules in zip(CODE_MAP, rows):
        links = []
        for m in modules:
            if m not in parts:
                continue
            is_package = (root / "looped" / m).is_dir()
            target = f"looped/{m}/" if is_package else f"looped/{m}.py"
            shown = f"{m}/" if is_package else m
            links.append(f"[`{shown}`]({_link(doc, root, target)})")
        lines.append(f"- **{name}** ({', '.join(links)}): {what}.")
    return "\n".join(lines)
