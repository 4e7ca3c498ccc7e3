"""spurctl.heap's glibc calls: they work on glibc and leave memory alone elsewhere."""

from __future__ import annotations

import platform
import sys

import pytest

from spurctl import heap

on_glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not on_glibc, reason="glibc's malloc_trim/mallopt: needs Linux with glibc")
def test_trim_gives_freed_pages_back_on_glibc() -> None:
    blocks = [bytearray(4096) for _ in range(20_000)]  # ~80 MiB in small malloc blocks
    del blocks
    assert heap.trim_heap() is True  # 1: glibc released memory back to the OS


def test_without_glibc_both_calls_decline_and_change_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(heap.sys, "platform", "darwin")
    assert heap.trim_heap() is False
    assert heap.few_malloc_arenas() is False
