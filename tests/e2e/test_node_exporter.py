"""`audit --format prometheus -o` read by the real node_exporter and checked by promtool.

Debian's prometheus-node-exporter runs with only its textfile collector on a
loopback port, reading the directory spurctl writes into, and is scraped over
HTTP as Prometheus would. spurctl creates the metric file 0644 (metrics are not
secret): the README's recipe has node_exporter run as its own user, and one test
runs it so (as the prometheus user, when the suite runs as root).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from spurctl.render.common import write_output
from spurctl_sim import SimCluster
from tests.cli import dead_url, run_process, running
from tests.tools import require

_SAMPLE = re.compile(r"^(spurctl_[a-z_]+(?:\{[^}]*\})?) (\S+)$")


_LABEL = re.compile(r'[a-z_]+="(?:[^"\\]|\\.)*"')


def spurctl_samples(text: str) -> dict[str, float]:
    """spurctl's series in exposition text, `name{labels}` -> value, the labels in name
    order (node_exporter serves them so; their order means nothing)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if m := _SAMPLE.match(line):
            name, _, labels = m[1].partition("{")
            pairs = sorted(_LABEL.findall(labels))
            out[f"{name}{{{','.join(pairs)}}}" if pairs else name] = float(m[2])
    return out


class Exporter:
    def __init__(self, url: str, proc: subprocess.Popen[str]) -> None:
        self.url = url
        self.proc = proc

    def scrape(self) -> str:
        with urllib.request.urlopen(self.url, timeout=5) as answer:
            text: str = answer.read().decode()
        return text


@pytest.fixture
def textfile_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "textfile"
    directory.mkdir()
    return directory


@contextmanager
def exporter_on(textfile_dir: Path, **popen: Any) -> Iterator[Exporter]:
    """node_exporter's textfile collector on `textfile_dir`, listening; `popen` as for
    subprocess.Popen (user=: run it as that user)."""
    program = require("prometheus-node-exporter")
    address = dead_url().removeprefix("http://")  # a free loopback port
    argv = [
        program,
        "--collector.disable-defaults",
        "--collector.textfile",
        f"--collector.textfile.directory={textfile_dir}",
        f"--web.listen-address={address}",
    ]
    with running(argv, stderr=subprocess.STDOUT, **popen) as proc:
        found = Exporter(f"http://{address}/metrics", proc)
        deadline = time.monotonic() + 20
        while True:
            try:
                found.scrape()
                break
            except OSError:
                assert proc.poll() is None, "node_exporter exited before it listened"
                assert time.monotonic() < deadline, "node_exporter did not listen within 20 s"
                time.sleep(0.05)
        yield found


@pytest.fixture
def exporter(textfile_dir: Path) -> Iterator[Exporter]:
    with exporter_on(textfile_dir) as found:
        yield found


def audit_to(sim: SimCluster, inventory: Path, prom: Path) -> str:
    run = run_process(
        "audit", "--controller", sim.controller_address, "--inventory", str(inventory),
        "--format", "prometheus", "-o", str(prom),
    )  # fmt: skip
    assert run.returncode == 1, run.stderr  # the incident needs action
    return prom.read_text()


def test_node_exporter_serves_the_audits_metrics_with_their_labels(
    incident_cluster: tuple[SimCluster, Path, Path], exporter: Exporter, textfile_dir: Path
) -> None:
    sim, inventory, _ = incident_cluster
    written = audit_to(sim, inventory, textfile_dir / "spurctl.prom")

    scraped = exporter.scrape()

    assert "node_textfile_scrape_error 0" in scraped.splitlines()
    served = spurctl_samples(scraped)
    assert served == spurctl_samples(written)
    assert served['spurctl_findings{kind="active-elsewhere"}'] == 7
    assert served['spurctl_findings{kind="terminal-held"}'] == 1
    assert served['spurctl_node_reclaimable_holdings{node="gpu006"}'] == 2
    assert served["spurctl_nodes_in_scope"] == 24
    assert served["spurctl_controller_view_complete"] == 1
    for family in ("findings", "node_reclaimable_holdings", "audit_timestamp_seconds"):
        assert f"# TYPE spurctl_{family} gauge" in scraped


def test_promtool_check_metrics_passes_on_the_file_and_the_scrape(
    incident_cluster: tuple[SimCluster, Path, Path], exporter: Exporter, textfile_dir: Path
) -> None:
    promtool = require("promtool")
    sim, inventory, _ = incident_cluster
    written = audit_to(sim, inventory, textfile_dir / "spurctl.prom")

    for text in (written, exporter.scrape()):
        check = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
        )
        assert check.returncode == 0, check.stdout + check.stderr
        assert check.stdout.strip() == "" and check.stderr.strip() == "", "promtool lint findings"


