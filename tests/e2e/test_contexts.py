"""One config file, several clusters (#43 item 11): kubectl-style contexts chosen by
--context (before or after the command), SPURCTL_CONTEXT or the file's current_context;
the cluster's name in every report header and in reclaim's [y/N] prompt."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl_sim import SimCluster, incident, post_wipe
from tests.cli import answer_on_a_terminal, one_line_error, run_cli
from tests.reclaim import reclaim_args


@pytest.fixture(scope="module")
def clusters() -> Iterator[dict[str, SimCluster]]:
    with SimCluster(incident()) as prod, SimCluster(post_wipe()) as lab:
        yield {"prod": prod, "lab": lab}


def config(home: Path, clusters: dict[str, SimCluster], *, current: str | None = "prod") -> Path:
    """A config.toml with one context per cluster, each with its own inventory file."""
    home.mkdir(parents=True, exist_ok=True)
    lines = [f'current_context = "{current}"'] if current else []
    for name, sim in clusters.items():
        inventory = sim.write_inventories(home / f"{name}.jsonl")
        agents = home / f"{name}-agents.json"
        agents.write_text(json.dumps(sim.agent_map()))
        lines += [
            f"[contexts.{name}]",
            f'controller = "{sim.controller_address}"',
            f'inventory = "{inventory}"',
            f'agent_map = "{agents}"',
        ]
    path = home / ".config" / "spurctl" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def audited(home: Path, *args: str, env: dict[str, str] | None = None) -> dict:  # type: ignore[type-arg]
    run = run_cli(*args, home=home, env=env)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)


def test_the_current_context_is_used_and_context_names_another_before_or_after_the_command(
    clusters: dict[str, SimCluster], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    config(home, clusters)
    prod, lab = clusters["prod"].controller_address, clusters["lab"].controller_address

    current = audited(home, "audit", "--json")
    assert current["controller"]["address"] == prod
    assert current["controller"]["cluster"] == "prod"  # the context's name
    for args in (["--context", "lab", "audit", "--json"], ["audit", "--json", "--context=lab"]):
        doc = audited(home, *args)
        assert (doc["controller"]["address"], doc["controller"]["cluster"]) == (lab, "lab")
    by_env = audited(home, "audit", "--json", env={"SPURCTL_CONTEXT": "lab"})
    assert by_env["controller"]["address"] == lab
    # A controller typed on the command line is not the context's: it is not named after it.
    typed = audited(home, "audit", "--json", "--controller", lab)
    assert typed["controller"]["cluster"] is None


def test_an_unknown_context_is_one_line_listing_the_known_ones(
    clusters: dict[str, SimCluster], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    path = config(home, clusters)
    run = run_cli("audit", "--context", "staging", home=home)
    line = one_line_error(run, "--context staging", str(path))
    assert line.endswith("its contexts: prod, lab")
    assert run.stdout == ""


def test_every_header_names_the_cluster(clusters: dict[str, SimCluster], tmp_path: Path) -> None:
    home = tmp_path / "home"
    config(home, clusters)
    prod = clusters["prod"].controller_address

    table = run_cli("audit", home=home)
    assert f"Cluster prod: controller {prod} (Spur " in table.stdout
    nodes = run_cli("nodes", home=home)
    assert nodes.stdout.startswith(f"Cluster prod: controller {prod} at ")
    assert audited(home, "nodes", "--json")["controller"]["cluster"] == "prod"
    markdown = run_cli("audit", "--format", "markdown", home=home)
    assert f"Cluster prod: controller {prod}" in markdown.stdout
    watch = run_cli("audit", "--watch", "--rounds", "1", home=home)
    assert watch.stdout.startswith("spurctl audit --watch: cluster prod, round 1, ")
    explained = run_cli("explain", "gpu012", home=home)
    assert f"Controller view:  cluster prod, {prod} at " in explained.stdout
    assert audited(home, "explain", "gpu012", "--json")["controller"]["cluster"] == "prod"
    plan = run_cli("--context", "lab", "reclaim", "--node", "gpu003", "--dry-run", home=home)
    assert f"Cluster lab: controller {clusters['lab'].controller_address}" in plan.stdout
    checklist = run_cli("checklist", "post-wipe", home=home)
    assert f"Cluster prod: controller {prod} (Spur " in checklist.stdout, checklist.stdout
    as_json = audited(home, "checklist", "post-wipe", "--format", "json")
    assert as_json["controller"]["cluster"] == "prod"


def test_spur_confs_cluster_name_names_the_cluster_and_a_context_that_contradicts_it_is_refused(
    clusters: dict[str, SimCluster], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    conf = tmp_path / "spur.conf"
    conf.write_text('cluster_name = "gpu-east"\n')
    prod = clusters["prod"]
    inventory = prod.write_inventories(tmp_path / "inv.jsonl")
    args = (
        "audit",
        "--json",
        "--controller",
        prod.controller_address,
        "--inventory",
        str(inventory),
    )
    doc = audited(home, *args, "--conf", str(conf))
    assert doc["controller"]["cluster"] == "gpu-east"

    config(home, clusters)  # the prod context, with spur.conf naming another cluster
    run = run_cli("audit", "--conf", str(conf), home=home)
    one_line_error(run, "calls this cluster 'prod'", "cluster_name = 'gpu-east'", "conf")


def test_a_single_cluster_config_file_works_as_it_always_has(
    clusters: dict[str, SimCluster], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    prod = clusters["prod"]
    inventory = prod.write_inventories(tmp_path / "inv.jsonl")
    path = home / ".config" / "spurctl" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        f'controller = "{prod.controller_address}"\ninventory = "{inventory}"\ncluster = "prod"\n'
    )
    doc = audited(home, "audit", "--json")
    assert doc["controller"]["address"] == prod.controller_address
    assert doc["controller"]["cluster"] == "prod"  # its optional `cluster` key
    run = run_cli("audit", "--context", "lab", home=home)
    one_line_error(run, "--context lab", "no such context", "it has none")


def test_reclaims_prompt_names_the_cluster_it_would_send_to(
    clusters: dict[str, SimCluster], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    config(home, clusters)
    prod = clusters["prod"]
    inventory = prod.write_inventories(tmp_path / "inv.jsonl")
    agent_map = tmp_path / "agents.json"
    agent_map.write_text(json.dumps(prod.agent_map()))
    args = reclaim_args(prod, inventory, agent_map, tmp_path / "journal.jsonl", node="gpu012")
    args.remove("--yes")
    args.remove("--controller")
    args.remove(prod.controller_address)  # the context's controller: it names the cluster

    status, seen = answer_on_a_terminal(args, home, b"n\r")

    assert status == 1, seen
    assert b"Send 1 cancel to 1 node of cluster prod, killing 0 live runs? [y/N]" in seen, seen
    assert prod.cancels == []


def test_a_command_printed_to_run_next_names_the_context_it_read(
    clusters: dict[str, SimCluster], tmp_path: Path
) -> None:
    import re
    import shlex

    home = tmp_path / "home"
    config(home, clusters)
    run = run_cli(
        "reclaim", "--node", "gpu[003-004]", "--job", "99999", "--dry-run", "--context", "lab",
        home=home,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    # The audit of the nodes, on a line of its own under the note (reclaim's NextStep).
    (printed,) = set(re.findall(r"^\s+(spurctl audit .+)$", run.stdout, re.M))
    words = shlex.split(printed)
    assert words[words.index("--context") + 1] == "lab"
    # Pasted where the file's current_context is prod, it still reads lab.
    pasted = run_cli(*words[1:], "--json", home=home)
    assert json.loads(pasted.stdout)["controller"]["cluster"] == "lab"
