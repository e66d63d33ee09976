"""The documentation builds and the README stays a front page.

`mkdocs build --strict` fails on any warning: a page missing from the nav, a link to a page or
an anchor that does not exist, a hook that raises (the CLI reference is generated from
parsim.cli's parser by docs/hooks/cli_reference.py). CI runs it here, through the suite.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_MAX_LINES = 300          # issue 31: the README is a front page; reference material lives in docs/


def test_docs_build_strict(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "--config-file", os.path.join(ROOT, "mkdocs.yml"), "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    cli = (site / "cli" / "index.html").read_text()
    from parsim.cli import build_parser
    import argparse
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():        # every subcommand and every option is on the page
        assert f'id="parsim-{name}"' in cli, name
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings:
                assert f"<code>{flag}</code>" in cli, (name, flag)


def test_readme_is_a_front_page():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move reference material to docs/"


def test_readme_links_resolve():
    """Relative links and images in the README point at files in the repository."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert local, "the README links into docs/"
    missing = [t for t in local if not os.path.exists(os.path.join(ROOT, t))]
    assert not missing, f"README.md links to missing files: {missing}"
