"""A kernel module that calls sys.exit(0) when imported (issue 31): the run must say so, not exit 0."""

import sys

sys.exit(0)


def attention(q, k, v, is_causal=True, scale=None):  # never reached
    return q
