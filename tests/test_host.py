"""The in-process adapter to lmms-eval models (:mod:`lmms_genbench.host`)."""

import lmms_eval.models
import pytest

# Model identities key artifact stores and call caches on users' disks: these
# strings were computed with the code before the adapter existed and must not move.
PINNED_IDENTITIES = [
    ("llava_hf", {"pretrained": "llava-hf/llava-1.5-7b-hf", "device": "cuda", "batch_size": 4},
     "llava_hf-llava-hf_llava-1.5-7b-hf-f114cc7c-91bf6482"),
    # an absolute path: its folder name, not the whole path
    ("llava_hf", {"pretrained": "/models/tiny-llava/", "dtype": "float32", "device_map": "cpu"},
     "llava_hf-tiny-llava-2bc83de0-56a2b5e5"),
    # credentials never enter the identity
    ("openai", {"model_version": "gpt-4o", "api_key": "SECRET"}, "openai-gpt-4o-57a2032f-30c2c89d"),
    ("dummy", {"response": "x"}, "dummy-dummy-ebbe2dfb-58e3fa9b"),
]


class _Built:
    """Stands in for a registered lmms-eval model class: records its arguments."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


@pytest.fixture
def fake_registry(monkeypatch):
    names = []

    def get_model(name, *a, **kw):
        names.append(name)
        return _Built

    monkeypatch.setattr(lmms_eval.models, "get_model", get_model)
    return names


@pytest.mark.parametrize("name, args, expected", PINNED_IDENTITIES)
def test_builders_keep_their_identity_strings(fake_registry, name, args, expected):
    from lmms_genbench.autobench.examiner import build_examiner
    from lmms_genbench.models.cycle import build_describer

    describer = build_describer(name, dict(args))
    examiner = build_examiner(name, dict(args))
    assert describer.name == expected and examiner.name == expected
    assert describer.lm.kwargs == args and examiner.lm.kwargs == args  # every argument reaches the model
    assert fake_registry == [name, name]
