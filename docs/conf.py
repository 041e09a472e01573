"""Sphinx configuration for calopt's documentation site.

Built with ``sphinx-build -W --keep-going -b html docs docs/_build/html`` (warnings are
errors, in CI too). Sphinx rather than mkdocs: calopt's docstrings already use Sphinx
roles (:class:, :func:, :mod:), which autodoc resolves as cross-references, and
sphinx-gallery runs the examples and keeps the figures they draw. No intersphinx: the
build must work without the network.
"""

from __future__ import annotations

import sys
from pathlib import Path

import calopt

import subprocess

# The command-line reference is generated from the Typer app at every build, so every
# option, default and help text in it is the one ``calopt COMMAND --help`` prints.
# (sphinx-click cannot read it: Typer 0.2x no longer builds on click's classes.)
subprocess.run([sys.executable, "-m", "typer", "calopt_cli.app", "utils", "docs", "--name", "calopt",
                "--title", "Command-line reference",
                "--output", str(Path(__file__).parent / "reference" / "cli.md")], check=True,
               stdout=subprocess.DEVNULL)

project = "calopt"
author = "the calopt developers"
copyright = "the calopt developers"
release = version = calopt.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "benchmarks", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.json", "auto_examples/*.md5"]
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_member_order = "bysource"

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "image_scrapers": ("matplotlib",),
}

html_theme = "pydata_sphinx_theme"
html_title = f"calopt {version}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path: list[str] = []

napoleon_google_docstring = False
napoleon_numpy_docstring = True


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """scikit-learn's generated ``set_*_request`` methods are scikit-learn's, not calopt's."""
    return True if name.startswith("set_") and name.endswith("_request") else skip


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)
