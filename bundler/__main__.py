from __future__ import annotations

from bundler.entry import main

main()
