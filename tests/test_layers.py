"""The package is a tower of layers: every import points down (or within its own layer), no module
reaches into another's private names, and the shape rules of the code hold (short functions,
`# fmt: skip` only on aligned tables, function-level imports only with a stated reason).

The layers, lowest first, are LAYERS below: the library a learner imports, then the reproduction's
harness (`looped.studies`) on top of it; docs/ARCHITECTURE.md draws them."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

from test_imports import PACKAGE, import_graph, module_name

from looped.paper import SHOWN

# The tower, lowest first: a module imports only from its own layer and those below; a module
# belongs to the layer of its longest prefix. The library ends at "commands"; everything above
# it is the harness, which the library never imports (the `looped` command finds the harness's
# subcommands by name).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("library", ("looped.errors", "looped.kernels", "looped.model", "looped.schedules",
                 "looped.schedule_spec", "looped.schedules_more", "looped.paper", "looped.config",
                 "looped.flops")),
    ("runtime", ("looped.runtime",)),
    ("data", ("looped.data",)),
    ("eval", ("looped.eval",)),
    ("training", ("looped.training",)),
    ("plotting", ("looped.plotting",)),
    ("commands", ("looped.commands", "looped.cli", "looped.__main__", "looped")),
    ("statistics", ("looped.studies.stats", "looped.studies.gapfit")),
    ("recipes", ("looped.studies.recipe",)),
    ("report", ("looped.studies.report",)),
    ("studies", ("looped.studies",)),
    ("study commands", ("looped.studies.commands",)),
)  # fmt: skip
HARNESS = "statistics"  # the first layer of the harness


def layer_of(module: str) -> int:
    """The index in LAYERS of a module's layer (-1: none); the longest matching prefix wins."""
    prefixes = [(len(p), i, p) for i, (_, ps) in enumerate(LAYERS) for p in ps]
    found = [(n, i) for n, i, p in prefixes if (module + ".").startswith(p + ".")]
    return max(found)[1] if found else -1


MAX_FUNCTION_LINES = 50


def _sources() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_has_a_layer():
    lost = [m for m in _sources() if layer_of(m) < 0]
    assert not lost, f"{lost} belong to no layer: add them to LAYERS and to docs/ARCHITECTURE.md"


def test_imports_point_down_the_tower():
    """Type-only imports count too: an upward arrow for a type still ties the lower layer to the
    upper one."""
    upward = []
    for module, deps in import_graph(type_only=True).items():
        for dep in deps:
            if layer_of(dep) > layer_of(module):
                upward.append(
                    f"{module} ({LAYERS[layer_of(module)][0]}) imports {dep} "
                    f"({LAYERS[layer_of(dep)][0]})"
                )
    assert not upward, "upward imports:\n" + "\n".join(sorted(upward))


def _module_aliases(tree: ast.AST, modules: set[str]) -> dict[str, str]:
    """Names bound to package modules in a file: `from looped.x import y` (y a module) and
    `import looped.x as z`."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if f"{node.module}.{a.name}" in modules:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in modules and a.asname:
                    aliases[a.asname] = a.name
    return aliases


def private_uses(path: Path, modules: set[str]) -> list[str]:
    """`from looped.x import _y` and `x._y` where x is another package module."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("looped"):
            found += [
                f"{path.name}:{node.lineno} imports {node.module}.{a.name}"
                for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")
            ]
    aliases = _module_aliases(tree, modules)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{path.name}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names():
    sources = _sources()
    found = [u for p in sources.values() for u in private_uses(p, set(sources))]
    assert not found, "private names used across modules:\n" + "\n".join(found)


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    tree = ast.parse(path.read_text())
    return [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} "
        f"({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_function_is_longer_than_a_screen():
    found = [f for p in _sources().values() for f in long_functions(p)]
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(found)


def _comments(source: str) -> dict[int, str]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}


