"""The code that runs on a node or a gateway, apart from the admin host's sources/.

The node scan (node_scan and the standard-library modules it reads with: node_files,
node_procs, cgroup_limits, stepd_sessions, agent_config), the shipped scanner that
sends them to a node's `python3 -` (shipped_scan) and the gateway relay (gateway_relay).
These import only errors, model, holdings, hostlist, each other and the standard
library (shipped_scan reads a node's answer back through sources/): never decide/,
act/, render/, a use case or a command.
"""
