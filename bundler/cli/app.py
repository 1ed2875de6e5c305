"""The command group and ``main``, the one place errors become exit codes."""

from __future__ import annotations

import contextlib
import signal
import sys
import traceback
from typing import NoReturn

import click

from bundler import __version__
from bundler.cli.common import EPILOG_EXIT, _say
from bundler.errors import (
    BundlerError,
)
from bundler.textsafe import shown


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG_EXIT)
@click.version_option(__version__, prog_name="evalbook-bundle")
@click.option("--verbose", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Reproducibility bundles of EvalBook reports and eval-banana runs.

    Export an issued report with everything its verdict rests on into one deterministic
    .tar.zst that is also a BagIt bag, verify it offline, keep it in S3-compatible
    storage, sign its head and prove single cases.
    """
    ctx.obj = {"verbose": verbose}


# ------------------------------------------------------------------------------ main


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where SIGINT raises KeyboardInterrupt.

    A KeyboardInterrupt, so every ``finally`` and ``except BaseException`` that cleans up
    after SIGINT (temporary ``*.partial`` files, half-extracted directories) runs for
    SIGTERM too; ``main`` then exits 143 instead of 130.
    """


def _on_sigterm(signum: int, frame: object) -> None:
    # One is enough: a second SIGTERM must not cut the cleanup the first one started.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


class _EscapedStderr:
    """stderr for Click's own messages, which quote arguments: each line passes ``shown``."""

    def write(self, text: str) -> int:
        sys.stderr.write("\n".join(shown(line) for line in text.split("\n")))
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return False


def _interrupted(exc: BaseException) -> NoReturn:
    terminated = isinstance(exc, Terminated) or isinstance(exc.__cause__, Terminated)
    _say(f"evalbook-bundle: {'terminated' if terminated else 'interrupted'}\n")
    sys.exit(143 if terminated else 130)


def main(argv: list[str] | None = None) -> NoReturn:
    """Run the CLI; BundlerError and Click errors become exit codes here only.

    Error messages name files and values from bundles, stores and runs, so they are
    printed through ``textsafe.shown``. SIGTERM is handled as SIGINT is: the same cleanup
    runs, then the exit code is 143 (SIGINT: 130).
    """
    args = sys.argv[1:] if argv is None else argv
    verbose = "--verbose" in args
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:  # a terminal that is not UTF-8 gets escapes, not a crash
            reconfigure(errors="backslashreplace")
    previous = None
    # ValueError: not the main thread (an embedding test); signals stay as they are.
    with contextlib.suppress(ValueError):
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        cli.main(args=args, prog_name="evalbook-bundle", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort as exc:
        _interrupted(exc)
    except KeyboardInterrupt as exc:  # outside Click's own handling (before or after it)
        _interrupted(exc)
    except click.ClickException as exc:
        exc.show(file=_EscapedStderr())  # type: ignore[arg-type]
        sys.exit(2 if isinstance(exc, click.UsageError | click.BadParameter) else exc.exit_code)
    except BundlerError as exc:
        if verbose:  # the traceback quotes the message too
            _say("".join(shown(line) + "\n" for line in traceback.format_exc().splitlines()))
        _say(f"evalbook-bundle: error: {shown(exc.message)}\n")
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    sys.exit(0)
