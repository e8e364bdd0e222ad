"""``.. tapead-names:: module``: an autosummary table of a module's public names.

The list is read from the module when the docs are built, so a function
added to ``tapead.numpy`` appears in the reference without editing a page.

Options
-------
``:kind: tapead`` (default)
    Callables defined by tapead (their ``__module__`` starts with ``tapead``).
``:kind: numpy``
    Names the module re-exports unchanged from numpy, as a plain list.
"""
import importlib
import types

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


def public_names(modname, kind):
    mod = importlib.import_module(modname)
    out = []
    for name in sorted(vars(mod)):
        if name.startswith("_"):
            continue
        obj = getattr(mod, name)
        if isinstance(obj, types.ModuleType) or not callable(obj):
            continue
        owner = getattr(obj, "__module__", None) or ""
        ours = owner.startswith("tapead")
        if (kind == "tapead") == ours:
            out.append(name)
    return out


class TapeadNames(SphinxDirective):
    required_arguments = 1
    option_spec = {"kind": directives.unchanged}

    def run(self):
        modname = self.arguments[0]
        kind = self.options.get("kind", "tapead")
        names = public_names(modname, kind)
        if kind == "numpy":
            para = nodes.paragraph()
            for i, name in enumerate(names):
                if i:
                    para += nodes.Text(", ")
                para += nodes.literal(text=name)
            return [para]
        lines = [f".. currentmodule:: {modname}", "", ".. autosummary::",
                 "   :nosignatures:", ""]
        lines += [f"   {name}" for name in names]
        node = nodes.container()
        self.state.nested_parse(StringList(lines, source=modname), self.content_offset, node)
        return node.children


def setup(app):
    app.add_directive("tapead-names", TapeadNames)
    return {"parallel_read_safe": True, "version": "1"}


__all__ = ["public_names", "setup"]
