"""Pinned keys: the strings that name artifact folders, caches and generators.

These values key stores on users' disks (artifacts, autobench call caches,
generator names in result files). A change to any of them silently orphans
every existing store, so each call site's output is pinned here, for ASCII and
non-ASCII inputs, truncation edges and empty text.
"""

from __future__ import annotations

import os
import stat

import pytest

from lmms_genbench.autobench.cache import CallCache
from lmms_genbench.core.keys import atomic_write, generator_name, settings_hash, slug, slug_key, stable_hash
from lmms_genbench.engine.protocol import ChainSpec
from lmms_genbench.store import ArtifactStore

A31 = "a" * 31 + ".b c"
X39 = "x" * 39 + " yz"
Y39 = "y" * 39 + ".z"
A60 = "a" * 60 + "._x"
UNI = "Ünïcödé café ✓ 日本"

# text -> (store slug_key, slug_key(max_len=32) as models/cycle.py and autobench/examiner.py
# call it, slug as generator names use it, the task part of a protocol id)
SLUGS = {
    "Hello World": ("Hello_World-07cf5509", "Hello_World-07cf5509", "hello-world", "Hello_World"),
    "../weird//path name.png": (
        "weird_path_name.png-0fd8b9e4",
        "weird_path_name.png-0fd8b9e4",
        "weird-path-name.png",
        ".._weird_path_name.png",
    ),
    UNI: ("n_c_d_caf-a240e9ac", "n_c_d_caf-a240e9ac", "n-c-d-caf", "_n_c_d_caf_"),
    "": ("x-12ae32cb", "x-12ae32cb", "x", "task"),
    "___...": ("x-f63ac36b", "x-f63ac36b", "x", "___..."),
    A60: ("a" * 48 + "-fa944cef", "a" * 32 + "-fa944cef", "a" * 40, "a" * 40),
    "org/Model-Name_v1.5": (
        "org_Model-Name_v1.5-dcf399aa",
        "org_Model-Name_v1.5-dcf399aa",
        "org-model-name-v1.5",
        "org_Model-Name_v1.5",
    ),
    A31: ("a" * 31 + ".b_c-77646a5c", "a" * 31 + ".-77646a5c", "a" * 31 + ".b-c", "a" * 31 + ".b_c"),
    X39: ("x" * 39 + "_yz-726ec5bd", "x" * 32 + "-726ec5bd", "x" * 39, "x" * 39 + "_"),
    Y39: ("y" * 39 + ".z-c0d846fc", "y" * 32 + "-c0d846fc", "y" * 39, "y" * 39 + "."),
    "-Lead.dots-": ("-Lead.dots--a655943e", "-Lead.dots--a655943e", "lead.dots", "-Lead.dots-"),
    "tab\tnew\nline": ("tab_new_line-9dd61ae8", "tab_new_line-9dd61ae8", "tab-new-line", "tab_new_line"),
}


SPEC = ChainSpec(direction="image_first", hops=6, describe_prompt="Describé ✓", describer_kwargs={"max_new_tokens": 64})


@pytest.mark.parametrize("text", list(SLUGS))
def test_slugs_are_pinned(text):
    store, short, name, task = SLUGS[text]
    assert slug_key(text) == store
    assert slug_key(text, 32) == short
    assert slug(text) == name
    assert SPEC.protocol_id(text) == f"{task}-cdac1da92b"


# object -> stable_hash at 10 (default: engine/cycle.py, protocol ids), 8 (describer and
# examiner ids, autobench seeds) and 32 (autobench call cache) characters
HASHES = [
    ({"b": 1, "a": [1, 2]}, "3813f9409e", "3813f940", "3813f9409eb0095bf9c8e1225c627acf"),
    ("Ünïcödé ✓", "8e58e2d333", "8e58e2d3", "8e58e2d3330af313b0b099fc98078b63"),
    (["x", 3, None], "893ec747ee", "893ec747", "893ec747ee43db54ca5b40bb4cb5a707"),
    ({"k": "日本", "p": type}, "d910465232", "d9104652", "d91046523249dc5dd1e787342a685901"),
]


@pytest.mark.parametrize("obj,ten,eight,thirty_two", HASHES)
def test_stable_hash_is_pinned(obj, ten, eight, thirty_two):
    assert stable_hash(obj) == ten
    assert stable_hash(obj, 8) == eight
    assert stable_hash(obj, 32) == thirty_two


# settings -> generator name part; non-ASCII is escaped here (unlike stable_hash)
SETTINGS = [
    ({"b": 1, "a": "x"}, "385820f0"),
    ({"k": "日本 café"}, "4bb50cb8"),
    ({}, "44136fa3"),
]


@pytest.mark.parametrize("settings,digest", SETTINGS)
def test_generator_names_are_pinned(settings, digest):
    assert settings_hash(settings) == digest
    assert generator_name("diffusers", "Stabilityai/SDXL Turbo ü", settings) == (
        f"diffusers-stabilityai-sdxl-turbo-{digest}"
    )


def test_call_site_keys_are_pinned():
    assert SPEC.protocol_id("sdp_nocaps") == "sdp_nocaps-cdac1da92b"
    assert SPEC.protocol_id("tâsk/ü x") == "t_sk_x-cdac1da92b"
    key = CallCache.key(model="m", prompt="Ünï ✓", images=["ab"], settings={"t": 0})
    assert key == "2e2576ae20fef305dd066baea9fc03d0"
    store = ArtifactStore("/r")
    assert str(store.chain(store.namespace("d", "g", "p"), "doc Ü/1").directory) == "/r/d/g/p/doc_1-b6d6bc61"


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_get_the_mode_open_would_give(tmp_path, umask, mode):
    """Artifacts are shared between users of a group as any file would be (mkstemp alone
    makes them 0600)."""
    old = os.umask(umask)
    try:
        atomic_write(tmp_path / "a.json", lambda fh: fh.write(b"{}"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # no temporary left behind
