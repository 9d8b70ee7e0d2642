"""EAGLE-3 drafter tests (a package, so its conftest does not shadow tests/conftest.py)."""
