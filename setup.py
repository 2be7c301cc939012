"""Build hook for the optional C extension and the man pages; all other metadata lives in pyproject.toml."""

from glob import glob

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkatool.record._speedups",
            ["kafkatool/record/_speedups.c"],
            # No compiler, or a failed build: install anyway, every module falls back to Python
            # (`kafkatool --version` says which is in use).
            optional=True,
        )
    ],
    # The man pages (generated into man/ from the Click definitions and the prose in
    # kafkatool/cli/manpages/*.rst by `python -m kafkatool.cli.manpage man/`, written as roff
    # by docutils' manpage writer), installed
    # under <prefix>/share/man, where man(1) finds them: `man kafkatool-verify`, `man kafkatool-runbooks`.
    data_files=[
        ("share/man/man1", sorted(glob("man/*.1"))),
        ("share/man/man7", sorted(glob("man/*.7"))),
    ],
)
