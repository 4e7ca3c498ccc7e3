"""A simulated Spur cluster on loopback (spurctld + one spurd per node): tests, demo, benchmarks."""

from spurctl_sim.agent_service import AgentCancel
from spurctl_sim.controller_service import ControllerCancel
from spurctl_sim.incident_scenario import incident
from spurctl_sim.large_scenario import large
from spurctl_sim.post_wipe_scenario import post_wipe
from spurctl_sim.scenario import (
    SCENARIO_SCHEMA,
    Scenario,
    read_scenario,
    scenario_from_dict,
    scenario_to_dict,
    write_scenario,
)
from spurctl_sim.server import Refusal, SimCluster
from spurctl_sim.state import HeartbeatDecision, spur_reclaim_arm

# The spurctl release it is built on (sim/pyproject.toml pins spurctl to it).
__version__ = "0.1.0"

__all__ = [
    "SCENARIO_SCHEMA",
    "AgentCancel",
    "ControllerCancel",
    "HeartbeatDecision",
    "Refusal",
    "Scenario",
    "SimCluster",
    "incident",
    "large",
    "post_wipe",
    "read_scenario",
    "scenario_from_dict",
    "scenario_to_dict",
    "spur_reclaim_arm",
    "write_scenario",
]
