"""`python -m harness.cli COMMAND ...`: the `bench` command without its console script (any PATH)."""

from harness.cli import main

main()
