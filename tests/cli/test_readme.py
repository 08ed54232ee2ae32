"""README.md keeps to the command line it documents (issue 28, item 15): every ``scoctl …``
command the README shows exists, and every ``--option`` shown with it is an option of that
command, of a group above it, or a global one. A renamed or dropped command or option fails
here until the README says the new words."""

from __future__ import annotations

import re
from pathlib import Path

import click
import typer.main

from scoctl.cli.root import app

README = Path(__file__).resolve().parents[2] / "README.md"
SPAN = re.compile(r"`(scoctl [^`]+)`")
LINE = re.compile(r"^\s*(?:\$ )?(scoctl [^#\n]+)", re.M)
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-z])\b")


def shown() -> list[str]:
    """Every command line the README shows: inline code spans, and lines of code blocks."""
    text = README.read_text(encoding="utf-8")
    blocks = "\n".join(re.findall(r"```[a-z]*\n(.*?)```", text, re.S))
    return [*SPAN.findall(text), *LINE.findall(blocks)]


def alternatives(line: str) -> list[str]:
    """``scoctl sim up\\|down [--x]`` is two lines, ``scoctl sim up`` and ``scoctl sim down
    [--x]``; an alternative that starts with an option (``[--once\\|--follow]``) stays part of
    its line."""
    parts = line.split("\\|")
    out = [parts[0]]
    for part in parts[1:]:
        if re.match(r"[a-z]", part):
            stem = out[0].rsplit(" ", 1)[0]
            out.append(f"{stem} {part}")
        else:
            out[-1] += f" {part}"
    return out


def resolve(line: str) -> tuple[list[click.Command], list[str]]:
    """The commands the line walks through (root first) and the options it names."""
    root = typer.main.get_command(app)
    path: list[click.Command] = [root]
    words = line.replace("\\|", " ").split()[1:]
    for word in words:
        here = path[-1]
        if word.startswith(("-", "[", "<", "$")) or not re.fullmatch(r"[a-z][a-z-]*", word):
            if isinstance(here, click.Group) and re.fullmatch(r"[a-z][a-z-]*", word):
                raise AssertionError(f"{line!r}: no command {word!r}")
            if word.startswith("-"):
                continue  # an option: checked below
            break
        if isinstance(here, click.Group):
            ctx = click.Context(here, info_name=here.name)
            found = here.get_command(ctx, word)
            assert found is not None, f"{line!r}: {' '.join(c.name or '' for c in path)} has " \
                                      f"no command {word!r}"
            path.append(found)
        elif path[-1] is not root:
            break  # a positional argument (a token, a workload, a path)
    return path, OPTION.findall(line.replace("\\|", " "))


def test_the_readme_shows_commands_at_all() -> None:
    lines = shown()
    assert len(lines) > 30  # a positive control: the patterns do find the README's commands
    assert any(line.startswith("scoctl run --follow") for line in lines)


def test_every_command_and_option_the_readme_shows_exists() -> None:
    missing: list[str] = []
    for line in (one for many in shown() for one in alternatives(many)):
        path, options = resolve(line)
        known = {opt for command in path for param in command.params
                 for opt in (*param.opts, *param.secondary_opts)} | {"--help", "-h"}
        missing += [f"{line!r}: {opt}" for opt in options if opt not in known]
    assert not missing, "\n".join(missing)


def test_every_command_is_in_the_readmes_command_table() -> None:
    """A new command is documented where operators look for it: a row of the table under
    "Commands" that starts with it."""
    from scoctl.cli.root import COMMAND_MODULES

    text = README.read_text(encoding="utf-8")
    table = text.split("## Commands", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `scoctl ([a-z-]+)", table, re.M)
    assert len(rows) > 10  # a positive control: the table is found
    assert sorted(set(COMMAND_MODULES) - set(rows)) == []
