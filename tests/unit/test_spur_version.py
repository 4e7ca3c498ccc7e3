"""Which Spur the cluster runs: the note for a controller that may predate its own reclaim."""

from __future__ import annotations

import pytest

from spurctl.audit import spur_version_note
from spurctl.render.common import spur_version


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.8.0", "may predate"),
        ("v0.8.0", "may predate"),
        ("0.8.0-dev+4cc3da8", "may predate"),
        ("0.7.3", "predates"),
        ("0.8", "may predate"),
        ("0.8.1", None),
        ("0.9.1", None),
        ("1.0.0", None),
        ("", None),
        ("test", None),
    ],
)
def test_the_note_follows_the_version(version: str, expected: str | None) -> None:
    note = spur_version_note(version)
    if expected is None:
        assert note is None
        return
    assert note is not None and expected in note
    assert "nothing reclaims these findings by itself" in note
    assert "without a credential" in note and "Aug 2026" in note
    if expected == "may predate":
        # Upstream main still says 0.8.0 after #623: the version cannot tell them apart.
        assert "a 0.8.0 build from main after 2026-08-16 has the reclaim" in note
    else:
        assert "may predate" not in note


def test_the_header_always_says_which_spur() -> None:
    assert spur_version("0.8.0") == "Spur 0.8.0"
    assert spur_version("") == "Spur version not reported"
