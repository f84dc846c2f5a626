"""The named GPU sets the fake NVML backend can play (``GPUFLOW_NVML_FAKE=<name>``).

Each scenario is data: how many GPUs, which processes hold which of them and how busy they are,
and which faults to inject. :mod:`gpuflow.collectors.nvml.fake_backend` turns it into NVML
answers. docs/nvml.md lists them for users; tests use them by name.

Constraints: pure data, no I/O. Scenario pids are made up (they need not exist on the machine):
the fake backend brings its own /proc stand-in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GIB = 1 << 30
MIB = 1 << 20
CHURN_FIRST_PID = 20_000  #: the ``churn`` scenario's n-th short job (from 0) has this pid + n

#: Backend methods that the ``notsupported`` scenario answers with NVMLError_NotSupported.
OPTIONAL_FIELDS = frozenset({
    "utilization", "temperature", "power_usage", "power_limit", "clock_sm", "clock_mem",
    "pcie_tx", "pcie_rx", "mig_mode", "process_utilization",
    "energy", "clock_event_reasons", "encoder_utilization", "decoder_utilization",
    "memory_temperature", "ecc_counts", "remapped_rows", "pcie_replay_counter", "pcie_link",
    "pcie_link_max", "xid_watch", "gpm_supported",
})


@dataclass(frozen=True)
class FakeProcess:
    pid: int
    name: str
    user: str
    argv: tuple[str, ...]
    devices: dict[int, str]  #: device index → "compute" | "graphics" | "compute+graphics"
    memory_bytes: int  #: per device it holds
    busy: float  #: 0..1, how hard it drives its GPUs; 0 = holds memory, runs nothing
    cgroup: str | None = None  #: its /proc/<pid>/cgroup (its container, pod or job); None: unreadable


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    gpus: int = 1
    processes: tuple[FakeProcess, ...] = ()
    gpu_name: str = "NVIDIA H200"
    unsupported: frozenset[str] = frozenset()  #: methods answering NotSupported
    wddm: bool = False  #: per-process memory is ULLONG_MAX, per-process utilization NotSupported
    lost_gpu: int | None = None  #: this GPU answers GPU_IS_LOST ...
    lose_after: int = 3  #: ... once it has answered this many polls
    init_error: int | None = None  #: an NVML_ERROR_* code nvmlInit fails with
    vanishing_pids: frozenset[int] = frozenset()  #: NVML lists them, /proc no longer has them
    vanish_after: int = 4  #: NVML stops listing the vanishing pids after this many polls
    slow: dict[str, float] = field(default_factory=dict)  #: method → seconds each call takes
    mig_enabled: frozenset[int] = frozenset()
    #: every this many polls a short job starts on the next GPU in turn (0: none) ...
    churn_every: int = 0
    churn_life: int = 0  #: ... and holds it for this many polls; its pid is CHURN_FIRST_PID + its number
    gpm: bool = True  #: GPM supported (Hopper and newer); False: an older GPU
    #: GPM metric ids answered per metric with NotSupported (code 3) on every GPU
    gpm_not_offered: frozenset[int] = frozenset()
    pcie: tuple[int, int] = (5, 16)  #: maximum PCIe generation and width
    #: NVLink pairs: GPU → (peer GPU, links between them); a GPU not listed has no NVLink
    nvlink_peers: dict[int, tuple[int, int]] = field(default_factory=dict)
    nvlink_down: frozenset[tuple[int, int]] = frozenset()  #: (GPU, link) pairs that are down
    #: GPU → (after this many polls, XID code): one critical XID event
    xid_events: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: GPU → ECC counters (corrected volatile, uncorrected volatile, corrected aggregate,
    #: uncorrected aggregate); others 0
    ecc: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    #: GPU → remapped rows (correctable, uncorrectable, pending, failure); others 0
    remapped: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    pcie_replays: dict[int, int] = field(default_factory=dict)  #: GPU → PCIe replay counter
    media: dict[int, tuple[int, int]] = field(default_factory=dict)  #: GPU → encoder, decoder %
    #: MIG GPU instance id → how busy it is (0..1), on every GPU in mig_enabled
    mig_instances: dict[int, float] = field(default_factory=dict)


def _job(pid, name, user, argv, devices, mem, busy, kind="compute", cgroup=None) -> FakeProcess:
    return FakeProcess(pid, name, user, tuple(argv), {d: kind for d in devices}, mem, busy, cgroup)


#: the ``pods`` scenario's workloads: pod UIDs, container ids and a Slurm job, as a fake
#: Kubernetes API server and kubelet in the tests describe them
POD_TRAIN_UID = "0f8f4f3c-6a4e-4c1e-9a55-2b1d7e9c1a01"
POD_SERVE_UID = "7c2d9b10-3e8a-4f6b-8c1d-5a9e0b2c4d02"
CONTAINER_TRAIN = "3b7e" + "a1" * 30
CONTAINER_SERVE = "9d04" + "c2" * 30
CONTAINER_DOCKER = "e5f6" + "d3" * 30
SLURM_JOB = 81234
_CGROUP_TRAIN = ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
                 f"{POD_TRAIN_UID.replace('-', '_')}.slice/cri-containerd-{CONTAINER_TRAIN}.scope\n")
_CGROUP_SERVE = ("0::/kubepods.slice/kubepods-pod"
                 f"{POD_SERVE_UID.replace('-', '_')}.slice/crio-{CONTAINER_SERVE}.scope\n")
_CGROUP_DOCKER = f"0::/system.slice/docker-{CONTAINER_DOCKER}.scope\n"
_CGROUP_SLURM = (f"12:memory:/slurm/uid_1000/job_{SLURM_JOB}/step_0/task_0\n"
                 f"4:devices:/slurm/uid_1000/job_{SLURM_JOB}/step_0/task_0\n"
                 "1:name=systemd:/system.slice/slurmd.service\n"
                 "0::/system.slice/slurmd.service\n")


_TRAIN = _job(4242, "python", "alice", ["python", "train.py", "--api-key=sk-not-a-real-secret",
                                          "--epochs", "90"], range(4), 30 * GIB, 0.9)
_SERVE = _job(5150, "python3", "bob", ["/usr/bin/python3", "-m", "vllm.entrypoints.api_server",
                                        "--model", "llama"], (4, 5), 60 * GIB, 0.6)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario(
        "single", "one GPU, one training process", gpus=1,
        processes=(_job(3131, "python", "alice", ["python", "demo.py"], (0,), 8 * GIB, 0.7),),
    ),
    Scenario(
        "shared8", "8 GPUs: a job on 4 of them, a server on 2, a compute+graphics app, an idle "
        "notebook, a display server; GPU 7 in MIG mode (three GPU instances); NVLink bridges "
        "between GPUs 0-1, 2-3, 4-5 and 6-7 (4 links each, GPU 3's link 3 down); an XID 31 on "
        "GPU 5; ECC errors and a remapped row on GPU 3", gpus=8,
        processes=(
            _TRAIN,
            _SERVE,
            _job(6001, "blender", "carol", ["blender", "-b", "scene.blend"], (6,), 4 * GIB, 0.4,
                 kind="compute+graphics"),
            _job(6100, "python", "dave", ["/opt/conda/bin/python", "-m", "ipykernel_launcher",
                                          "-f", "kernel.json"], (6,), 1 * GIB, 0.0),
            _job(2077, "Xorg", "root", ["/usr/lib/xorg/Xorg", ":0"], (6,), 300 * MIB, 0.02,
                 kind="graphics"),
        ),
        mig_enabled=frozenset({7}),
        mig_instances={1: 0.6, 2: 0.0, 5: 0.25},
        nvlink_peers={0: (1, 4), 1: (0, 4), 2: (3, 4), 3: (2, 4), 4: (5, 4), 5: (4, 4), 6: (7, 4),
                      7: (6, 4)},
        nvlink_down=frozenset({(3, 3)}),
        xid_events={5: (4, 31)},
        ecc={3: (2, 0, 14, 0)},
        remapped={3: (1, 0, 0, 0)},
        pcie_replays={2: 3},
        media={6: (12, 7)},
    ),
    Scenario(
        "oldgpu", "2 older GPUs (Volta, PCIe gen 3): no GPM (NotSupported: SM activity, occupancy "
        "and GPM's PCIe rates are null), no row remapping, no memory temperature; NVLink between "
        "them (6 links)", gpus=2, gpu_name="Tesla V100-SXM2-32GB",
        processes=(_job(4800, "python", "alice", ["python", "train.py"], (0, 1), 12 * GIB, 0.8),),
        gpm=False, pcie=(3, 16), nvlink_peers={0: (1, 6), 1: (0, 6)},
        unsupported=frozenset({"remapped_rows", "memory_temperature"}),
    ),
    Scenario(
        "wddm", "2 GPUs as Windows/WSL2 (WDDM) shows them: per-process memory and utilization "
        "not available", gpus=2,
        processes=(_job(4300, "python.exe", "alice", ["python.exe", "train.py"], (0, 1), 10 * GIB,
                        0.8),),
        wddm=True,
    ),
    Scenario(
        "notsupported", "2 GPUs answering NotSupported for every optional field (like some "
        "vGPU and consumer boards)", gpus=2,
        processes=(_job(4400, "python", "alice", ["python", "infer.py"], (0,), 6 * GIB, 0.5),),
        unsupported=OPTIONAL_FIELDS,
    ),
    Scenario(
        "lost", "4 GPUs; GPU 2 falls off the bus after 3 polls (NVML_ERROR_GPU_IS_LOST)", gpus=4,
        processes=(_job(4500, "python", "alice", ["torchrun", "--nproc-per-node=4", "ddp.py"],
                        range(4), 20 * GIB, 0.85),),
        lost_gpu=2, lose_after=3,
    ),
    Scenario(
        "nodriver", "no NVIDIA driver: nvmlInit fails as if libnvidia-ml.so.1 were missing",
        gpus=0, init_error=12,  # NVML_ERROR_LIBRARY_NOT_FOUND
    ),
    Scenario(
        "vanishing", "2 GPUs; a short-lived process is listed by NVML but has already left /proc",
        gpus=2,
        processes=(
            _job(4600, "python", "alice", ["python", "steady.py"], (0, 1), 5 * GIB, 0.6),
            _job(4601, "python", "alice", ["python", "-c", "import torch"], (0, 1), 500 * MIB, 0.3),
        ),
        vanishing_pids=frozenset({4601}),
    ),
    Scenario(
        "churn", "8 GPUs: shared8's job on GPUs 0-3 and server on 4-5, and a short job starting "
        "every 30 polls on the next GPU in turn, each holding it for 300 polls (processes come "
        "and go all day)", gpus=8,
        processes=(_TRAIN, _SERVE),
        churn_every=30, churn_life=300,
    ),
    Scenario(
        "pods", "4 GPUs of a Kubernetes node: a containerd pod on GPUs 0-1, a CRI-O pod on GPU 2, "
        "a Docker container and a Slurm job (cgroup v1) on GPU 3, a host process on GPU 2",
        gpus=4,
        processes=(
            _job(7001, "python", "alice", ["python", "train.py"], (0, 1), 20 * GIB, 0.8,
                 cgroup=_CGROUP_TRAIN),
            _job(7002, "python3", "bob", ["python3", "-m", "server"], (2,), 12 * GIB, 0.5,
                 cgroup=_CGROUP_SERVE),
            _job(7003, "python", "carol", ["python", "notebook.py"], (3,), 4 * GIB, 0.3,
                 cgroup=_CGROUP_DOCKER),
            _job(7004, "lmp", "dave", ["lmp", "-in", "in.lj"], (3,), 6 * GIB, 0.6,
                 cgroup=_CGROUP_SLURM),
            _job(7005, "python", "erin", ["python", "bench.py"], (2,), 2 * GIB, 0.2,
                 cgroup="0::/user.slice/user-1004.slice/session-3.scope\n"),
        ),
    ),
    Scenario(
        "hang", "1 GPU whose utilization call takes 2 s, longer than the polling interval",
        gpus=1,
        processes=(_job(4700, "python", "alice", ["python", "slow.py"], (0,), 2 * GIB, 0.5),),
        slow={"utilization": 2.0},
    ),
)}
