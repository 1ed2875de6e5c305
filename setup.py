"""The one native extension; everything else about the package is in pyproject.toml.

``bundler.core._jcs`` (canonical JSON serialisation) is not optional: a failed compile fails
the install rather than leaving a slow path in place unnoticed.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("bundler.core._jcs", sources=["bundler/core/_jcs.c"])])