def _is_table(node: ast.stmt) -> bool:
    """An assignment (or a call of a constructor) whose value is a literal table: a tuple, list,
    dict or set display, or a call whose arguments are."""
    value = getattr(node, "value", None)
    if isinstance(node, ast.Expr):
        return False
    if isinstance(value, ast.Call):
        return any(isinstance(a, ast.Tuple | ast.List | ast.Dict | ast.Set) for a in value.args)
    return isinstance(value, ast.Tuple | ast.List | ast.Dict | ast.Set)


def fmt_skips_off_tables(path: Path) -> list[str]:
    """`# fmt: skip` lines that do not end a module- or class-level table assignment."""
    source = path.read_text()
    skips = [n for n, c in _comments(source).items() if "fmt: skip" in c]
    tree = ast.parse(source)
    tables = set()
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]:
        for node in scope.body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and _is_table(node):
                tables.add(node.end_lineno)
    return [f"{path.relative_to(PACKAGE.parent)}:{n}" for n in skips if n not in tables]


def test_fmt_skip_only_on_aligned_tables():
    found = [f for p in _sources().values() for f in fmt_skips_off_tables(p)]
    assert not found, "`# fmt: skip` outside a table (let ruff format it):\n" + "\n".join(found)


def unexplained_function_imports(path: Path) -> list[str]:
    """Imports inside functions without a comment (on the line or the one above) saying why:
    the module-level import block is the dependency list a reader trusts."""
    source = path.read_text()
    comments = _comments(source)
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import | ast.ImportFrom) and not (
                comments.get(node.lineno) or comments.get(node.lineno - 1)
            ):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} in {fn.name}")
    return found


def test_function_level_imports_say_why():
    found = [f for p in _sources().values() for f in unexplained_function_imports(p)]
    assert not found, "imports inside functions with no reason given:\n" + "\n".join(found)


def test_the_checks_catch_what_they_claim(tmp_path, monkeypatch):
    """Each rule fails on a small file that breaks it and passes on its fixed twin."""
    bad = tmp_path / "looped" / "bad.py"
    bad.parent.mkdir()
    bad.write_text(
        "X = {1: 2}  # fmt: skip\n"
        "def f():\n    import json\n    y = 1  # fmt: skip\n    return y\n"
        "def g():\n" + "    pass\n" * 50
    )
    monkeypatch.setattr("test_layers.PACKAGE", tmp_path / "looped")
    assert fmt_skips_off_tables(bad) == ["looped/bad.py:4"]
    assert unexplained_function_imports(bad) == ["looped/bad.py:3 in f"]
    assert long_functions(bad) == ["looped/bad.py:6 g (51 lines)"]
    good = tmp_path / "looped" / "good.py"
    good.write_text("def f():\n    import json  # lazy: only this path reads JSON\n    return 1\n")
    assert unexplained_function_imports(good) == [] and long_functions(good) == []
    user = tmp_path / "looped" / "user.py"
    user.write_text("from looped import bad\nfrom looped.bad import _h\nbad._k()\n")
    assert private_uses(user, {"looped.bad", "looped.user"}) == [
        "user.py:2 imports looped.bad._h",
        "user.py:3 uses looped.bad._k",
    ]
    assert layer_of("looped.studies.demo") > layer_of("looped.studies.report.render")
    # the harness sits above the whole library: a library module importing it points up
    harness = min(i for i, (name, _) in enumerate(LAYERS) if name == HARNESS)
    library = ["looped.model", "looped.training.trainer", "looped.plotting", "looped.cli"]
    assert all(layer_of(m) < harness for m in library)
    studies = ["looped.studies.stats", "looped.studies.engine", "looped.studies.commands.map"]
    assert all(layer_of(m) >= harness for m in studies)


