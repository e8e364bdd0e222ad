"""The import layers of docs/architecture.md hold (STYLE.md guideline 1).

* the import-linter contract in ``pyproject.toml`` (``[tool.importlinter]``)
  is kept: no module imports a higher layer, directly or through others;
* grimp cannot see the compiled modules, so the contract ignores imports of
  the bare package ``tapead``; here every such import is checked to name a
  compiled module, and the compiled sources to import only ``tapead.errors``;
* every import of a tapead module inside a function says why it is not at
  module level (a ``#`` comment on its line or the line above).
"""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tapead"
COMPILED = ("_core", "_revolve", "_patterns")     # and coloring._kernels


def test_import_contract_is_kept():
    pytest.importorskip("importlinter")
    from importlinter import configuration
    from importlinter.application import use_cases
    configuration.configure()                                # the file-system adapters
    kept = use_cases.lint_imports(config_filename=str(ROOT / "pyproject.toml"),
                                  cache_dir=None, no_logo=True)
    assert kept, ("an import breaks the layers of docs/architecture.md "
                  "([tool.importlinter] in pyproject.toml): the chain is printed above; "
                  "run `lint-imports` to see it again")


def test_imports_of_the_bare_package_name_a_compiled_module():
    grimp = pytest.importorskip("grimp")
    g = grimp.build_graph("tapead", include_external_packages=False)
    allowed = re.compile(r"^from (tapead|\.) import (%s)(, (%s|[a-z_]+))*\b" % (
        "|".join(COMPILED), "|".join(COMPILED)))
    bad = []
    for m in sorted(g.find_modules_that_directly_import("tapead")):
        if m.startswith("tapead.examples"):                  # the top layer: user code
            continue
        for d in g.get_import_details(importer=m, imported="tapead"):
            if not allowed.match(d["line_contents"]):
                bad.append(f"{m}:{d['line_number']}: {d['line_contents']}")
    assert not bad, ("import the module itself (from tapead import transforms), not the "
                     "package, so the layer contract can see it:\n" + "\n".join(bad))
    kernels = re.compile(r"^from tapead\.coloring import _kernels as _coloring$")
    bad = [f"{m}:{d['line_number']}: {d['line_contents']}"
           for m in sorted(g.find_modules_that_directly_import("tapead.coloring"))
           if m.startswith("tapead.coloring.")
           for d in g.get_import_details(importer=m, imported="tapead.coloring")
           if not kernels.match(d["line_contents"])]
    assert not bad, ("inside tapead.coloring, import the sibling module itself, not the "
                     "package (only the compiled kernels are reached through it):\n"
                     + "\n".join(bad))


def test_compiled_sources_import_only_errors():
    bad = []
    for p in sorted(PACKAGE.rglob("*.pyx")) + sorted(PACKAGE.rglob("*.pxi")):
        for n, line in enumerate(p.read_text().splitlines(), 1):
            m = re.match(r"\s*(from|import)\s+(tapead[\w.]*|\.[\w.]*)", line)
            if m and not line.lstrip().startswith("from tapead.errors import"):
                if not re.match(r"\s*from\s+\S+\s+cimport", line):
                    bad.append(f"{p.name}:{n}: {line.strip()}")
    assert not bad, "the compiled core imports only numpy and tapead.errors:\n" + "\n".join(bad)


def _function_local_imports(path):
    src = path.read_text()
    lines = src.splitlines()
    stack = [(ast.parse(src), False)]
    while stack:
        node, inside = stack.pop()
        for ch in ast.iter_child_nodes(node):
            if inside and isinstance(ch, (ast.Import, ast.ImportFrom)):
                mod = (ch.module or "") if isinstance(ch, ast.ImportFrom) else ch.names[0].name
                if (isinstance(ch, ast.ImportFrom) and ch.level) or mod.startswith("tapead"):
                    yield ch.lineno, lines[ch.lineno - 1], lines[ch.lineno - 2] if ch.lineno > 1 else ""
            stack.append((ch, inside or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef))))


def test_function_local_imports_say_why():
    bad = []
    for p in sorted(PACKAGE.rglob("*.py")):
        for n, line, prev in _function_local_imports(p):
            if "#" not in line and not prev.strip().startswith("#"):
                bad.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, ("a function-local import of a tapead module: move it to module level, "
                     "or say why it stays (# cycle: ... -> here):\n" + "\n".join(bad))


def _contract_layers():
    import tomllib
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for c in cfg["tool"]["importlinter"]["contracts"]:
        if c["type"] == "layers":
            return [" | ".join(sorted(x.strip() for x in layer.split("|")))
                    for layer in c["layers"]]
    raise AssertionError("no layers contract in pyproject.toml")


def test_the_architecture_page_draws_the_contract():
    """docs/architecture.md's diagram lists the layers of the contract, top to
    bottom (the first column of its lines that are followed by a caret line)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## Layers (imports point one way)", 1)[1].split("```", 2)[1]
    lines = block.splitlines()
    drawn = []
    for i, line in enumerate(lines):
        if line[:1].strip() and not line.startswith(" "):
            names = line.split("   ")[0].strip()
            drawn.append(" | ".join(sorted(x.strip() for x in names.split("|"))))
    assert drawn == _contract_layers(), (
        "the diagram in docs/architecture.md and [tool.importlinter] disagree:\n"
        f"drawn    {drawn}\ncontract {_contract_layers()}")
