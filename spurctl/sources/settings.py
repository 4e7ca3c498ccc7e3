"""Where spurctl finds the cluster: controller addresses, credentials, agent addresses.

Resolution order follows Spur's own CLI (docs/contract.md "Connecting"): a flag (or its
environment variable, which Typer folds into the flag) wins, then spur.conf, then
the built-in default. Secrets are read here and never echoed back.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spurctl.errors import SpurctlError, register_secret
from spurctl.errors import warn as _warn
from spurctl.sources import bounded
from spurctl.sources.controller_url import DEFAULT_CONTROLLER_PORT, normalize_url
from spurctl.sources.nesting import too_deep

if TYPE_CHECKING:
    from spurctl.sources.cluster_binding import Binding

DEFAULT_CONF = Path("/etc/spur/spur.conf")
DEFAULT_CONTROLLER = "http://localhost:6817"
DEFAULT_AGENT_PORT = 6818


@dataclass(frozen=True, slots=True)
class SpurConf:
    """The few spur.conf settings spurctl reads."""

    path: Path | None = None
    controller_hosts: tuple[str, ...] = ()
    controller_port: int = DEFAULT_CONTROLLER_PORT
    first_job_id: int = 1
    jwt_key: str | None = field(default=None, repr=False)
    auth_mode: str | None = None
    agent_port: int = DEFAULT_AGENT_PORT
    # None when no spur.conf was read: then spurctl cannot know the setting.
    job_info_visibility: str | None = None
    # spur.conf's `cluster_name`: what an inventory or agent map naming a cluster must match.
    cluster_name: str | None = None


def _port_of(listen_addr: str, default: int) -> int:
    _, sep, port = listen_addr.rpartition(":")
    if not sep or not port.isdigit():
        return default
    return int(port)


def _loose(path: Path) -> str | None:
    """The mode, as 0NNN, when group or others may read `path`; None when only its owner can."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None
    return f"{mode:04o}" if mode & (stat.S_IRWXG | stat.S_IRWXO) else None


def load_conf(path: Path | None, warn: Callable[[str], None] | None = None) -> SpurConf:
    """Read spur.conf. An explicit path must exist; the default is used only if present.

    A spur.conf holding `[auth] jwt_key` that group or others can read gets a
    one-line warning (the key mints credentials every agent obeys).
    """
    if path is None:
        if not DEFAULT_CONF.is_file():
            return SpurConf()
        path = DEFAULT_CONF
    try:
        raw = bounded.read_bytes(path, bounded.CONF, f"spur.conf {path}")
    except OSError as exc:
        raise SpurctlError(
            f"cannot read spur.conf {path}: {exc.strerror}; pass --conf PATH or unset SPUR_CONF"
        ) from None
    import tomllib  # only where a spur.conf is read (~1.7 ms of every command's start)

    try:
        doc = tomllib.loads(raw.decode("utf-8", errors="replace"))
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        # tomllib parses nested arrays and tables by recursion: deep enough, it gives up.
        why = "nested too deep to read" if isinstance(exc, RecursionError) else exc
        raise SpurctlError(
            f"{path} is not valid TOML ({why}); fix the file or pass --conf"
        ) from None

    def section(name: str) -> dict[str, Any]:
        value = doc.get(name, {})
        if not isinstance(value, dict):
            raise SpurctlError(f"{path}: [{name}] must be a table")
        return value

    controller, auth, network = section("controller"), section("auth"), section("network")
    hosts = controller.get("hosts", [])
    if isinstance(hosts, str):
        hosts = [hosts]
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise SpurctlError(f"{path}: [controller] hosts must be a list of host names")
    agent_port = network.get("agent_port", DEFAULT_AGENT_PORT)
    # TOML `true` is a bool, and a bool is an int to Python: never a port.
    if isinstance(agent_port, bool) or not isinstance(agent_port, int):
        raise SpurctlError(
            f"{path}: [network] agent_port must be a port number, got {agent_port!r}"
        )
    if not 0 < agent_port < 65536:
        raise SpurctlError(f"{path}: [network] agent_port must be a port number (1-65535)")
    jwt_key = auth.get("jwt_key")
    if jwt_key is not None and not isinstance(jwt_key, str):
        raise SpurctlError(f"{path}: [auth] jwt_key must be a string")
    if jwt_key:
        register_secret(jwt_key)
        mode = _loose(path)
        if mode is not None:
            (warn or _warn)(
                f"{path} holds [auth] jwt_key and is readable by group or others "
                f"(mode {mode}); run `chmod 600 {path}`"
            )
    first = controller.get("first_job_id", 1)
    name = doc.get("cluster_name")
    return SpurConf(
        path=path,
        controller_hosts=tuple(hosts),
        controller_port=_port_of(str(controller.get("listen_addr", "")), DEFAULT_CONTROLLER_PORT),
        first_job_id=first if isinstance(first, int) else 1,
        jwt_key=jwt_key or None,
        auth_mode=str(auth["mode"]) if "mode" in auth else None,
        agent_port=agent_port,
        # None when the key is absent: Spur's default is "redacted", but a copy of
        # spur.conf without the key (a login node's) cannot vouch for the controller's.
        job_info_visibility=(
            str(controller["job_info_visibility"]).lower()
            if "job_info_visibility" in controller
            else None
        ),
        cluster_name=name if isinstance(name, str) and name else None,
    )