def test_rewriting_the_file_while_node_exporter_scrapes_never_serves_a_partial_read(
    incident_cluster: tuple[SimCluster, Path, Path], exporter: Exporter, textfile_dir: Path
) -> None:
    sim, inventory, _ = incident_cluster
    prom = textfile_dir / "spurctl.prom"
    first = audit_to(sim, inventory, prom)
    # A second version of the same size class: every sample's value changed, and a
    # long comment so a write takes more than one syscall's worth of bytes.
    second = (
        re.sub(r"^(spurctl_\S+) \S+$", r"\1 7777", first, flags=re.M) + "# " + "x" * 200_000 + "\n"
    )
    versions = [spurctl_samples(first), spurctl_samples(second)]
    assert versions[0] != versions[1]

    stop = threading.Event()
    writes = 0

    def rewrite() -> None:
        nonlocal writes
        deadline = time.monotonic() + 20
        while not stop.is_set() and time.monotonic() < deadline:
            write_output((first, second)[writes % 2], prom)
            writes += 1

    writer = threading.Thread(target=rewrite, daemon=True)
    writer.start()
    seen = set()
    try:
        deadline = time.monotonic() + 10
        scrapes = 0
        while scrapes < 300 and time.monotonic() < deadline:
            text = exporter.scrape()
            scrapes += 1
            assert "node_textfile_scrape_error 0" in text.splitlines(), text[-2000:]
            served = spurctl_samples(text)
            assert served in versions, f"scrape {scrapes} served a mix or a part of a version"
            seen.add(versions.index(served))
    finally:
        stop.set()
        writer.join(timeout=30)
    assert scrapes >= 20 and writes >= 20, (scrapes, writes)
    assert seen == {0, 1}, "the scrapes never saw the file change"
    # No temp file left for the collector to read.
    assert sorted(p.name for p in textfile_dir.iterdir()) == ["spurctl.prom"]


def _exporter_user() -> str | None:
    """A system user node_exporter can run as (Debian's package makes `prometheus`)."""
    for name in ("prometheus", "nobody"):
        try:
            return pwd.getpwnam(name).pw_name
        except KeyError:
            continue
    return None


def test_node_exporter_as_its_own_user_reads_the_file_spurctl_creates(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    user = _exporter_user()
    if os.geteuid() != 0 or user is None:  # no other user to run it as: the mode says it
        prom = tmp_path / "spurctl.prom"
        audit_to(sim, inventory, prom)
        assert stat.S_IMODE(prom.stat().st_mode) == 0o644
        return
    # As the README sets it up: a directory root writes into and others may read,
    # spurctl run by root, node_exporter by its own user.
    directory = Path(tempfile.mkdtemp(prefix="spurctl-textfile-"))
    try:
        directory.chmod(0o755)
        with exporter_on(directory, user=user) as exporter:
            prom = directory / "spurctl.prom"
            written = audit_to(sim, inventory, prom)
            assert stat.S_IMODE(prom.stat().st_mode) == 0o644
            assert prom.stat().st_uid == 0
            scraped = exporter.scrape()
            assert "node_textfile_scrape_error 0" in scraped.splitlines(), scraped[-2000:]
            assert spurctl_samples(scraped) == spurctl_samples(written)
            assert spurctl_samples(scraped)["spurctl_nodes_in_scope"] == 24
            # It is another user: a file only root may read (the old 0600), it cannot.
            prom.chmod(0o600)
            assert "node_textfile_scrape_error 1" in exporter.scrape().splitlines()
    finally:
        shutil.rmtree(directory)


def test_an_existing_metric_file_keeps_its_mode_and_other_outputs_stay_0600(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    kept = tmp_path / "group-only.prom"
    kept.write_text("")
    kept.chmod(0o640)  # an operator's choice: node_exporter's group may read it
    audit_to(sim, inventory, kept)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    for fmt in ("json", "table", "csv", "markdown"):
        out = tmp_path / f"audit.{fmt}"
        run = run_process(
            "audit", "--controller", sim.controller_address, "--inventory", str(inventory),
            "--format", fmt, "-o", str(out),
        )  # fmt: skip
        assert run.returncode == 1, run.stderr
        assert stat.S_IMODE(out.stat().st_mode) == 0o600, fmt
