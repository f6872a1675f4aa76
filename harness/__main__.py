"""`python -m harness COMMAND ...`: the same as `bench COMMAND ...`."""

from harness.cli import main

main()