def parsers_outside_commands(path: Path) -> list[str]:
    """Argument parsing below the commands layer: an `argparse` import, or a call that builds a
    parser or adds a flag. Every `looped` subcommand parses in looped/commands/ and calls the
    library with typed arguments, so the library stays usable from a notebook."""
    name = module_name(path)
    if name.startswith(("looped.commands", "looped.studies.commands")) or name == "looped.cli":
        return []
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        imported = isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names)
        imported |= isinstance(node, ast.ImportFrom) and node.module == "argparse"
        called = isinstance(node, ast.Call) and getattr(node.func, "attr", "") in (
            "add_argument",
            "ArgumentParser",
        )
        if imported or called:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_only_the_commands_layer_parses_arguments():
    found = [f for p in _sources().values() for f in parsers_outside_commands(p)]
    assert not found, "argument parsing outside looped/commands:\n" + "\n".join(found)


MARKER_CODES = {"o", "s", "^", "v", "D", "P", "X", "<", ">", "d", "*", "p", "h"}


def schedule_names_outside_paper(path: Path) -> list[str]:
    """A schedule's label or colour typed outside paper.py, or a table of markers: each has one
    home (`paper.SHOWN`), so a legend, a table and a results file never disagree on a name."""
    if module_name(path) == "looped.paper":
        return []
    names = {n.lower() for label, color, _ in SHOWN.values() for n in (label, color)}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.lower() in names:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.value!r}")
        if isinstance(node, ast.Dict) and len(node.values) >= 2:
            values = [v.value for v in node.values if isinstance(v, ast.Constant)]
            if len(values) == len(node.values) and set(values) <= MARKER_CODES:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} marker table")
    return sorted(found, key=lambda f: int(f.split(":")[1].split()[0]))


def test_schedule_labels_colours_and_markers_have_one_home():
    found = [f for p in _sources().values() for f in schedule_names_outside_paper(p)]
    assert not found, "define these in looped/paper.py's SHOWN:\n" + "\n".join(found)


def test_the_one_home_rules_catch_what_they_claim(tmp_path, monkeypatch):
    pkg = tmp_path / "looped"
    (pkg / "commands").mkdir(parents=True)
    lib, cmd = pkg / "lib.py", pkg / "commands" / "x.py"
    parse = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--n')\n"
    lib.write_text(parse + f"LABEL = {SHOWN['fixed:4'][0]!r}\nM = {{'a': 'o', 'b': 's'}}\n")
    cmd.write_text(parse)
    monkeypatch.setattr("test_layers.PACKAGE", pkg)
    monkeypatch.setattr("test_imports.PACKAGE", pkg)
    assert parsers_outside_commands(lib) == [
        "looped/lib.py:1",
        "looped/lib.py:2",
        "looped/lib.py:3",
    ]
    assert parsers_outside_commands(cmd) == []
    assert schedule_names_outside_paper(lib) == [
        "looped/lib.py:4 'fixed K=4'",
        "looped/lib.py:5 marker table",
    ]


def test_every_command_module_holds_its_parser_and_main():
    """A command module that only re-exports a main from below would leave the parser there."""
    from looped.cli import COMMANDS  # here, not at the top: this test alone routes commands

    for module, _ in COMMANDS.values():
        tree = ast.parse((PACKAGE.parent / (module.replace(".", "/") + ".py")).read_text())
        assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body), module


# Edges a reader would not expect, within the layers: the FLOP model reads the model's shape,
# never a run config (a type-only import names the batch shape `tokens_per_step` reads), and
# the runtime (disk, device, torchrun) reads a model by its shape, never by importing one.
UNEXPECTED = {
    "looped.flops": ("looped.config",),
    "looped.runtime": ("looped.model", "looped.config"),
}


def test_the_flop_model_reads_no_config_and_the_runtime_imports_no_model():
    graph = import_graph(type_only=False)
    found = [
        f"{module} imports {dep}"
        for module, deps in graph.items()
        for prefix, banned in UNEXPECTED.items()
        if (module + ".").startswith(prefix + ".")
        for dep in deps
        if any((dep + ".").startswith(b + ".") for b in banned)
    ]
    assert not found, "\n".join(found)
