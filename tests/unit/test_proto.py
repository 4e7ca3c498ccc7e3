"""The generated protobuf code carries the field numbers Spur's wire uses."""

from spurctl.proto import slurm_pb2 as pb


def test_field_numbers_match_spur_wire_contract() -> None:
    # A few numbers whose drift would silently misread real controllers.
    job = pb.JobInfo.DESCRIPTOR.fields_by_name
    assert job["state"].number == 7
    assert job["submit_time"].number == 10
    assert job["nodelist"].number == 23
    assert job["resources"].number == 40
    assert job["array_task_id"].number == 51
    node = pb.NodeInfo.DESCRIPTOR.fields_by_name
    assert node["alloc_resources"].number == 11
    assert node["slurmd_start_time"].number == 32
    assert node["labels"].number == 51
    assert pb.JobState.Value("JOB_REQUEUED") == 12
    assert pb.NodeState.Value("NODE_SUSPENDED") == 8
    services = pb.DESCRIPTOR.services_by_name
    assert pb.DESCRIPTOR.package == "slurm"
    assert "CancelJob" in services["SlurmAgent"].methods_by_name
    assert "GetJobMetrics" in services["SlurmController"].methods_by_name