def controller_urls(flag: str | None, conf: SpurConf) -> list[str]:
    """--controller / $SPUR_CONTROLLER_ADDR > spur.conf hosts + port > localhost."""
    if flag:
        urls = [normalize_url(a) for a in flag.split(",") if a.strip()]
        if not urls:
            raise SpurctlError("--controller is empty; give at least one http://HOST:PORT")
        return urls
    if conf.controller_hosts:
        return [normalize_url(h, conf.controller_port) for h in conf.controller_hosts]
    return [DEFAULT_CONTROLLER]


def told(controller: str | None, conf_path: Path | None) -> Binding:
    """The cluster `spurctl collect` was told: --controller (its environment variable or
    the config file), else spur.conf's [controller] hosts, and spur.conf's cluster_name.
    Empty when it was told neither (the built-in localhost default names no cluster)."""
    from spurctl.sources.cluster_binding import Binding

    conf = load_conf(conf_path)
    urls = controller_urls(controller, conf) if controller or conf.controller_hosts else []
    return Binding(tuple(urls), conf.cluster_name)


def resolve_token(
    flag: str | None, home: Path | None = None, warn: Callable[[str], None] = _warn
) -> str | None:
    """--token / $SPUR_AUTH_TOKEN, else ~/.spur/token when only its owner can read it."""
    if flag:
        return _checked_token(flag.strip(), "--token / SPUR_AUTH_TOKEN")
    path = (home or Path.home()) / ".spur" / "token"
    try:
        st = path.stat()
    except OSError:
        return None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        warn(
            f"ignoring {path}: it is readable by group or others "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); run `chmod 600 {path}`"
        )
        return None
    try:
        token = bounded.read_text(path, bounded.KEY).strip()
    except (OSError, ValueError, bounded.TooLarge) as exc:  # ValueError: not UTF-8
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        warn(f"ignoring {path}: {why or type(exc).__name__}")
        return None
    return _checked_token(token, str(path)) if token else None


def _checked_token(token: str, source: str) -> str:
    # A bearer token travels as an HTTP/2 header value: grpc refuses anything but
    # visible ASCII with an opaque "Invalid metadata" and a C-core log line. Say
    # what is wrong instead, without echoing the token.
    if not all("!" <= c <= "~" for c in token):
        raise SpurctlError(
            f"the token from {source} has whitespace or non-ASCII characters inside it, "
            "which no Spur token has; copy it again (`spur token user`)"
        )
    return token


