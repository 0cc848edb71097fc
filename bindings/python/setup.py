# SPDX-License-Identifier: MIT
# The orbit Python package: metadata in setup.cfg. Plain setuptools, no pyproject.toml, so
# `pip install bindings/python` builds offline with Debian 12's setuptools (no isolated build
# environment to download into); Debian's python3-orbit is built from it by pybuild.
from setuptools import setup

setup()
