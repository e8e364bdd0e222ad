"""Test collection: ``tapead/dask.py`` needs the ``dask`` extra; without Dask
its doctests are not collected (``import tapead.dask`` raises ImportError,
by design)."""
import importlib.util

collect_ignore = []
if importlib.util.find_spec("dask") is None or importlib.util.find_spec("distributed") is None:
    collect_ignore.append("tapead/dask.py")
