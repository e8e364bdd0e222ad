"""Declares the Cython extensions; all metadata lives in pyproject.toml.

Set TAPEAD_DEBUG=1 to build with bounds checks and wraparound on.
"""
import glob
import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("TAPEAD_DEBUG", "0") == "1"
DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "infer_types": True,
}

extensions = [
    Extension(
        os.path.splitext(path)[0].replace(os.sep, "."),
        [path],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("_GNU_SOURCE", None)],
        # no contraction into fused multiply-adds: C kernels round as numpy does
        extra_compile_args=["-O3", "-ffp-contract=off"],
    )
    for path in sorted(glob.glob(os.path.join("tapead", "*.pyx"))
                       + glob.glob(os.path.join("tapead", "*", "*.pyx")))
]

setup(ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES, annotate=DEBUG))
