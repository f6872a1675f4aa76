"""`python -m harness.multigpu --gpus all [--replicate] -- <bench sustained options>`.

The same as `bench sustained --gpus ... [--replicate]` once cli.py has those options; this entry point runs
the multi-GPU path without them (the suite is parsed by `bench sustained`'s own options, after `--`).
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    import typer

    from harness._cli_multigpu import _fail, run_multi_and_render, sustained_config
    from harness.errors import HarnessError

    argv = list(sys.argv[1:] if argv is None else argv)
    ours, rest = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(prog="python -m harness.multigpu", description=__doc__.split("\n")[0])
    parser.add_argument("--gpus", default="all", help="all, indices (0,2) or PCI bus ids")
    parser.add_argument("--replicate", action="store_true", help="the whole suite on every GPU (GPU-to-GPU spread)")
    args = parser.parse_args(ours)
    try:
        try:
            config = sustained_config(rest)
            if config is None:
                return 2
            run_multi_and_render(config, gpus=args.gpus, replicate=args.replicate,
                                 command=" ".join(["python -m harness.multigpu", *argv]))
        except HarnessError as exc:
            _fail(exc)
    except typer.Exit as exc:
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
