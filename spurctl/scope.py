"""The nodes a command is about: `-w/--nodes/--node` and `-x`, parsed once, as clush reads them.

Every command that takes nodes builds one `Scope` from what was typed and hands it
down; nothing below re-parses a hostlist the operator gave. The rules, the same
everywhere:

- `-w` may be repeated: the nodes are the union (`-w a -w b` is `-w a,b`), as in clush.
- `@group` (or `@source:group`) is resolved through the operator's ClusterShell group
  configuration (groups.conf, read when the scope is parsed; never the example files
  ClusterShell installs with itself); a group that names no node, or one no
  configuration defines, is an error, never "every node" nor an example's nodes.
- `-x` (also repeatable) is applied once, with the audit's loose name match: case and
  domain aside, so `-x gpu021` also leaves out the inventory of `gpu021.cluster.local`.
- A scope that comes out empty is a usage error naming the option that emptied it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from spurctl.errors import SpurctlError
from spurctl.hostlist import fold, loose_key, parse_scope
from spurctl.model import Inventory
from spurctl.spur_hostlist import split_top_level

# A ClusterShell group as an operator types it: @name or @source:name.
_GROUP = re.compile(r"@[A-Za-z0-9_.-]+(?::[A-Za-z0-9_.-]+)?")


def _top_parts(text: str) -> list[str]:
    return [p.strip() for p in split_top_level(text)]


def group_config_paths() -> list[str]:
    """The groups.conf files an operator's `@group` is read from: the system's
    (/etc/clustershell), the user's ($XDG_CONFIG_HOME/clustershell), the directory
    $CLUSTERSHELL_CFGDIR names, and spurctl's own (groups.conf beside config.toml), in
    ClusterShell's order of precedence. Never the files ClusterShell installs with
    itself (under the Python prefix, or ~/.local/etc for a pip --user install): those
    are its examples (`@gpu` is example[156-159]), no cluster's groups."""
    from ClusterShell.Defaults import config_paths

    from spurctl.sources.user_config import config_path

    shipped = {
        os.path.normpath(os.path.join(root, "etc", "clustershell"))
        for root in (sys.prefix, sys.base_prefix, os.path.expanduser("~/.local"))
    }
    paths = [p for p in config_paths("groups.conf") if os.path.dirname(p) not in shipped]
    return [*paths, str(config_path().parent / "groups.conf")]


def _group_nodes(group: str, option: str) -> frozenset[str]:
    """The nodes of one `@group`, through the operator's groups.conf as it is now."""
    from ClusterShell.NodeSet import ILLEGAL_GROUP_CHARS, NodeSet, NodeSetError
    from ClusterShell.NodeUtils import (
        GroupResolverConfig,
        GroupResolverError,
        GroupResolverSourceError,
    )

    # A resolver of its own: ClusterShell's default one read its paths at import time,
    # its examples included.
    paths = group_config_paths()
    resolver = GroupResolverConfig(paths, ILLEGAL_GROUP_CHARS)
    try:
        names = frozenset(NodeSet(group, resolver=resolver))
    except GroupResolverSourceError:
        if any(os.path.isfile(p) for p in paths):
            raise SpurctlError(
                f"{option} {group}: no group source of groups.conf defines it; check the "
                "group's name (`nodeset -LL` lists the groups it knows)"
            ) from None
        raise SpurctlError(
            f"{option} {group}: no groups are defined: spurctl reads groups from "
            "/etc/clustershell/groups.conf, $XDG_CONFIG_HOME/clustershell/groups.conf or "
            "groups.conf beside spurctl's config.toml; write one, or name the nodes"
        ) from None
    except (NodeSetError, GroupResolverError) as exc:
        raise SpurctlError(
            f"{option} {group}: ClusterShell cannot resolve the group ({exc}); check "
            "groups.conf (`nodeset -LL` lists the groups it knows)"
        ) from None
    if not names:
        raise SpurctlError(
            f"{option} {group}: ClusterShell's groups name no node in it; check the group's "
            "name (`nodeset -LL` lists the groups it knows)"
        )
    for name in sorted(names):
        parse_scope(name)  # a group must still name node names spurctl can pass to ssh
    return names


def parse_nodes(text: str, option: str = "--nodes") -> frozenset[str]:
    """The nodes one typed hostlist names, its `@group` parts resolved by ClusterShell;
    a usage error (naming `option`) when it names none or is malformed."""
    parts = _top_parts(text)
    groups = [p for p in parts if p.startswith("@")]
    if not groups:
        try:
            return parse_scope(text)
        except SpurctlError as exc:
            raise SpurctlError(f"{option}: {exc}") from None
    names: set[str] = set()
    for part in parts:
        if part.startswith("@"):
            if not _GROUP.fullmatch(part):
                raise SpurctlError(
                    f"{option}: {part!r} is not a group name; write @group or @source:group"
                )
            names |= _group_nodes(part, option)
        elif part:
            try:
                names |= parse_scope(part)
            except SpurctlError as exc:
                raise SpurctlError(f"{option}: {exc}") from None
        else:
            raise SpurctlError(f"{option}: bad hostlist {text!r}: an empty name between commas")
    return frozenset(names)


