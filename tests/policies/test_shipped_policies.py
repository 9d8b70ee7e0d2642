"""The policies shipped in the package are exactly what their committed recipes trained.

``results/README.md`` measures the training outputs in ``artifacts/``; the package carries copies of
them and their cards. A retrained policy copied into one place and not the other would make the
shipped checkpoint differ from the measured one, so the copies are compared byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hf_adaptive_spec.checkpoints import shipped_checkpoint
from hf_adaptive_spec.policies.serialization import AutoDraftPolicy

REPOSITORY = Path(__file__).resolve().parents[2]
#: shipped name -> the training output it copies (recipe: trainers/recipes/<recipe>.yaml)
TRAINED_AS = {
    "ltd": "artifacts/ltd-smollm2-skip",  # ltd_smollm2_skip.yaml
    "resps": "artifacts/resps-smollm2-plain-benchfit",  # resps_smollm2_plain.yaml, bench-fitted profile
    "radar": "artifacts/radar-smollm2-skip",  # radar_smollm2_skip.yaml
}


@pytest.mark.parametrize("name", sorted(TRAINED_AS))
def test_shipped_policy_is_the_measured_training_output(name: str):
    shipped, trained = shipped_checkpoint(name), REPOSITORY / TRAINED_AS[name]
    for file_name in ("config.json", "model.safetensors", "README.md"):
        assert (shipped / file_name).read_bytes() == (trained / file_name).read_bytes(), (
            f"{shipped / file_name} differs from {trained / file_name}: copy the retrained policy and its card into the package"
        )
    assert type(AutoDraftPolicy.from_pretrained(shipped)) is type(AutoDraftPolicy.from_pretrained(trained))
