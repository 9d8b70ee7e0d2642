"""``python -m hf_adaptive_spec.bench ...``."""

from .cli import main

raise SystemExit(main())
