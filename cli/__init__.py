"""calopt's command line (the ``calopt`` console script; ``python -m calopt_cli``).

Thin Typer commands over the library: they parse options, call calopt, and print a
rich table on the terminal or JSON (``--json``) on stdout. No numerics live here.
"""
