"""Every import path the documentation shows still works.

The docs (README, docs/*.md, docs/api/*.rst) and the public docstrings name
modules and names (``from tapead.coloring import star_coloring``,
``.. autofunction:: tapead.sparse.sparse_hessian``...); a layout change must
not take any of them away.  Each one found is imported here.
"""
import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = ([ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
           + sorted((ROOT / "docs" / "api").glob("*.rst"))
           + sorted((ROOT / "docs" / "api").glob("*.md"))
           + sorted((ROOT / "tapead").rglob("*.py")))         # their docstring examples

FROM = re.compile(r"from\s+(tapead(?:\.\w+)*)\s+import\s+\(?([\w\s,]+?)\)?\s*(?:#|$)", re.M)
IMPORT = re.compile(r"^\s*(?:>>>\s*)?import\s+(tapead(?:\.\w+)*)", re.M)
AUTO = re.compile(r"\.\.\s+auto\w+::\s+(tapead[\w.]*)")
DOTTED = re.compile(r"`+(tapead(?:\.\w+)+)(?:\(\))?`+")     # `tapead.sparse.hessian_sparsity`


def _paths():
    found = set()
    for src in SOURCES:
        text = src.read_text()
        if src.suffix == ".py":            # only the examples (>>> lines) of a module
            text = "\n".join(line.split(">>>", 1)[1] for line in text.splitlines()
                             if ">>>" in line)
        for mod, names in FROM.findall(text):
            for name in re.split(r"[\s,]+", names.strip()):
                if name and name != "as" and re.fullmatch(r"\w+", name):
                    found.add((mod, name))
            # "import x as y": the alias is not a name of the module
        for mod in IMPORT.findall(text):
            found.add((mod, None))
        for dotted in AUTO.findall(text) + DOTTED.findall(text):
            found.add((dotted, "__auto__"))
    return sorted(found, key=str)


PATHS = _paths()


def test_the_docs_name_import_paths():
    assert len(PATHS) > 40, "the scan found too few import paths: is the regex broken?"


@pytest.mark.parametrize("mod,name", PATHS, ids=[f"{m}:{n}" for m, n in PATHS])
def test_documented_import_path_works(mod, name):
    if name == "__auto__":                  # an autodoc target: a module or module.attribute
        parts = mod.split(".")
        for k in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:k]))
            except ImportError:
                continue
            for attr in parts[k:]:
                obj = getattr(obj, attr)
            return
        pytest.fail(f"autodoc target {mod} does not import")
    module = importlib.import_module(mod)
    if name is not None:
        assert hasattr(module, name) or importlib.util.find_spec(f"{mod}.{name}"), \
            f"`from {mod} import {name}` (shown in the docs) fails"
