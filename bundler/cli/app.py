"""The command group and ``main``, the one place errors become exit codes."""

from __future__ import annotations

import contextlib
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from bundler.cli.common import EPILOG_EXIT, _emit_json, _say
from bundler.cli.invoked import INVOKED as _INVOKED
from bundler.cli.invoked import option_text
from bundler.core.errors import (
    BundlerError,
)
from bundler.core.textsafe import shown
from bundler.core.version import __version__


class Command(click.Command):
    """Every subcommand: an Examples section in its help, ``--verbose`` accepted after
    the command name too, and its context remembered so that ``main`` can describe a
    failure as a JSON line when ``--json`` was given (SPEC 7)."""

    def __init__(self, *args: Any, examples: Sequence[str] = (), **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EPILOG_EXIT)
        super().__init__(*args, **kwargs)
        self.examples = tuple(examples)
        self.params.append(
            click.Option(
                ["--verbose"],
                is_flag=True,
                expose_value=False,
                help="Show tracebacks for errors (also accepted before the command).",
            )
        )

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.examples:
            with formatter.section("Examples"):
                indent = " " * formatter.current_indent
                width = (formatter.width or 80) - formatter.current_indent - 2
                for example in self.examples:
                    for i, line in enumerate(_shell_lines(example, width)):
                        formatter.write(indent + ("    " if i else "") + line + "\n")
        super().format_epilog(ctx, formatter)

    def invoke(self, ctx: click.Context) -> Any:
        _INVOKED.append(ctx)
        return super().invoke(ctx)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        repeated = repeated_option(self.params, args)
        if repeated is not None:
            raise click.UsageError(f"option {repeated} given twice", ctx=ctx)
        return super().parse_args(ctx, args)


def repeated_option(params: Sequence[click.Parameter], args: Sequence[str]) -> str | None:
    """The first value option given more than once in ``args``, by its first long name.

    Click keeps the last of a repeated option silently; a second trust anchor
    (``--expect-bundle-digest``) or cap would then override the first without a word, so
    every command refuses it, as the JavaScript verifier does (SPEC 8, 15). The scan
    follows Click's parser: ``--x v``, ``--x=v``, ``-x v``, ``-xv``, short flags grouped
    before a short option (``-qx v``), nothing after ``--``. Flags and options that take
    several values (``multiple``) may be given again.
    """
    by_name: dict[str, click.Option] = {}
    for param in params:
        if isinstance(param, click.Option):
            for name in (*param.opts, *param.secondary_opts):
                by_name[name] = param
    seen: set[str] = set()
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            continue
        if arg.startswith("--"):
            name, equals, _ = arg.partition("=")
            found: list[tuple[click.Option | None, bool]] = [(by_name.get(name), bool(equals))]
        else:
            found = []
            for at, char in enumerate(arg[1:], start=1):
                option = by_name.get("-" + char)
                found.append((option, at + 1 < len(arg)))
                if option is None or not _takes_value(option):
                    continue
                break
        for option, inline in found:
            if option is None or not _takes_value(option):
                continue
            if not inline:
                i += option.nargs
            if option.multiple:
                continue
            if option.name in seen:
                longs = [o for o in option.opts if o.startswith("--")]
                return (longs or option.opts)[0]
            seen.add(option.name or "")
    return None


def _takes_value(option: click.Option) -> bool:
    return not option.is_flag and not option.count


def _shell_lines(command: str, width: int) -> list[str]:
    """A long example command broken at spaces with shell line continuations."""
    lines: list[str] = []
    current = ""
    for word in command.split(" "):
        if current and len(current) + 1 + len(word) > width - 2:
            lines.append(current + " \\")
            current = word
        else:
            current = f"{current} {word}" if current else word
    return [*lines, current]


class Group(click.Group):
    command_class = Command


