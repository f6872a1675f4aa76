"""The README and the docs/ pages it links, held to what the code does: every page linked, every link and anchor
resolves, every `bench` command shown parses with that command's own options, every Python block runs (or is the
file it names, verbatim), the YAML shown is the workflow's own step, the lists of JSON tables and keyword names are
the schema's and the adapter's, and the sentence the README quotes is what `bench compare` says of that fixture.
The walk-through's files and commands run in tests/cli/test_readme_own_kernel.py, the main job in
tests/capture/test_readme_main_job.py."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import typer

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))  # docs/experiments/ holds reports of past work, not pages
TEXTS = {p: p.read_text() for p in [README, *PAGES]}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", FENCE.sub("", text), flags=re.M)}


def test_the_readme_is_short_and_links_every_page():
    text = TEXTS[README]
    assert len(text.splitlines()) <= 250
    for page in PAGES:
        assert f"](docs/{page.name})" in text, f"README does not link docs/{page.name}"


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", TEXTS[page])):
        if re.match(r"[a-z]+:", target):
            continue  # an address, not a file of this repository
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in _anchors(dest.read_text()), f"{page.name}: {target}: no such heading"


def _commands() -> list[tuple[str, str]]:
    """(page, command) of every `bench` command line the pages show: in ```sh blocks and indented code."""
    out = []
    for page, text in TEXTS.items():
        lines = [ln for lang, body in FENCE.findall(text) if lang in ("sh", "bash", "")
                 for ln in body.replace("\\\n", " ").splitlines()]
        lines += [ln[4:] for ln in FENCE.sub("", text).replace("\\\n", " ").splitlines() if ln.startswith("    ")]
        for ln in lines:
            ln = ln.strip().removeprefix(".venv/bin/")
            if ln.startswith("bench "):
                out.append((page.name, ln.split("  #")[0]))
    return out


COMMANDS = _commands()


def test_the_pages_show_commands():
    assert len(COMMANDS) >= 10 and {p for p, _ in COMMANDS} >= {"README.md", "multigpu.md", "kernels.md", "workloads.md"}


@pytest.mark.parametrize("page, command", COMMANDS, ids=[f"{p}: {c[:60]}" for p, c in COMMANDS])
def test_every_command_parses_with_its_own_options(page, command, monkeypatch):
    """Parsed as `bench` would parse it (every option known to that command, every value of its type and accepted by
    its callback), without running it: a renamed or removed flag fails here."""
    from harness.cli import app

    monkeypatch.chdir(ROOT)  # paths in the pages are relative to the repository
    args = shlex.split(command.replace("...", ""))[1:]
    group = typer.main.get_command(app)
    ctx = group.make_context("bench", list(args))
    cmd, rest = group, list(args)
    while hasattr(cmd, "resolve_command"):  # a group (typer's own click: no click.Group to test against)
        name, cmd, rest = cmd.resolve_command(ctx, rest)
        assert cmd is not None, f"{page}: {command}: no command {name}"
        if "--" in rest:  # `bench slurm ... -- SUITE`: the suite is bench sustained's options, parsed by sustained
            rest, suite = rest[:rest.index("--")], rest[rest.index("--") + 1:]
            group.commands["sustained"].make_context("sustained", suite, parent=ctx)
        ctx = cmd.make_context(name, rest, parent=ctx)
    assert ctx.command is cmd


def test_an_unknown_option_would_fail_the_parse():
    """The check above is not vacuous: a flag the command lacks is refused by the same parse."""
    from harness.cli import app

    group = typer.main.get_command(app)
    ctx = group.make_context("bench", ["sustained", "--no-such-flag"])
    name, cmd, rest = group.resolve_command(ctx, ["sustained", "--no-such-flag"])
    with pytest.raises(Exception) as info:
        cmd.make_context(name, rest, parent=ctx)
    assert type(info.value).__name__ == "NoSuchOption"


def _python_blocks():
    return [(page.name, body) for page, text in TEXTS.items() for lang, body in FENCE.findall(text) if lang == "python"]


@pytest.mark.parametrize("page, body", _python_blocks(), ids=lambda x: x if isinstance(x, str) and len(x) < 30 else "")
def test_every_python_block_runs_or_is_the_file_it_names(page, body):
    first = body.splitlines()[0]
    named = first.removeprefix("# ").strip() if first.startswith("# ") and first.endswith(".py") else None
    if named and "/" in named:  # an excerpt of a file of this repository: verbatim
        source = (ROOT / named).read_text()
        for part in body.split("\n\n\n")[0:]:
            chunk = "\n".join(ln for ln in part.splitlines() if ln != first).strip()
            assert chunk in source, f"{page}: the block is not {named} as it is:\n{chunk[:200]}"
    elif named:  # a file the walk-through writes and runs: tests/cli/test_readme_own_kernel.py
        compile(body, named, "exec")
    else:
        exec(compile(body, f"<{page}>", "exec"), {"__name__": "docs_example"})  # noqa: S102


def test_the_yaml_shown_is_the_pr_workflows_own_step():
    yaml = pytest.importorskip("yaml")
    (block,) = [body for lang, body in FENCE.findall(TEXTS[ROOT / "docs" / "history.md"]) if lang == "yaml"]
    (shown,) = yaml.safe_load(block)
    steps = yaml.safe_load((ROOT / "ci" / "pr-history.yml").read_text())["jobs"]["against-history"]["steps"]
    assert shown in steps


def test_the_json_tables_listed_are_the_schemas():
    from harness.report import FIGURES_SCHEMA

    tables = set(json.loads(FIGURES_SCHEMA.read_text())["properties"]["tables"]["properties"])
    output = TEXTS[ROOT / "docs" / "output.md"]
    listed = set(re.findall(r"^\| `(\w+)` \|", output[output.index("| table | written by |"):], flags=re.M))
    assert listed == tables
    readme = TEXTS[README]
    line = readme[readme.index("`--json PATH` / `--csv PATH`"):readme.index("[docs/output.md]")]
    assert set(re.findall(r"`(\w+)`", line)) >= tables | {"kernels"}


def test_the_keyword_names_listed_are_the_ones_a_plain_function_receives():
    from harness.kernels._callable_names import KEYWORD_GROUPS

    text = TEXTS[ROOT / "docs" / "workloads.md"]
    table = text[text.index("| what | names accepted | type |"):].split("\n\n")[0]
    listed = {n for row in table.splitlines()[2:] for n in re.findall(r"`(\w+)`", row.split("|")[2])}
    passed = {n for what, names in KEYWORD_GROUPS if not what.startswith("FP8") for n in names}
    assert listed == passed


def test_the_sentence_the_readme_quotes_is_what_compare_says():
    from harness.analysis import explain_comparison
    from harness.report import build_report
    from harness.results import read_run

    readme = TEXTS[README]
    quoted = " ".join(ln.removeprefix("> ") for ln in readme.splitlines() if ln.startswith("> "))
    run = read_run(ROOT / "tests" / "fixtures" / "h200" / "20261130-043801-smollm2-217172")
    summary = build_report(run, figures=False, kernel_pairs=(("sdpa-cudnn", "sdpa-flash"),)).summary
    said = [" ".join(s.split()) for s in explain_comparison(summary.kernels).sentences]
    assert " ".join(quoted.split()) in said


def test_pointers_from_the_code_to_the_docs_resolve():
    """`docs/<page>.md` named in a docstring or comment of the code, the CI files or the tests exists, and a section
    named after it in quotes ("Workloads") is a heading there."""
    found = 0
    for path in [*ROOT.glob("harness/**/*.py"), *ROOT.glob("kernels_under_test/*.py"), *ROOT.glob("ci/*"),
                 *ROOT.glob("tests/**/*.py")]:
        text = path.read_text(errors="replace")
        for page, section in re.findall(r"docs/([\w-]+\.md)(?:[,:] \"([^\"]+)\")?", text):
            found += 1
            assert (ROOT / "docs" / page).is_file(), f"{path.relative_to(ROOT)} points to docs/{page}"
            if section:  # the heading it names, or one that begins with it
                anchors = _anchors((ROOT / "docs" / page).read_text())
                assert any(a.startswith(_slug(section)) for a in anchors), (path, page, section)
    assert found >= 10