@dataclass(frozen=True, slots=True)
class Scope:
    """The nodes named (None: every node the controller or an inventory knows) and
    those left out, with what was typed for messages."""

    named: frozenset[str] | None = None
    excluded: frozenset[str] = frozenset()
    nodes_typed: tuple[str, ...] = ()
    exclude_typed: tuple[str, ...] = ()
    # -x's nodes by their loose names, built once: every match against -x uses these.
    left_out_keys: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "left_out_keys", frozenset(loose_key(n) for n in self.excluded))

    @classmethod
    def parse(
        cls,
        nodes: Sequence[str] | str | None = None,
        exclude: Sequence[str] | str | None = None,
        *,
        nodes_option: str = "-w/--nodes",
    ) -> Scope:
        """The scope from the typed options (each repeatable: the union); a malformed or
        empty hostlist, an unknown group, or a -x that leaves out every named node is a
        usage error."""
        typed = (nodes,) if isinstance(nodes, str) else tuple(nodes or ())
        left = (exclude,) if isinstance(exclude, str) else tuple(exclude or ())
        named = None
        if typed:
            named = frozenset().union(*(parse_nodes(t, nodes_option) for t in typed))
        excluded = frozenset().union(*(parse_nodes(t, "-x/--exclude") for t in left))
        scope = cls(named, excluded, typed, left)
        if named is not None and not scope.keep(named):
            raise SpurctlError(
                f"-x {scope.exclude_hostlist} leaves out every node of {nodes_option} "
                f"{scope.hostlist}: nothing is left to act on"
            )
        return scope

    @property
    def everything(self) -> bool:
        """No -w: every node (less -x)."""
        return self.named is None

    @property
    def hostlist(self) -> str | None:
        """The named nodes as one folded hostlist (None: every node), for printed commands."""
        return None if self.named is None else fold(self.named)

    @property
    def exclude_hostlist(self) -> str | None:
        return fold(self.excluded) if self.excluded else None

    def leaves_out(self, name: str) -> bool:
        """Whether -x names `name`, by either of its names (case and domain aside)."""
        return bool(self.excluded) and loose_key(name) in self.left_out_keys

    def keep(self, names: Iterable[str]) -> list[str]:
        """Those of `names` -x does not leave out, in their order."""
        if not self.excluded:
            return list(names)
        out = self.left_out_keys
        return [n for n in names if loose_key(n) not in out]

    def kept(self) -> frozenset[str]:
        """The named nodes less -x; a command that acts only on named nodes checked at its
        edge that some were named."""
        assert self.named is not None
        return frozenset(self.keep(self.named))

    def exclude_from(
        self,
        view_nodes: Collection[str],
        inventories: Iterable[Inventory],
        scope: Collection[str] | None,
    ) -> Excluded:
        """What was read, with -x applied (`excluding`, with this scope's loose names)."""
        return _excluding(self.left_out_keys, view_nodes, inventories, scope)

    def targets(self, known: Collection[str]) -> list[str]:
        """The nodes to read: the named ones, else every `known` node; less -x."""
        return sorted(self.keep(self.named if self.named is not None else known))

    def words(self) -> list[str]:
        """The scope as options for a printed command (`--nodes HL`, `-x HL`)."""
        out: list[str] = []
        if self.hostlist is not None:
            out += ["--nodes", self.hostlist]
        if self.exclude_hostlist is not None:
            out += ["-x", self.exclude_hostlist]
        return out


# -- -x applied to what was read: inventories out, one name per left-out node ------------


@dataclass(frozen=True, slots=True)
class Excluded:
    """What is left once -x is applied: the inventories, the scope, and who was left out."""

    inventories: list[Inventory]
    scope: frozenset[str]
    # The left-out nodes that were in scope, one name each (the controller's when it has it).
    left_out: tuple[str, ...]


def _keys(inv: Inventory) -> set[str]:
    return {loose_key(n) for n in (inv.node, inv.target_node, *inv.target_nodes) if n}


def excluding(
    exclude: Collection[str],
    view_nodes: Collection[str],
    inventories: Iterable[Inventory],
    scope: Collection[str] | None,
) -> Excluded:
    """`inventories` and `scope` (None: every controller node and every inventory) with
    every node of `exclude` taken out."""
    return _excluding({loose_key(n) for n in exclude}, view_nodes, inventories, scope)


def _excluding(
    keys: frozenset[str] | set[str],
    view_nodes: Collection[str],
    inventories: Iterable[Inventory],
    scope: Collection[str] | None,
) -> Excluded:
    invs = list(inventories)
    kept = [inv for inv in invs if not (_keys(inv) & keys)]
    whole = set(scope) if scope is not None else set(view_nodes) | {i.node for i in invs}
    out = {n for n in whole if loose_key(n) in keys}
    # One name per node: the controller's where it has the node.
    names: dict[str, str] = {}
    for name in sorted(out, key=lambda n: (n not in view_nodes, n)):
        names.setdefault(loose_key(name), name)
    return Excluded(kept, frozenset(whole - out), tuple(sorted(names.values())))


def excluded_note(left_out: Collection[str]) -> str:
    """The audit's note naming how many nodes -x left out."""
    count = len(left_out)
    return (
        f"{count:,} node{'s' if count != 1 else ''} excluded by -x and not audited: "
        f"{fold(left_out)}."
    )
