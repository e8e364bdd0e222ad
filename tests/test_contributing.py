"""CONTRIBUTING.md names only things that exist.

Every file path, ``tapead.`` name, class attribute, bare name and command the
guide puts in backticks or in a command block is checked here, so the guide
cannot drift from the code: a renamed file or function fails this test.
"""
from __future__ import annotations

import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
GUIDE = ROOT / "CONTRIBUTING.md"
TEXT = GUIDE.read_text()

#: inline code spans (fenced blocks removed first: they hold code, not names)
_FENCED = re.compile(r"^```.*?^```", re.S | re.M)
SPANS = re.findall(r"`([^`\n]+)`", _FENCED.sub("", TEXT))
#: the indented command blocks
COMMANDS = [line.strip() for line in TEXT.splitlines() if line.startswith("    ")
            and not line.startswith("     ") and line.strip().split()[0] in
            ("python", "pip", "pytest")]

_PATH = re.compile(r"^[\w.<>*-]+(/[\w.<>*-]+)+/?$")
_DOTTED = re.compile(r"^tapead(\.\w+)+$")
_CLASS_ATTR = re.compile(r"^(Primitive|OpRule|Expr)\.(\w+)$")
_BARE = re.compile(r"^[A-Za-z_]\w*$")


def _paths():
    return sorted({s for s in SPANS if _PATH.match(s)})


def _dotted():
    return sorted({s for s in SPANS if _DOTTED.match(s)})


def _resolve(name: str):
    """(module, object) of a dotted ``tapead.`` name: the longest importable
    module prefix, then attributes."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        obj = module
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return module, obj
    raise ImportError(name)


@pytest.mark.parametrize("path", _paths())
def test_every_path_exists(path):
    if "<" in path:                     # a pattern such as tests/opspecs_<family>.py
        pattern = re.sub(r"<\w+>", "*", path)
        assert list(ROOT.glob(pattern)), f"{path}: no file matches {pattern}"
    elif "*" in path:
        assert list(ROOT.glob(path)), f"{path}: no file matches"
    else:
        assert (ROOT / path).exists(), f"CONTRIBUTING.md names {path}, which does not exist"


@pytest.mark.parametrize("name", _dotted())
def test_every_tapead_name_exists(name):
    _resolve(name)


def test_class_attributes_exist():
    from tapead._prims.base import Primitive
    from tapead.scaly.expr import Expr, OpRule
    classes = {"Primitive": Primitive, "OpRule": OpRule, "Expr": Expr}
    found = [s for s in SPANS if _CLASS_ATTR.match(s)]
    assert found
    for span in found:
        cls, attr = _CLASS_ATTR.match(span).groups()
        slots = getattr(classes[cls], "__slots__", ())
        assert hasattr(classes[cls], attr) or attr in slots, span


def _corpus() -> str:
    """The text of every file the guide names (directories: their Python
    files), and of the modules of its tapead names."""
    files = set()
    for path in _paths():
        pattern = re.sub(r"<\w+>", "*", path)
        for p in ROOT.glob(pattern):
            files.update(p.rglob("*.py") if p.is_dir() else [p])
    for name in _dotted():
        mod, obj = _resolve(name)
        defined = getattr(obj, "__module__", None)
        if isinstance(defined, str) and defined.startswith("tapead"):
            mod = importlib.import_module(defined)  # where it is defined
        if getattr(mod, "__file__", None):
            files.add(pathlib.Path(mod.__file__))
            src = pathlib.Path(mod.__file__).with_suffix(".pyx")
            if src.exists():                # a compiled module: its sources
                files.update(src.parent.glob(src.stem + "*.p*"))
    return "\n".join(p.read_text(errors="ignore") for p in sorted(files) if p.is_file())


def test_bare_names_occur_in_the_files_the_guide_names():
    corpus = _corpus()
    bare = sorted({s for s in SPANS if _BARE.match(s)})
    assert len(bare) > 20
    missing = [b for b in bare if not re.search(rf"\b{re.escape(b)}\b", corpus)]
    assert not missing, f"CONTRIBUTING.md names {missing}, found in none of its files"


def test_commands_exist():
    assert COMMANDS, "no command blocks found"
    readme = (ROOT / "README.md").read_text()
    for cmd in COMMANDS:
        if "pytest -n auto" in cmd:         # the suite: the README's command
            assert cmd in readme, cmd
        for script in re.findall(r"(?:tools|benchmarks)/[\w./]+", cmd):
            assert (ROOT / script).exists(), f"{cmd}: {script} does not exist"
    spans = " ".join(SPANS)
    for tool, flag in re.findall(r"python (tools/\w+\.py)( --check)?", spans):
        source = (ROOT / tool).read_text()
        assert flag == "" or '"--check"' in source, f"{tool} has no --check"
    assert (ROOT / "tools" / "build_docs.sh").stat().st_mode & 0o111, "not executable"


def test_the_extras_the_guide_installs_exist():
    pyproject = (ROOT / "pyproject.toml").read_text()
    for extra in set(re.findall(r'pip install -e "\.\[(\w+)\]"', TEXT)):
        assert re.search(rf"^{extra} = \[", pyproject, re.M), extra
    assert "--benchmark-disable" in pyproject and "--doctest-glob=*.md" in pyproject


def test_the_readme_links_the_guide():
    assert "CONTRIBUTING.md" in (ROOT / "README.md").read_text()


def test_the_guide_speaks_to_contributors():
    for word in ("seed", "issue", "lab", "session"):
        assert not re.search(rf"\b{word}s?\b", TEXT, re.I), word
