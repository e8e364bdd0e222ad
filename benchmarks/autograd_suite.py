"""Run HIPS autograd's own test suite against autograd and against tapead.autograd.

    python benchmarks/autograd_suite.py /path/to/autograd-source [--out DIR] [-k EXPR]

The source tree (a checkout of github.com/HIPS/autograd) is read, never
copied into this repository: its ``tests/`` folder is copied twice into a
temporary directory, once unchanged and once with every ``autograd`` name
rewritten to ``tapead.autograd``; pytest runs both (``autograd`` must be
installed for the first).  The script prints, for the tests that pass on
autograd, how many pass on tapead, and lists the others with the first line
of their error, grouped by exception type, so a failure can be checked to
be a clear error and not a wrong number (an ``AssertionError`` is a wrong
or differently shaped value: those are listed first).
"""
from __future__ import annotations

import argparse
import collections
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

NAME = re.compile(r"(?<![\w.])autograd(?=[\s.,;)]|$)", re.M)


def rewrite(src: str) -> str:
    """Every reference to the package ``autograd`` made to ``tapead.autograd``."""
    return NAME.sub("tapead.autograd", src)


def copy_tests(source: pathlib.Path, dest: pathlib.Path, to_tapead: bool) -> None:
    shutil.copytree(source / "tests", dest / "tests")
    if to_tapead:
        for p in (dest / "tests").glob("*.py"):
            p.write_text(rewrite(p.read_text()))


def run(dest: pathlib.Path, extra) -> dict:
    xml = dest / "report.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
           "-n", "2", f"--junitxml={xml}", "tests", *extra]
    subprocess.run(cmd, cwd=dest, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        status, msg = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                status = "failed"
                msg = (child.get("message") or "").strip().splitlines()
                msg = msg[0] if msg else child.tag
            elif child.tag == "skipped":
                status = "skipped"
        out[name] = (status, msg)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=pathlib.Path, help="autograd's source tree (with tests/)")
    ap.add_argument("--out", type=pathlib.Path, default=None, help="keep the copies here")
    ap.add_argument("-k", default=None, help="pytest -k expression")
    args = ap.parse_args(argv)
    extra = ["-k", args.k] if args.k else []
    root = args.out or pathlib.Path(tempfile.mkdtemp(prefix="autograd_suite_"))
    results = {}
    for which, to_tapead in (("autograd", False), ("tapead", True)):
        d = root / which
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        copy_tests(args.source, d, to_tapead)
        results[which] = run(d, extra)
    ref, ours = results["autograd"], results["tapead"]
    base = [n for n, (s, _) in ref.items() if s == "passed"]
    ok = [n for n in base if ours.get(n, ("missing", ""))[0] == "passed"]
    print(f"tests passing on autograd: {len(base)}; also passing on tapead.autograd: "
          f"{len(ok)} ({100.0 * len(ok) / max(len(base), 1):.1f}%)")
    by_kind = collections.defaultdict(list)
    for n in base:
        status, msg = ours.get(n, ("missing", "not run"))
        if status != "passed":
            kind = msg.split(":", 1)[0] if ":" in msg else status
            by_kind[kind].append((n, msg))
    order = sorted(by_kind, key=lambda k: (k != "AssertionError", k))
    for kind in order:
        print(f"\n{kind} ({len(by_kind[kind])})")
        for n, msg in by_kind[kind]:
            print(f"  {n}: {msg[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
