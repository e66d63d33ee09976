"""mkdocs hook: the CLI reference page (cli.md), generated from parsim.cli's argparse parser.

Registered under `hooks:` in mkdocs.yml. At every build it walks `parsim.cli.build_parser()` and
writes each subcommand's usage and options as markdown, so the page cannot drift from the code:
a flag added to parsim/cli appears in the next build. `python docs/hooks/cli_reference.py` prints
the page.
"""

from __future__ import annotations

import argparse
import os
import sys

PAGE = "cli.md"
_WIDTH = 100      # usage lines wrap at a fixed width, so the page is the same on every terminal


def _root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cell(text: str) -> str:
    """One markdown table cell: pipes escaped, line breaks folded."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    return ", ".join(f"`{s}`" for s in action.option_strings)


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""                                          # a switch
    if action.choices is not None:
        return " \\| ".join(f"`{c}`" for c in action.choices)
    if action.metavar:
        return f"`{action.metavar}`"
    return f"`{action.dest.upper()}`" if action.option_strings else ""


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.required:
        return ""
    return f"`{action.default}`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if action.dest == "json" and not action.help:
        return "print the same content as JSON on stdout"
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    text = parser._get_formatter()._expand_help(action)    # %(default)s and the like, as --help shows them
    if action.required and action.option_strings:
        text = "required. " + text
    return _cell(text)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def cli_reference_markdown() -> str:
    """The whole CLI reference page, from parsim.cli's parser."""
    if _root() not in sys.path:
        sys.path.insert(0, _root())
    from parsim.cli import build_parser

    parser = build_parser()
    sub = _subparsers(parser)
    summary = {a.dest: a.help for a in sub._choices_actions}
    lines = [
        "# CLI reference",
        "",
        "<!-- Generated at build time by docs/hooks/cli_reference.py from parsim.cli.build_parser(); "
        "do not edit. -->",
        "",
        "This page is generated from the command-line parser itself (`parsim.cli.build_parser`), "
        "so it lists exactly the options the installed code accepts. Every command takes "
        "`--json`, and bad input prints one line naming the file or flag and exits "
        "with code 2. `parsim plan` exits with code 3 when no plan fits memory.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    lines += [f"| [`parsim {name}`](#parsim-{name}) | {_cell(summary.get(name, ''))} |" for name in sub.choices]
    for name, p in sub.choices.items():
        p.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=_WIDTH)
        usage = p.format_usage().strip()
        if usage.startswith("usage: "):        # drop the prefix and the indent it gave wrapped lines
            usage = "\n".join(line[len("usage: "):] if line.startswith(" " * len("usage: ")) else line
                              for line in usage[len("usage: "):].splitlines())
        what = _cell(summary.get(name, ""))
        lines += ["", f"## parsim {name}", "", what[:1].upper() + what[1:] + ".", "",
                  "```text", usage, "```", "",
                  "| argument | value | default | description |", "|---|---|---|---|"]
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            lines.append(f"| {_flags(action)} | {_value(action)} | {_default(action)} | {_help(p, action)} |")
    lines += ["", "`torchrun --nproc-per-node N -m parsim.run plan.json [options]` takes the options of "
                  "`parsim run` above but `--nproc` (torchrun starts the processes; see "
                  "[the executor](executor.md#launchers))."]
    return "\n".join(lines) + "\n"


def on_files(files, config):
    """mkdocs event: add the generated page to the build."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=cli_reference_markdown()))
    return files


if __name__ == "__main__":
    sys.stdout.write(cli_reference_markdown())
