"""Build hook for the optional C extension; all metadata lives in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkatool.record._speedups",
            ["kafkatool/record/_speedups.c"],
            # No compiler, or a failed build: install anyway, v2.py falls back to Python.
            optional=True,
        )
    ],
)