@click.group(
    cls=Group,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EPILOG_EXIT,
)
@click.version_option(__version__, prog_name="evalbook-bundle")
@click.option("--verbose", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Reproducibility bundles of EvalBook reports and eval-banana runs.

    Export an issued report with everything its verdict rests on into one deterministic
    .tar.zst that is also a BagIt bag, verify it offline, keep it in S3-compatible
    storage, sign its head and prove single cases.

    \b
    Examples:
      evalbook-bundle reports --store fixtures/stores/main
      evalbook-bundle export --store STORE --report rpt-x --principal bob
      evalbook-bundle verify evalbook-bundle-rpt-x.tar.zst
      evalbook-bundle verify --json *.tar.zst | jq .verdict
      evalbook-bundle COMMAND --help

    Results go to stdout (one JSON object per line with --json), progress and errors
    to stderr. Shell completion: eval "$(_EVALBOOK_BUNDLE_COMPLETE=bash_source
    evalbook-bundle)" (zsh_source, fish_source for other shells).
    """
    ctx.obj = {"verbose": verbose}


def _json_requested(args: list[str]) -> bool:
    """--json was asked for: by the command that ran, or on a line Click refused."""
    if _INVOKED:
        return bool(_INVOKED[-1].params.get("as_json"))
    return "--json" in args


# How much of a value an error object repeats as its input: a path fits; a pasted
# flood does not fill the line.
_INPUT_CHARS = 1024


def _shown_value(value: Any) -> str:
    text = str(value[0] if isinstance(value, tuple) else value)
    return text if len(text) <= _INPUT_CHARS else text[:_INPUT_CHARS] + "..."


def _failure_json(
    args: list[str],
    message: str,
    code: int,
    option: str | None = None,
    concerned: click.Parameter | None = None,
) -> None:
    """The JSON Lines form of a failure (SPEC 7): the error, its exit code and the input
    it concerns. That is, in this order: the value given to the parameter the error
    names (``--exported-at 1969-...``: that time), the option Click refused, or the
    command's input: its first argument, else its first required option (``--store``)."""
    command = None
    concerns: Any = None
    if _INVOKED:
        ctx = _INVOKED[-1]
        command = ctx.info_name
        if concerned is not None:
            value = ctx.params.get(concerned.name or "")
            if value not in (None, (), ""):
                concerns = _shown_value(value)
            elif isinstance(concerned, click.Option):
                concerns = max(concerned.opts, key=len)
        if concerns is None:
            concerns = option
        if concerns is None:
            concerns = _primary_input(ctx)
    else:
        command = next((a for a in args if not a.startswith("-")), None)
        concerns = option
    _emit_json(
        {
            "schema": "evalbook.error.v1",
            "command": command,
            "error": message,
            "exit_code": code,
            "input": concerns,
        }
    )


def _primary_input(ctx: click.Context) -> str | None:
    """The command's input: its first argument given, else its first required option
    given (``reports --store``, ``export --store``), else the bundle an option names
    (``import-inspect --check BUNDLE``)."""
    params = ctx.command.params
    options = [p for p in params if isinstance(p, click.Option)]
    for param in [
        *(p for p in params if isinstance(p, click.Argument)),
        *(p for p in options if p.required),
        *(p for p in options if p.metavar == "BUNDLE"),
    ]:
        value = ctx.params.get(param.name or "")
        if value not in (None, (), ""):
            return _shown_value(value)
    return None


# The library's parameter names that the commands' options spell otherwise.
_PARAM_ALIASES = {
    "store": ("store_root",),
    "key": ("sign_key", "key_path"),
    "upload": ("upload_to",),
    "project": ("project_root",),
    "run_dir": ("run_dir",),
    "case_id": ("case_id",),
    "proof": ("proof_file",),
    "prefix": ("prefix", "destination"),
    "url": ("source",),
    "dest": ("path",),
    "record_file": ("result",),
    "bundles": ("bundles",),
    "bundle_key": ("retire",),
}


def _concerned(exc: BundlerError) -> click.Parameter | None:
    """The command's parameter that carries the library parameter ``exc`` names."""
    if exc.param is None or not _INVOKED:
        return None
    names = {exc.param, *_PARAM_ALIASES.get(exc.param, ())}
    for param in _INVOKED[-1].command.params:
        if param.name in names:
            return param
    return None


def _option_label(name: str) -> str | None:
    """How the running command spells the library parameter ``name``, or None."""
    if not _INVOKED:
        return None
    names = {name, *_PARAM_ALIASES.get(name, ())}
    for param in _INVOKED[-1].command.params:
        if param.name in names:
            if isinstance(param, click.Argument):
                return param.human_readable_name
            return max(param.opts, key=len, default=None)
    return None


