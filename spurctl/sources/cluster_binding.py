"""Which cluster a file says it belongs to, and whether that is the cluster being read.

An inventory document and an agent-map file may name the controller they were
made for (`controller`: its URL, or URLs for HA, as --controller takes them) and
the cluster (`cluster`: spur.conf's `cluster_name`). `spurctl collect` records
the controller and cluster it was told; `spurctl node-inventory` records the
node's own word (`agent_config`: the controller its spurd was started with and
its spur.conf's `cluster_name`, node/agent_config.py). A reclaim, repair,
drain or resume reading files that name
another cluster than the view's refuses (decide/send_guards.py): with one
cluster's inventories and agent map and another's controller (same node names,
same job ids), the controller's verdicts would be acted on at the other
cluster's agents (issue 39.9).

Controllers are compared as agent addresses are (agent_endpoints.endpoint): two
URLs name one controller when their host:port endpoints meet, so `ctl1:6817`,
`ctl1.example:6817` and its address agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from spurctl.errors import SpurctlError
from spurctl.model import Inventory
from spurctl.sources.controller_url import normalize_url


@dataclass(frozen=True, slots=True)
class Binding:
    """The cluster a file names: its controller URLs (empty: none named) and cluster name."""

    controllers: tuple[str, ...] = ()
    cluster: str | None = None

    def __bool__(self) -> bool:
        return bool(self.controllers) or self.cluster is not None

    def describe(self) -> str:
        parts = []
        if self.controllers:
            parts.append(f"controller {','.join(self.controllers)}")
        if self.cluster is not None:
            parts.append(f"cluster {self.cluster!r}")
        return " and ".join(parts)


def controller_list(text: str, where: str) -> tuple[str, ...]:
    """A `controller` field's URLs, normalised as --controller's; SpurctlError naming
    `where` when it is not a controller URL list."""
    urls = [a for a in text.split(",") if a.strip()]
    if not urls:
        raise SpurctlError(f"{where}: controller is empty; write the URL, e.g. http://ctl:6817")
    try:
        return tuple(normalize_url(u) for u in urls)
    except SpurctlError as exc:
        raise SpurctlError(f"{where}: controller: {exc}") from None


def cluster_name(value: object, where: str) -> str:
    """A `cluster` field's name; SpurctlError naming `where` unless a plain name."""
    if not isinstance(value, str) or not value or not value.isprintable() or value != value.strip():
        raise SpurctlError(f"{where}: cluster must be the cluster's name (spur.conf cluster_name)")
    return value


def _endpoint_of(
    url: str, resolve: Callable[[str], frozenset[tuple[str, int]]]
) -> frozenset[tuple[str, int]]:
    from spurctl.sources.agent_endpoints import AddressError

    parts = urlsplit(url)
    host = parts.hostname or ""
    address = f"[{host}]:{parts.port}" if ":" in host else f"{host}:{parts.port}"
    try:
        return resolve(address)
    except AddressError:
        return frozenset()


def same_controller(
    named: Sequence[str],
    view: Sequence[str],
    resolve: Callable[[str], frozenset[tuple[str, int]]] | None = None,
) -> bool:
    """Whether any URL of `named` reaches the same host:port as any of `view`'s."""
    from spurctl.sources.agent_endpoints import endpoint

    how = resolve or endpoint
    mine = [_endpoint_of(u, how) for u in named]
    theirs = [_endpoint_of(u, how) for u in view]
    return any(a & b for a in mine for b in theirs)


def mismatch(
    binding: Binding,
    controllers: Sequence[str],
    cluster: str | None,
    resolve: Callable[[str], frozenset[tuple[str, int]]] | None = None,
    *,
    unnamed_view: bool = False,
) -> str | None:
    """How `binding` fails to name the view's cluster (`controllers`, spur.conf's
    `cluster`), or None when everything it names matches and something was checked.

    A binding that names only a cluster is refused while no spur.conf names the view's,
    unless `unnamed_view`: a node's spur.conf names its cluster whether or not anyone
    meant it to bind a file, so that word is weighed only against a view that names one.
    """
    if binding.controllers and not same_controller(binding.controllers, controllers, resolve):
        return (
            f"names controller {','.join(binding.controllers)}, not this one "
            f"({','.join(controllers)})"
        )
    if binding.cluster is not None:
        if cluster is not None and binding.cluster != cluster:
            return f"names cluster {binding.cluster!r}, not this one ({cluster!r} in spur.conf)"
        if cluster is None and not binding.controllers and not unnamed_view:
            return (
                f"names cluster {binding.cluster!r}, and no spur.conf names this controller's "
                "cluster (pass --conf with the controller's spur.conf)"
            )
    return None


def agent_binding(inv: Inventory) -> Binding:
    """The cluster the node's own spurd says it is of (node/agent_config.py: its
    --controller, its spur.conf's cluster_name); empty when it says neither, or a
    controller no URL list can be."""
    controllers: tuple[str, ...] = ()
    if inv.agent_controller:
        try:
            controllers = controller_list(inv.agent_controller, "spurd --controller")
        except SpurctlError:
            controllers = ()
    return Binding(controllers, inv.agent_cluster)


def stamped(inv: Inventory, binding: Binding) -> Inventory:
    """`inv` naming the cluster it was collected for (unchanged when nothing was told)."""
    if not binding:
        return inv
    return replace(inv, controller=",".join(binding.controllers) or None, cluster=binding.cluster)
