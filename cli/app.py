"""The ``calopt`` root command: version, error handling, plugin warnings, subcommands.

Every subcommand runs inside :class:`CaloptGroup`, so a :class:`calopt.CaloptError`
raised anywhere in a command (an unknown measure, a bad data file) becomes one line on
stderr and exit code 2, under the console script and under ``typer.testing.CliRunner``
alike. Ctrl-C (KeyboardInterrupt) outside a training loop, which handles it itself,
becomes the line ``calopt: interrupted`` and exit code 130 (files are written atomically,
so nothing is left half-written). Other exceptions are bugs and keep their traceback;
``CALOPT_DEBUG=1`` shows the traceback of known errors and interrupts too.
"""

import inspect
import os
import sys
import warnings
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

import calopt
from calopt import registry
from calopt.errors import CaloptError
from calopt_cli import aggregate, compare, listing, scoring, stream, training

__all__ = ["CaloptGroup", "app", "main", "print_error"]


def _debug() -> bool:
    return os.environ.get("CALOPT_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def print_error(exc: BaseException | str) -> None:
    """Print a known error as the single line ``calopt: error: <message>`` on stderr."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    typer.echo(f"calopt: error: {message}", err=True)


def print_interrupted() -> None:
    """Print the single line ``calopt: interrupted`` on stderr (Ctrl-C outside a training loop)."""
    typer.echo("calopt: interrupted", err=True)


def _is_usage_error(exc: BaseException) -> bool:
    """Whether ``exc`` is click's UsageError (a bad option value, a missing argument, an unknown
    option). Typer vendors click privately (``typer._click``), so the class is recognised by
    its interface rather than imported: exit code 2, a context and ``format_message``."""
    return getattr(exc, "exit_code", None) == 2 and hasattr(exc, "ctx") and hasattr(exc, "format_message")


def _print_load_failures(start: int) -> int:
    """Print the plugin load failures from index ``start`` on; return how many there are."""
    for failure in registry.load_failures[start:]:
        typer.echo(f"calopt: warning: {failure}", err=True)
    return len(registry.load_failures)


def reflowed(text: str | None) -> str | None:
    """A docstring as help text: each paragraph's lines joined into one, so that the help
    re-wraps it to the terminal's width instead of breaking it where the source did."""
    if text is None:
        return None
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in paragraph.splitlines()) for paragraph in paragraphs)


#: What an option without its own metavar shows instead of Python's ``<str>``, ``<int>``...
_TYPE_NAMES = {"<str>": "TEXT", "<int>": "N", "<int range>": "N", "<float>": "NUMBER", "<path>": "FILE"}


class _ReadableHelp:
    """Help that reads well at any width and names values, not Python types.

    The docstring is reflowed; flags (``--help`` too) show no value; an argument shows
    its name in capitals, in the usage line as ``DATA`` (required) or ``[DATA]``
    (optional), not ``{data}``; an option without a ``metavar`` shows TEXT, N, NUMBER or
    FILE instead of ``<str>``, ``<int>``...
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = reflowed(self.help)
        for param in self.params:
            if isinstance(param, TyperArgument):
                param.metavar = param.metavar or param.name.upper()
                param.display_type_rich = lambda ctx: None  # the name says it (no <str>)
            elif param.metavar is None and not getattr(param, "is_flag", False):
                param.metavar = _TYPE_NAMES.get(param.display_type(None), "VALUE")

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:  # --help and the completion flags are added here, not in __init__
            if getattr(param, "is_flag", False):
                param.metavar = ""
        return params


class CaloptCommand(_ReadableHelp, TyperCommand):
    """Every subcommand (see :class:`_ReadableHelp`)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                pieces.append(param.metavar if param.required else f"[{param.metavar}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


class CaloptGroup(_ReadableHelp, TyperGroup):
    """The root group: runs each subcommand with calopt's error and warning handling.

    Plugins are loaded before the subcommand; each plugin that failed to import or
    to register is reported as one ``calopt: warning:`` line, and the command goes on.
    """

    def invoke(self, ctx: Any) -> Any:
        try:
            with warnings.catch_warnings():
                # Reported below as one line each, not as Python warnings.
                warnings.simplefilter("ignore", registry.PluginLoadWarning)
                registry.load_plugins()
                shown = _print_load_failures(0)
                try:
                    return super().invoke(ctx)
                finally:
                    _print_load_failures(shown)
        except CaloptError as exc:
            if _debug():
                raise
            print_error(exc)
            raise typer.Exit(exc.exit_code) from None
        except Exception as exc:
            if not _is_usage_error(exc) or _debug():
                raise
            command = exc.ctx.command_path if exc.ctx is not None else "calopt"
            print_error(f"{exc.format_message()} (see '{command} --help')")
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            if _debug():
                raise
            print_interrupted()
            raise typer.Exit(130) from None


app = typer.Typer(
    name="calopt",
    cls=CaloptGroup,
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"calopt {calopt.__version__}")
        raise typer.Exit()


@app.callback()
def calopt_root(
    version: Annotated[
        Optional[bool],
        typer.Option(
            "--version",
            help="Show calopt's version and exit.",
            callback=_show_version,
            is_eager=True,
        ),
    ] = None,
) -> None:
    """[bold]calopt[/bold]: train linear classifiers for the measure you care about, on CPU or GPU.

    Measures (F-beta, G-mean, Q-mean, ...), losses and algorithms are plugins: see list-measures.
    """


# Subcommands, in the order --help lists them; a new command module adds its lines here.
for _name, _command in [("train", training.train), ("evaluate", training.evaluate), ("predict", training.predict),
                        ("aggregate", aggregate.aggregate), ("compare", compare.compare), ("score", scoring.score),
                        ("list-measures", listing.list_measures), ("list-losses", listing.list_losses),
                        ("list-algorithms", listing.list_algorithms), ("convert", stream.convert)]:
    app.command(_name, cls=CaloptCommand)(_command)


def main() -> None:
    """Console entry point of ``calopt`` (and ``python -m calopt_cli``)."""
    try:
        app(prog_name="calopt")
    except CaloptError as exc:  # raised outside a subcommand (none are expected)
        if _debug():
            raise
        print_error(exc)
        sys.exit(2)
    except KeyboardInterrupt:  # before or after a subcommand runs
        if _debug():
            raise
        print_interrupted()
        sys.exit(130)
