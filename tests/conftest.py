"""Shared fixtures: a fresh DuckDB registry per test and an in-process CLI runner.

`cli(...)` runs the real entry point (`registry.cli.main`, the same one the console script
calls), so exit codes and the one-line error contract are what users get.
"""

import sys
from dataclasses import dataclass

import pytest

from registry.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def db_url(tmp_path, monkeypatch):
    url = f"duckdb:///{tmp_path / 'registry.duckdb'}"
    monkeypatch.setenv("NODEREG_DB", url)
    return url


@pytest.fixture
def cli(capsys, monkeypatch, db_url):
    def run(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["nodereg", *map(str, args)])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def assert_one_line_error(result: Result, *fragments: str) -> None:
    """The error contract: non-zero exit, one line on stderr starting with 'error:', no traceback."""
    assert result.code != 0, result
    lines = [ln for ln in result.err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error:"), result.err
    assert "Traceback" not in result.err
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])
