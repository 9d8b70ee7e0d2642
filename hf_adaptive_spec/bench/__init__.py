"""Spec-Bench style benchmark of decoding methods (greedy or sampling): ``hf-adaptive-spec bench``.

See ``README.md`` in this folder for the command, the methods and the JSON schema.
"""
