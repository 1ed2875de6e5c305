from __future__ import annotations

from bundler.cli import main

main()
