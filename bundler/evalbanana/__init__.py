"""eval-banana runs: the run reader and its conventions, export, verification."""
