"""calopt's command line (the ``calopt`` console script; ``python -m calopt_cli``).

Thin Typer commands over the library: they parse options, call calopt, and print a
rich table on the terminal or JSON (``--json``) on stdout. No numerics live here.
"""

import sys


def main() -> None:
    """Console entry point: imports the app (numpy, the plugins: a moment) and runs it.

    The import is inside the function so that a Ctrl-C while it runs is the same one
    line and exit 130 as a Ctrl-C during a command, not a traceback.
    """
    try:
        from calopt_cli.app import main as run
    except KeyboardInterrupt:
        sys.stderr.write("calopt: interrupted\n")
        sys.exit(130)
    run()
