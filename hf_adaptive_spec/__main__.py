"""``python -m hf_adaptive_spec COMMAND ...``: the ``hf-adaptive-spec`` command (:mod:`hf_adaptive_spec.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
