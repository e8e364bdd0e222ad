"""Test collection: ``tapead/dask/`` needs the ``dask`` extra; without Dask
its doctests are not collected (``import tapead.dask`` raises ImportError,
by design)."""
collect_ignore = []
try:
    import dask.array  # noqa: F401
    import distributed  # noqa: F401
except ImportError:
    collect_ignore.append("tapead/dask")
