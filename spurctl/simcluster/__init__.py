"""A simulated Spur cluster on loopback (spurctld + one spurd per node): tests, demo, benchmarks."""

from spurctl.simcluster.agent_service import AgentCancel
from spurctl.simcluster.controller_service import ControllerCancel
from spurctl.simcluster.incident_scenario import incident
from spurctl.simcluster.large_scenario import large
from spurctl.simcluster.post_wipe_scenario import post_wipe
from spurctl.simcluster.scenario import (
    SCENARIO_SCHEMA,
    Scenario,
    read_scenario,
    scenario_from_dict,
    scenario_to_dict,
    write_scenario,
)
from spurctl.simcluster.server import Refusal, SimCluster
from spurctl.simcluster.state import HeartbeatDecision, spur_reclaim_arm

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
