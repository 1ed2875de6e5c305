"""The native extensions; everything else about the package is in pyproject.toml.

``bundler.core._jcs`` (canonical JSON serialisation) and ``bundler.core._files`` (an
import's many new files, written with the GIL released) are not optional: a failed compile
fails the install rather than leaving a slow path in place unnoticed.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("bundler.core._jcs", sources=["bundler/core/_jcs.c"]),
        Extension("bundler.core._files", sources=["bundler/core/_files.c"]),
    ]
)
