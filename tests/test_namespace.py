"""``tapead``'s top-level namespace is its public API and nothing else.

``tapead.__all__`` is the list of docs/api/index.rst ("The names of
``tapead``"); every name in it resolves; every function or class the API
reference documents as ``tapead.NAME`` and every ``ta.NAME`` the docs use is
in it; ``tapead/__init__.py`` binds no internal module under a public name.
"""
import ast
import pathlib
import re
import types

import tapead

ROOT = pathlib.Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"
INTERNAL = ("boxing", "vmap_axes", "scalar_scan", "program", "transforms", "loops",
            "control", "vmap_transforms", "recording", "closures", "compositions", "_prims")


def _documented_list():
    text = (API / "index.rst").read_text()
    section = text.split("The names of ``tapead``", 1)[1]
    section = section.split("``tapead.scaly`` (the graph API)", 1)[0]
    items = [line for line in section.splitlines() if line.startswith(("* ", "  "))]
    names = []
    for line in items:
        line = line.split(":", 1)[1] if line.startswith("* ") else line
        line = re.sub(r"\(defined in ``[\w.]+``\)", "", line)
        names += re.findall(r"``(\w+)``", line)
    return names


def test_all_is_the_documented_list():
    documented = _documented_list()
    assert len(documented) > 40, "the parse of docs/api/index.rst found too few names"
    assert len(set(documented)) == len(documented), "a name is listed twice in the docs"
    assert len(set(tapead.__all__)) == len(tapead.__all__), "a name is twice in __all__"
    assert set(tapead.__all__) == set(documented), (
        "tapead.__all__ and docs/api/index.rst disagree: "
        f"only in __all__ {sorted(set(tapead.__all__) - set(documented))}, "
        f"only in the docs {sorted(set(documented) - set(tapead.__all__))}")


def test_every_public_name_resolves():
    for name in tapead.__all__:
        assert getattr(tapead, name, None) is not None, f"tapead.{name} does not resolve"
    star = {}
    exec("from tapead import *", star)
    assert sorted(k for k in star if k != "__builtins__") == sorted(tapead.__all__)


def test_subpackages_in_all_are_modules_and_the_rest_are_not():
    for name in tapead.__all__:
        obj = getattr(tapead, name)
        if isinstance(obj, types.ModuleType):
            assert obj.__name__ == f"tapead.{name}", name
    functions = [n for n in tapead.__all__ if not isinstance(getattr(tapead, n), types.ModuleType)]
    assert "grad" in functions and "numpy" not in functions


def test_internal_modules_are_not_public_names():
    assert not set(INTERNAL) & set(tapead.__all__)
    # importing a submodule binds it as an attribute of the package: that is
    # allowed, but __init__ itself binds only public or underscored names
    tree = ast.parse((ROOT / "tapead" / "__init__.py").read_text())
    bound = [a.asname or a.name.split(".")[0] for n in tree.body
             if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names]
    stray = [b for b in bound if not b.startswith("_") and b not in tapead.__all__]
    assert not stray, f"tapead/__init__.py binds names that are not public: {stray}"


def test_no_public_function_or_class_outside_all():
    stray = [n for n, v in vars(tapead).items()
             if not n.startswith("_") and not isinstance(v, types.ModuleType)
             and n not in tapead.__all__]
    assert not stray, f"tapead has public names missing from __all__: {stray}"


def test_the_api_reference_and_the_docs_use_only_listed_names():
    names = set()
    for page in sorted(API.glob("*.rst")) + sorted(API.glob("*.md")):
        module = None
        for line in page.read_text().splitlines():
            m = re.match(r"\.\.\s+(?:currentmodule|module)::\s+([\w.]+)", line)
            if m:
                module = m.group(1)
            m = re.match(r"\.\.\s+auto(?:function|class)::\s+([\w.]+)", line)
            if m:
                target = m.group(1)
                if target.startswith("tapead.") and target.count(".") == 1:
                    names.add(target.split(".")[1])
                elif "." not in target and module == "tapead":
                    names.add(target)
    assert {"grad", "scan", "Tape", "check_grads", "tree_map"} <= names
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md")) + sorted(API.glob("*"))
    for page in pages:
        names |= set(re.findall(r"\bta\.(\w+)", page.read_text()))
    missing = sorted(names - set(tapead.__all__) - {"__all__"})
    assert not missing, f"the docs use tapead names that are not in __all__: {missing}"
