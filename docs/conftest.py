"""pytest collects the ``>>>`` lines of every page in docs/; conf.py and the
Sphinx extension are build configuration, not test modules."""
collect_ignore = ["conf.py", "_ext"]
