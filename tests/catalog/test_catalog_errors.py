"""A catalog file or a calibration profile with an unknown key points to the page that documents it."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.catalog.store import Catalog
from slowlink.collectives.calibration import load_profile
from slowlink.errors import SpecError
from slowlink.fileio import DOCS


def test_a_catalog_file_points_to_the_catalog_doc() -> None:
    with pytest.raises(SpecError) as exc:
        Catalog().add_file({"gpus": {}, "nic": {}}, "mine.yaml")
    assert "mine.yaml: nic: unknown key" in str(exc.value)
    assert DOCS["catalog"] in str(exc.value) and "#the-catalog" in DOCS["catalog"]


def test_a_calibration_profile_points_to_the_calibration_doc(tmp_path: Path) -> None:
    p = tmp_path / "c.calibration.yaml"
    p.write_text("fits: []\nbogus: 1\n")
    with pytest.raises(SpecError) as exc:
        load_profile(p)
    assert "bogus: unknown key" in str(exc.value)
    assert DOCS["calibration"] in str(exc.value) and DOCS["cluster"] + " " not in str(exc.value)
