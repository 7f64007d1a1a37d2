"""The Chromium every browser check drives: Debian's own (never one Playwright downloads),
chosen by the same flag, checked and launched the same way."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

BASE_ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]


def add_argument(parser: argparse.ArgumentParser) -> None:
    """Adds `--chromium PATH` (default: $ISOBENCH_CHROMIUM, else chromium on PATH)."""
    parser.add_argument("--chromium", metavar="PATH",
                        default=os.environ.get("ISOBENCH_CHROMIUM") or shutil.which("chromium")
                        or "/usr/bin/chromium",
                        help="the Chromium to run (default: $ISOBENCH_CHROMIUM, else chromium "
                             "on PATH)")


def missing(path: str, prog: str) -> bool:
    """True, after saying so on stderr, when there is no Chromium at `path`."""
    if Path(path).exists():
        return False
    print(f"{prog}: no Chromium at {path}; install Debian's chromium package or pass "
          "--chromium PATH", file=sys.stderr)
    return True


def launch(playwright, path: str, extra_args: list[str] | None = None):
    """Headless Chromium at `path` with the base flags and `extra_args`."""
    return playwright.chromium.launch(executable_path=path, headless=True,
                                      args=BASE_ARGS + (extra_args or []))
