"""The cgroup parser over real-shaped cgroup files of each runtime and layout (tests/fleettools/cgroups),
and what a workload could forge inside a cgroup subtree delegated to it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuflow.workload.cgroup import MAX_BYTES, NOTHING, CgroupIds, parse_cgroup, read_cgroup_file

FIXTURES = Path(__file__).parent / "cgroups"
POD = "5a1c3e2f-8b4d-4f0e-9c6a-1d2e3f405161"
C1 = "8f14e45fceea167a5a36dedd4bea2543b16f9a3c1e7b2d9a0c4e6f8a1b3d5c7e"
C2 = "c9f0f895fb98ab9159f51fd0297e236d0a1b2c3d4e5f60718293a4b5c6d7e8f9"
C3 = "45c48cce2e2d7fbdea1afc51c7c6ad26aabbccddeeff00112233445566778899"

EXPECTED = {
    # Kubernetes: containerd (systemd driver, v2 and v1), cgroupfs driver (runtime not named)
    "containerd-systemd-v2": CgroupIds(C1, "containerd", POD, None),
    "containerd-systemd-v1": CgroupIds(C1, "containerd", POD, None),
    "containerd-cgroupfs-v1": CgroupIds(C1, None, POD, None),
    # CRI-O: guaranteed QoS (no class slice), a container with a sub-cgroup of its own, v1; its
    # monitor (conmon) is in the pod but in no container
    "crio-systemd-v2": CgroupIds(C2, "cri-o", POD, None),
    "crio-systemd-v2-nested": CgroupIds(C2, "cri-o", POD, None),
    "crio-systemd-v1": CgroupIds(C2, "cri-o", POD, None),
    "crio-conmon-v2": CgroupIds(None, None, POD, None),
    # Docker as Kubernetes' runtime (cri-dockerd, dockershim), and alone
    "cri-dockerd-systemd-v2": CgroupIds(C3, "docker", POD, None),
    "dockershim-cgroupfs-v1": CgroupIds(C3, None, POD, None),
    "docker-systemd-v2": CgroupIds(C3, "docker", None, None),
    "docker-cgroupfs-v1": CgroupIds(C3, "docker", None, None),
    "docker-systemd-hybrid": CgroupIds(C3, "docker", None, None),
    # Slurm: v2 (slurmstepd.scope), v1 with the unified line showing only slurmd, several slurmds
    "slurm-v2": CgroupIds(None, None, None, 4242),
    "slurm-v2-batch": CgroupIds(None, None, None, 4243),
    "slurm-v1": CgroupIds(None, None, None, 4242),
    "slurm-v1-multiple-slurmd": CgroupIds(None, None, None, 77),
    # the agent in a cgroup namespace of its own reads paths relative to its root
    "private-cgroupns-v2": CgroupIds(C1, "containerd", POD, None),
    # a static pod's UID is a 32-digit hash
    "static-pod-v2": CgroupIds(C1, "containerd", "6f1a0c2e9b8d7f6e5d4c3b2a19081726", None),
    # host processes
    "host-session-v2": NOTHING,
    "host-service-v1": NOTHING,
    # forged: names made below a subtree the workload controls are not taken; the outermost
    # placement (the kubelet's, the runtime's) is
    "forged-in-user-delegation": NOTHING,
    "forged-inside-a-pod": CgroupIds(C1, "containerd", POD, None),
    "forged-docker-in-user-delegation": NOTHING,
    "forged-slurm-below-a-container": CgroupIds(C3, "docker", None, None),
    # ids that do not match their strict patterns, and bytes that are not a cgroup file
    "uppercase-ids": NOTHING,
    "short-container-id": CgroupIds(None, None, POD, None),
    "garbage": NOTHING,
}


def test_every_fixture_has_an_expectation():
    assert sorted(p.stem for p in FIXTURES.glob("*.cgroup")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_cgroup_file_names_its_container_pod_and_job(name):
    assert parse_cgroup((FIXTURES / f"{name}.cgroup").read_bytes()) == EXPECTED[name]


def test_nothing_and_unreadable_are_nothing():
    assert parse_cgroup(None) is NOTHING and parse_cgroup(b"") is NOTHING
    assert NOTHING.empty and not EXPECTED["slurm-v2"].empty


def test_a_long_file_is_read_and_parsed_only_up_to_its_bound(tmp_path):
    """A path of a million segments: read up to MAX_BYTES, parsed in bounded time."""
    (tmp_path / "77").mkdir()
    line = "0::/" + "/".join(["kubepods.slice"] * 200_000) + "\n"
    (tmp_path / "77" / "cgroup").write_text(line)
    raw = read_cgroup_file(str(tmp_path), 77)
    assert raw is not None and len(raw) == MAX_BYTES
    assert parse_cgroup(raw) is NOTHING


def test_a_fifo_in_place_of_the_file_does_not_block(tmp_path):
    (tmp_path / "78").mkdir()
    os.mkfifo(tmp_path / "78" / "cgroup")
    assert parse_cgroup(read_cgroup_file(str(tmp_path), 78)) is NOTHING


def test_a_missing_process_is_none(tmp_path):
    assert read_cgroup_file(str(tmp_path), 79) is None


def test_this_process_own_cgroup_file_parses():
    """The real /proc of this machine: whatever it says, the parser gives an answer."""
    raw = read_cgroup_file("/proc", os.getpid())
    assert raw is not None and raw.endswith(b"\n")
    assert isinstance(parse_cgroup(raw), CgroupIds)
