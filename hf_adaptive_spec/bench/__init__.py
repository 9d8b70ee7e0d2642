"""Spec-Bench style benchmark of greedy decoding methods: ``hf-adaptive-spec bench``.

See ``README.md`` in this folder for the command, the methods and the JSON schema.
"""
