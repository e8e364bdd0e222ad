"""The generated files are what their generators write from their one source
(tools/opcodes.txt for the opcode files, tools/box_*.txt for the box classes)."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("tool", ["gen_opcodes.py", "gen_boxes.py"])
def test_generated_files_are_current(tool):
    run = subprocess.run([sys.executable, str(ROOT / "tools" / tool), "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr


def test_opcode_numbers_come_from_the_table():
    from tapead._core import CONST_OPCODES, OPCODES, STRUCTURAL_OPCODES
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_opcodes
    finally:
        sys.path.pop(0)
    table = {op.name: op.number for op in gen_opcodes.read_table()}
    assert {**OPCODES, **CONST_OPCODES, **STRUCTURAL_OPCODES} == table


def test_table_errors(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_opcodes
    finally:
        sys.path.pop(0)
    bad = tmp_path / "ops.txt"
    bad.write_text("add 10 binary add add 0 0 -\nsub 10 binary subtract subtract 0 0 -\n")
    with pytest.raises(SystemExit, match="used twice"):
        gen_opcodes.read_table(bad)
    bad.write_text("add 40 binary add add 0 0 -\n")
    with pytest.raises(SystemExit, match=r"\[10, 30\)"):
        gen_opcodes.read_table(bad)
    bad.write_text("add 10 binary add add 0 2 -\n")
    with pytest.raises(SystemExit, match="zero column"):
        gen_opcodes.read_table(bad)