def resolve_jwt_key(
    flag: Path | None, conf: SpurConf, warn: Callable[[str], None] | None = None
) -> str | None:
    """The cluster key that mints the controller credential agents demand.

    spurd and spurctld sign and verify with the `[auth] jwt_key` TOML string's bytes,
    exactly (docs/spur-facts.md, "Authentication"): a key file is read the same way,
    but for the one line ending (LF or CRLF) that `echo` or an editor leaves at its
    end, which no TOML string can hold unescaped. Any other whitespace is part of
    the key, and gets a warning. A key file group or others can read gets a
    one-line warning, as a token file does.
    """
    if flag is not None:
        try:
            raw = bounded.read_bytes(flag, bounded.KEY, f"--jwt-key-file {flag}")
        except OSError as exc:
            raise SpurctlError(
                f"cannot read --jwt-key-file {flag}: {exc.strerror}; "
                "check the path and that you may read it"
            ) from None
        try:
            key = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SpurctlError(
                f"--jwt-key-file {flag} is not UTF-8 text, so it cannot hold the spur.conf "
                "[auth] jwt_key string; write the key exactly as spur.conf has it"
            ) from None
        key = key.removesuffix("\n").removesuffix("\r") if key.endswith("\n") else key
        if not key:
            raise SpurctlError(f"--jwt-key-file {flag} is empty; it must hold the cluster jwt_key")
        register_secret(key)
        if key != key.strip():
            (warn or _warn)(
                f"the key in --jwt-key-file {flag} begins or ends with whitespace, which is "
                "used as part of the key, as spurd uses the jwt_key string exactly; remove "
                "it unless spur.conf's jwt_key has it too"
            )
        mode = _loose(flag)
        if mode is not None:
            (warn or _warn)(
                f"--jwt-key-file {flag} is readable by group or others (mode {mode}); "
                f"run `chmod 600 {flag}`"
            )
        return key
    return conf.jwt_key


def load_agent_map(path: Path) -> dict[str, str]:
    """A JSON or TOML object mapping node name -> "host:port"."""
    return read_agent_map(path)[0]


def read_agent_map(path: Path) -> tuple[dict[str, str], Binding]:
    """The agent map's node -> "host:port" entries, and the cluster it names: a
    `controller` whose value is a URL (list) and a `cluster` whose value is no agent
    address bind it to a cluster (sources/cluster_binding.py)."""
    from spurctl.sources.cluster_binding import Binding, cluster_name, controller_list

    try:
        text = bounded.read_text(path, bounded.AGENT_MAP, f"--agent-map {path}")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise SpurctlError(f"cannot read --agent-map {path}: {why}") from None
    deep = too_deep(text)
    if deep is not None:
        raise SpurctlError(
            f'--agent-map {path} is {deep}; write an object like {{"gpu017": "10.0.3.17:6818"}}'
        )
    doc: Any
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        import tomllib

        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            raise SpurctlError(
                f"--agent-map {path} is neither JSON nor TOML; "
                'write an object like {"gpu017": "10.0.3.17:6818"}'
            ) from None
    if not isinstance(doc, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in doc.items()
    ):
        raise SpurctlError(
            f'--agent-map {path} must map node names to "host:port" strings, '
            'e.g. {"gpu017": "10.0.3.17:6818"}'
        )
    from spurctl.sources.agent_endpoints import FORM, AddressError, check_agent_address

    where = f"--agent-map {path}"
    controllers: tuple[str, ...] = ()
    cluster = None
    if "://" in doc.get("controller", ""):
        controllers = controller_list(doc.pop("controller"), where)
    if "cluster" in doc and ":" not in doc["cluster"]:
        cluster = cluster_name(doc.pop("cluster"), where)
    for node, address in doc.items():
        try:
            check_agent_address(address)
        except AddressError as exc:
            # One form only: a gRPC target URI would reach an agent no check here can see.
            raise SpurctlError(
                f"--agent-map {path}: {node!r}'s address {address!r} {exc}; {FORM}"
            ) from None
    return dict(doc), Binding(controllers, cluster)


@dataclass(frozen=True, slots=True)
class Connection:
    """Everything needed to talk to one cluster, resolved once per command."""

    controllers: tuple[str, ...]
    token: str | None = field(default=None, repr=False)
    jwt_key: str | None = field(default=None, repr=False)
    agent_port: int = DEFAULT_AGENT_PORT
    agent_map: dict[str, str] = field(default_factory=dict)
    # The cluster the agent-map file names (None: none).
    agent_map_binding: Binding | None = None
    timeout: float = 10.0
    tls_ca: bytes | None = field(default=None, repr=False)
    conf: SpurConf = field(default_factory=SpurConf)
    # The cluster's name, for report headers and prompts: spur.conf's cluster_name, else
    # what the config file calls it (sources/user_config.py); None when neither does.
    cluster: str | None = None

    def agent_address(self, node: str) -> str:
        return self.agent_map.get(node) or f"{node}:{self.agent_port}"

    def agent_map_lacks(self, node: str) -> bool:
        """Whether no --agent-map entry names `node`, so that its address is the guess
        node:port; without a map at all, every address is one."""
        return not self.agent_map.get(node)

    def not_found_doubt(self) -> str | None:
        """Why GetJob's NOT_FOUND might not prove an id untracked, or None when it does.

        Spur's `[controller] job_info_visibility = "owner_only"` answers NOT_FOUND
        for another user's job to a non-admin caller. Only an admin (or `root`)
        credential, no credential at all, or a spur.conf stating another setting
        explicitly rules that out: a spur.conf without the key (a login node's
        copy, say) cannot vouch for the controller's.
        """
        if not self.token:
            return None
        claims = token_claims(self.token)
        if claims.get("admin") is True or claims.get("sub") == "root":
            return None
        # Spur's other settings, stated explicitly; an unknown value proves nothing.
        setting = self.conf.job_info_visibility
        if setting in ("redacted", "full"):
            return None
        if setting == "owner_only":
            known = "spur.conf sets job_info_visibility = owner_only"
        elif setting is None:
            known = "no spur.conf states job_info_visibility"
        else:
            known = f"spur.conf's job_info_visibility = {setting!r} is not a setting spurctl knows"
        return (
            f"the credential is not an admin's and {known}, so GetJob's NOT_FOUND may hide "
            "another user's job: such ids are unverifiable (use an admin token, or --conf "
            "with the controller's spur.conf)"
        )

    def secrets(self) -> list[str]:
        """Values that must never appear in output, logs or the journal."""
        return [s for s in (self.token, self.jwt_key) if s]


