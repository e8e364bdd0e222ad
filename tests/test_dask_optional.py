"""Dask is optional: ``import tapead`` does not import it, and ``import
tapead.dask`` without it says which extra to install."""
import subprocess
import sys


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120,
                          text=True)


def test_import_tapead_does_not_import_dask():
    out = _run("import sys, tapead\nprint('dask' in sys.modules, 'distributed' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False False"


def test_tapead_dask_without_dask_names_the_extra():
    out = _run("import sys\nsys.modules['dask'] = None    # as if it were not installed\n"
               "try:\n    import tapead.dask\nexcept ImportError as e:\n    print(e)")
    assert out.returncode == 0, out.stderr
    assert 'pip install "tapead[dask]"' in out.stdout
