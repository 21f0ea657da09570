"""Keys given in --model_args (core/secrets.py, issue 43): found by their key's name, masked by
name in a --model_args string and by value in any text once remembered."""

from lmms_genbench.core import state
from lmms_genbench.core.secrets import MASK, mask_model_args, remember, scrub, secret_args

KEY = "sk-cmdline-0123456789abcdef"


def test_secret_keys_are_found_by_their_name_not_by_a_word_inside_it():
    args = (f"preset=smoke,describer=openai,describer.api_key={KEY},token=abcdefgh12,generator.hf_token=hf_x,"
            "describer.max_new_tokens=64,key_frames=3,describer.apikey=zz,password=")
    assert secret_args(args) == {"describer.api_key": KEY, "token": "abcdefgh12", "generator.hf_token": "hf_x",
                                 "describer.apikey": "zz"}
    assert mask_model_args(args) == (f"preset=smoke,describer=openai,describer.api_key={MASK},token={MASK},"
                                     f"generator.hf_token={MASK},describer.max_new_tokens=64,key_frames=3,"
                                     f"describer.apikey={MASK},password=")


def test_a_remembered_key_is_masked_by_value_whatever_its_shape():
    state.reset()
    plain = "plain-looking-secret-42"
    assert plain in scrub(f"error: bad key {plain}")
    remember([plain, "short"])
    assert scrub(f"error: bad key {plain}") == f"error: bad key {MASK}"
    assert scrub("short") == "short"  # too short to mask by value
    state.reset()