def cluster_for(controller: str | None) -> str | None:
    """What the config file (sources/user_config.py) calls the cluster, when `controller`
    (the one this command reads) is the config's: a --controller naming another cluster
    must not be reported under the context's name."""
    from spurctl.sources import user_config

    config = user_config.load()
    return config.cluster_name if controller == config.controller else None


def connect_settings(
    *,
    controller: str | None = None,
    conf_path: Path | None = None,
    token: str | None = None,
    jwt_key_file: Path | None = None,
    agent_port: int | None = None,
    agent_map: Path | None = None,
    timeout: float = 10.0,
    tls_ca: Path | None = None,
    home: Path | None = None,
    cluster: str | None = None,
) -> Connection:
    """The cluster as the options, spur.conf and the environment name it. `cluster`:
    what the config file calls it; spur.conf's cluster_name must agree when it has one."""
    conf = load_conf(conf_path if conf_path is not None else _env_path("SPUR_CONF"))
    if cluster is not None and conf.cluster_name is not None and cluster != conf.cluster_name:
        raise SpurctlError(
            f"the config file calls this cluster {cluster!r}, but spur.conf "
            f"({conf.path or 'the default'}) says cluster_name = {conf.cluster_name!r}: set "
            "the context's conf (or --conf) to that cluster's spur.conf"
        )
    ca: bytes | None = None
    if tls_ca is not None:
        try:
            ca = bounded.read_bytes(tls_ca, bounded.TLS_CA, f"--tls-ca {tls_ca}")
        except OSError as exc:
            raise SpurctlError(f"cannot read --tls-ca {tls_ca}: {exc.strerror}") from None
    if timeout <= 0:
        raise SpurctlError("--timeout must be a positive number of seconds")
    resolved_token = resolve_token(token, home)
    key = resolve_jwt_key(jwt_key_file, conf)
    register_secret(resolved_token)
    register_secret(key)
    register_secret(conf.jwt_key)
    agents, binding = read_agent_map(agent_map) if agent_map else ({}, None)
    return Connection(
        controllers=tuple(controller_urls(controller, conf)),
        token=resolved_token,
        jwt_key=key,
        agent_port=agent_port or conf.agent_port,
        agent_map=agents,
        agent_map_binding=binding or None,
        timeout=timeout,
        tls_ca=ca,
        conf=conf,
        cluster=conf.cluster_name or cluster,
    )


def token_claims(token: str) -> dict[str, Any]:
    """The token's claims, unverified (only the controller can verify them)."""
    import jwt

    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return {}
    return claims if isinstance(claims, dict) else {}


def credential_uid(conn: Connection) -> int | None:
    """The uid the controller records for this connection's calls (Spur #860's reason_uid
    is the caller's uid from its JWT): the credential's `uid` claim, not this process's
    euid, which the controller never sees (an operator may run spurctl as any local user
    with the cluster's admin token). None without a credential: every anonymous caller is
    recorded alike, so the uid tells nothing."""
    if not conn.token:
        return None
    uid = token_claims(conn.token).get("uid", 0)
    return uid if type(uid) is int and uid >= 0 else None


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None
