"""`lmms-genbench sdp export` / `sdp score`: our chains in the Semantic Drift authors' folder
layout and back; a malformed layout ends in one line naming the file, exit 1, nothing scored.
(The round trip through a real lmms-eval run is tests/e2e/test_sdp_layout_e2e.py.)"""

from __future__ import annotations

import csv
import shutil

import pytest

from lmms_genbench.analysis.sdp_layout import LayoutError, export_chains, layout_filename, read_layout
from lmms_genbench.cli import main
from tests.support.chains import write_chain

G = 4


def _chains(root):
    out = []
    for i, (pair, colour) in enumerate((("skimage/astronaut", (200, 0, 0)), ("0013ea2087020901.jpg", (0, 0, 200)))):
        out.append(write_chain(root, f"{pair}#text_first", "text_first",
                               [f"caption {i}", colour, f"a, \"quoted\"\ndescription {i}", colour, f"d{i} é"],
                               length=G, namespace="tf"))
        out.append(write_chain(root, f"{pair}#image_first", "image_first",
                               [colour, f"t{i}", colour, f"u{i}", colour], length=G, namespace="if"))
    out.append(write_chain(root, "short#text_first", "text_first", ["x", (1, 2, 3)], length=G, namespace="tf"))
    return out


def _export(tmp_path):
    result = export_chains(_chains(tmp_path / "art"), tmp_path / "layout")
    return result, tmp_path / "layout"


def test_export_writes_their_folders_files_and_columns(tmp_path):
    result, root = _export(tmp_path)
    assert result.chains == {"image_first": 2, "text_first": 2} and result.generations == {"image_first": 4, "text_first": 4}
    assert result.left_out == {"fewer generations than the task's": 1}
    assert sorted(p.name for p in (root / "text-first").iterdir()) == ["gen-0.csv", "gen-1", "gen-2.csv", "gen-3", "gen-4.csv"]
    assert sorted(p.name for p in (root / "image-first").iterdir()) == ["gen-0", "gen-1.csv", "gen-2", "gen-3.csv", "gen-4"]
    with open(root / "text-first" / "gen-2.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    # their names: NoCaps' file names as they are, others made one path component ending .png
    assert rows == [["filename", "caption"], ["0013ea2087020901.jpg", 'a, "quoted"\ndescription 1'],
                    ["skimage_astronaut.png", 'a, "quoted"\ndescription 0']]
    # images are <stem>.png, as their open_image looks for them
    assert sorted(p.name for p in (root / "image-first" / "gen-0").iterdir()) == ["0013ea2087020901.png", "skimage_astronaut.png"]
    layout = read_layout(root)
    assert layout.chains["text_first"]["skimage_astronaut.png"][4] == "d0 é"
    assert layout_filename("a/b c") == "a_b_c.png" and layout_filename("geneval/00012") == "12.png"  # mgg.py's name
    with pytest.raises(LayoutError, match="not empty"):
        export_chains([], root)


def _score(capsys, root, tmp_path):
    code = main(["sdp", "score", str(root), "--preset", "smoke", "--artifacts", str(tmp_path / "scored")])
    return code, capsys.readouterr()


@pytest.mark.parametrize("damage, named", [
    (lambda r: shutil.rmtree(r / "text-first" / "gen-3"), "text-first/gen-3: missing"),
    (lambda r: (r / "image-first" / "gen-2" / "skimage_astronaut.png").unlink(), "image-first/gen-2/skimage_astronaut.png: missing"),
    (lambda r: (r / "text-first" / "gen-2.csv").write_text("name,text\na.png,x\n"), "text-first/gen-2.csv: columns are ['name', 'text']"),
    (lambda r: (r / "image-first" / "gen-3.csv").write_text(""), "image-first/gen-3.csv: empty"),
    (lambda r: (r / "image-first" / "gen-1.csv").write_text("filename,caption\n"), "image-first/gen-1.csv: no rows"),
])
def test_a_malformed_layout_is_named_in_one_line_and_nothing_is_scored(tmp_path, capsys, damage, named):
    _, root = _export(tmp_path)
    damage(root)
    code, out = _score(capsys, root, tmp_path)
    assert code == 1 and out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and lines[0].startswith("lmms-genbench sdp score: error: "), out.err
    assert not (tmp_path / "scored").exists()  # nothing stored, nothing scored


def test_export_from_a_store_folder_equals_the_export_of_its_chains(tmp_path, capsys):
    _, root = _export(tmp_path)  # the store tmp_path/art: both directions and a short chain
    assert main(["sdp", "export", str(tmp_path / "art"), str(tmp_path / "again")]) == 0
    out = capsys.readouterr()
    assert "text_first: 2 chains, generations 0..4" in out.out and "left out" in out.err
    for path in sorted(root.rglob("*")):
        twin = tmp_path / "again" / path.relative_to(root)
        assert twin.exists() and (path.is_dir() or twin.read_bytes() == path.read_bytes()), path
    assert main(["sdp", "export", str(tmp_path / "nothing"), str(tmp_path / "x")]) == 1
    assert capsys.readouterr().err.startswith("lmms-genbench sdp export: error: ")