def message_of(exc: BundlerError) -> str:
    """The error's one line as the command line says it (``_message``)."""
    return _message(exc)


def _message(exc: BundlerError) -> str:
    """The error's message, a library parameter named as the command's option spells it
    (``exported_at`` as ``--exported-at``, ``bundle`` as ``BUNDLE``, ``max_bytes``
    inside the text as ``--max-bytes``)."""
    return option_text(_labelled(exc))


def _labelled(exc: BundlerError) -> str:
    if exc.bare_message is not None:
        return exc.bare_message  # the command's argument is the file it names
    if exc.parts is not None:
        return exc.spelled(_option_label)
    param = _concerned(exc)
    if param is None:
        return exc.message
    if isinstance(param, click.Argument):
        return exc.relabel(param.human_readable_name)
    longest = max(param.opts, key=len, default=None)
    if longest is not None:
        return exc.relabel(longest)
    return exc.message


# ------------------------------------------------------------------------------ main


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where SIGINT raises KeyboardInterrupt.

    A KeyboardInterrupt, so every ``finally`` and ``except BaseException`` that cleans up
    after SIGINT (temporary ``*.partial`` files, half-extracted directories) runs for
    SIGTERM too; ``main`` then exits 143 instead of 130.
    """

    signum = signal.SIGTERM


_ANSWERED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _on_sigterm(signum: int, frame: object) -> None:
    # One is enough: a second SIGTERM (or SIGHUP) must not cut the cleanup the first one
    # started.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
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
    _INVOKED.clear()  # an embedding caller may run main more than once
    verbose = "--verbose" in args
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:  # a terminal that is not UTF-8 gets escapes, not a crash
            reconfigure(errors="backslashreplace")
    previous = None
    previous_hup = None
    previous_mask = None
    # ValueError: not the main thread (an embedding test); signals stay as they are.
    with contextlib.suppress(ValueError):
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        # A hang-up asks the command to end, as SIGTERM does: the same cleanup, exit 143
        # (unless the caller chose to ignore it, as nohup does).
        if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
            previous_hup = signal.signal(signal.SIGHUP, _on_sigterm)
        # A handler for a signal the parent left blocked would never run: the signals the
        # command answers are unblocked for its run (an ignored one stays ignored).
        previous_mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, _ANSWERED)
    try:
        cli.main(args=args, prog_name="evalbook-bundle", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort as exc:
        _interrupted(exc)
    except KeyboardInterrupt as exc:  # outside Click's own handling (before or after it)
        _interrupted(exc)
    except click.ClickException as exc:
        code = 2 if isinstance(exc, click.UsageError | click.BadParameter) else exc.exit_code
        if _json_requested(args):
            # With --json, stderr carries the one error line, not Click's usage block.
            _say(f"evalbook-bundle: error: {shown(exc.format_message())}\n")
            param = getattr(exc, "param", None)
            option = param.opts[0] if param is not None and param.opts else None
            option = option or getattr(exc, "option_name", None)
            _failure_json(args, exc.format_message(), code, option)
        else:
            exc.show(file=_EscapedStderr())  # type: ignore[arg-type]
        sys.exit(code)
    except BundlerError as exc:
        if verbose:  # the traceback quotes the message too
            _say("".join(shown(line) + "\n" for line in traceback.format_exc().splitlines()))
        message = _message(exc)
        _say(f"evalbook-bundle: error: {shown(message)}\n")
        if _json_requested(args):
            _failure_json(args, message, exc.exit_code, concerned=_concerned(exc))
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    except OSError as exc:
        # A local file the command could not read or write that no layer below named
        # (a full temporary directory, a disk gone): one line naming it, exit 3, never a
        # traceback, and never 1, which says a bundle failed.
        where = exc.filename if exc.filename is not None else "a local file"
        message = f"{where}: {exc.strerror or exc}"
        _say(f"evalbook-bundle: error: {shown(message)}\n")
        if _json_requested(args):
            _failure_json(args, message, 3)
        sys.exit(3)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if previous_hup is not None:
            signal.signal(signal.SIGHUP, previous_hup)
        if previous_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
    sys.exit(0)
