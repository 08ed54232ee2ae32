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
# --- the README's other checkable claims (issue 49 item 10) ---------------------------------

REPO = README.parent
DEMO_CONFIG = REPO / "scoctl" / "data" / "demo.yaml"
CONFIG_PATH = re.compile(r"^([a-z_]+(?:\[\])?(?:\.[a-z_]+(?:\[\])?)*)(?:: .*)?$")
# spans that look like config paths but name a simulated scenario's keys
SCENARIO_KEYS = {"kubernetes.deployments[]": "deployments",
                 "kubernetes.pod_groups[]": "pod_groups",
                 "kubernetes.inference_services[]": "inference_services"}


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def config_paths() -> list[str]:
    """The dotted names in code spans (`timeouts.idle`, `regions[].launch`, `key: value`)
    whose first part is a top-level config field, or a field of `disruption` (the README
    writes `drift.halt_after` for `disruption.drift.halt_after`)."""
    from scoctl.config.schema import FIELDS

    out = []
    for span in re.findall(r"`([^`\n]+)`", readme_text()):
        found = CONFIG_PATH.match(span)
        if found is None or span in SCENARIO_KEYS:
            continue
        path = found.group(1)
        first = path.split(".")[0].removesuffix("[]")
        if "." not in path and ": " not in span:
            continue  # a bare word: too many of them are not config fields
        if first in FIELDS[()] or first in FIELDS[("disruption",)]:
            out.append(path)
    return out


def resolves(path: str) -> bool:
    """Whether every part of `path` is a field the config accepts, from the top level or from
    the `disruption` section."""
    from scoctl.config.schema import FIELDS

    for start in ((), ("disruption",)):
        where: tuple[str, ...] = start
        for part in path.split("."):
            name = part.removesuffix("[]")
            if (*where, "*") in FIELDS:  # a mapping keyed by name (contracts, tiers)
                where = (*where, "*")
                continue
            if name not in FIELDS.get(where, frozenset()):
                break
            where = (*where, name) + (("[]",) if part.endswith("[]") else ())
        else:
            return True
    return False


def test_every_config_field_the_readme_names_is_one_the_config_accepts() -> None:
    paths = config_paths()
    assert len(paths) > 40  # a positive control: the pattern finds the README's fields
    assert {"timeouts.api", "disruption.budgets", "regions[].launch"} <= set(paths)
    assert [p for p in paths if not resolves(p)] == []
    parser = (REPO / "scoctl" / "sim" / "scenario.py").read_text(encoding="utf-8")
    for key in SCENARIO_KEYS.values():  # keys of a simulated scenario, as its parser reads
        assert f'"{key}"' in parser


def test_the_demo_config_scenario_and_plan_are_what_the_readme_says(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from scoctl.config.schema import load_config
    from scoctl.sim.scenario import load_scenario

    text = " ".join(readme_text().split())  # README's lines joined: phrases span line breaks
    config = load_config(DEMO_CONFIG)
    groups = {p.group for p in config.pools}
    quoted = re.findall(r"(\d+) (?:eligible )?pools in (\d+) (?:correlation )?groups", text)
    assert len(quoted) >= 2 and set(quoted) == {(str(len(config.pools)), str(len(groups)))}
    # the seed: 42 pending pods of orders-daily, 4 vCPU / 16 GiB each; one claim of their sum
    seed = load_scenario(None).deployments[0]
    pods, cpu, gib = re.search(r"(\d+) pending pods of `orders-daily`, (\d+) vCPU / (\d+) GiB "
                               r"each", text).groups()
    assert (seed.workload, seed.replicas) == ("orders-daily", int(pods))
    assert dict(seed.requests) == {"cpu": int(cpu) * 1000, "memory": int(gib) * 2**30}
    assert f"one claim of {int(pods) * int(cpu)} vCPU · {int(pods) * int(gib)} GiB" in text
    # the demo's timeouts and budget, as the walk-through names them
    assert "the demo's 30 s idle timeout" in text and config.timeouts.idle == 30
    assert "`timeouts.notice_poll` (5 s)" in text and config.timeouts.notice_poll == 5
    assert "half of the units" in text
    assert [(b.units.amount, b.units.percent, b.reasons) for b in config.disruption.budgets] \
        == [(50, True, frozenset())]
    # the demo and its config speak of the budget in today's words, not the legacy field's
    for path in (DEMO_CONFIG, REPO / "scripts" / "demo"):
        assert "disruption_budget" not in path.read_text(encoding="utf-8"), path
    # the plan README shows: its claims file, planned with the demo config
    claims = re.search(r"cat > claims.yaml <<'YAML'\n(.*?)YAML\n", readme_text(), re.S)
    assert claims is not None
    (tmp_path / "claims.yaml").write_text(claims.group(1), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "scoctl", "--config", str(DEMO_CONFIG),
                           "--state", str(tmp_path / "s.db"), "plan", "--claims",
                           "claims.yaml", "--dry-run", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)["workloads"][0]
    units, pools, floor, pool_cap, group_cap = re.search(
        r"the planner commits (\d+) units in (\d+) pools \((\d+)% on committed capacity, no "
        r"reclaimable pool above (\d+)%, no group above (\d+)%\)", text).groups()
    assert sum(p["units"] for p in plan["pools"]) == int(units)
    assert len(plan["pools"]) == int(pools)
    committed = sum(p["share"] for p in plan["pools"] if p["tier"] == "committed")
    assert round(committed * 100) == int(floor)
    assert max(p["share"] for p in plan["pools"] if p["tier"] == "reclaimable") \
        <= int(pool_cap) / 100
    shares: dict[str, float] = {}
    for p in plan["pools"]:
        if p["tier"] == "reclaimable":
            shares[p["group"]] = shares.get(p["group"], 0.0) + p["share"]
    assert max(shares.values()) <= int(group_cap) / 100
