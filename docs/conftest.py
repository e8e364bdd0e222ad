"""pytest collects the ``>>>`` lines of every page in docs/; conf.py and the
Sphinx extension are build configuration, not test modules.  The Dask page
needs the ``dask`` extra."""
collect_ignore = ["conf.py", "_ext"]
try:
    import dask.array  # noqa: F401
    import distributed  # noqa: F401
except ImportError:
    collect_ignore.append("dask.md")
