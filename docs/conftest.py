"""pytest collects the ``>>>`` lines of every page in docs/; conf.py and the
Sphinx extension are build configuration, not test modules.  The Dask page
needs the ``dask`` extra."""
import importlib.util

collect_ignore = ["conf.py", "_ext"]
if importlib.util.find_spec("dask") is None or importlib.util.find_spec("distributed") is None:
    collect_ignore.append("dask.md")
