"""What the user reads when GPU metrics cannot be had: the real ``gpuflow run --gpu-metrics``'s
end-of-run summary and the real ``gpuflow doctor`` on this machine (no NVIDIA driver: the helper
says so in its own words), the doctor's probe against the fake driver's scenarios, and the
privilege check's verdicts."""

from __future__ import annotations

import pytest

from cli_process import gpuflow, gpuflow_env
from gpuflow.collectors.pmsampling import doctor
from gpuflow.collectors.pmsampling.options import OPTIONS


def test_the_run_summary_says_the_gpu_metrics_were_refused_and_why(built, tmp_path):
    no_driver = tmp_path / "no-libcuda"
    no_driver.mkdir()
    env = gpuflow_env(GPUFLOW_DISABLED_PLUGINS="cupti,nvml", GPUFLOW_PM_SAMPLER=str(built["sampler"]),
                      LD_LIBRARY_PATH=str(no_driver))
    result = gpuflow("run", "--port", "0", "--gpu-metrics", "--", "sleep", "1", env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    summary = result.stderr[result.stderr.index("end-of-run summary"):]
    assert "the agent reported:" in summary
    assert ("warning: [pmsampling] GPU 0: no GPU metrics (no_driver): the CUDA driver could not be loaded: "
            "libcuda.so.1") in summary


def test_without_the_flag_the_summary_says_nothing_of_gpu_metrics(tmp_path):
    env = gpuflow_env(GPUFLOW_DISABLED_PLUGINS="cupti,nvml")
    result = gpuflow("run", "--port", "0", "--", "true", env=env, timeout=60)
    assert result.returncode == 0 and "pmsampling" not in result.stderr


def test_doctor_says_what_gpu_metrics_need_and_probes_when_asked(built):
    env = gpuflow_env(GPUFLOW_DISABLED_PLUGINS="cupti,nvml", GPUFLOW_PM_SAMPLER=str(built["sampler"]),
                      GPUFLOW_GPU_METRICS="1")
    lines = gpuflow("doctor", env=env, timeout=60).stdout.splitlines()
    assert "[ ok ] PM sampler         gpuflow-pm-sampler built" in lines
    counters = [x for x in lines if "GPU counters" in x]
    assert len(counters) == 1 and counters[0].startswith(("[ ok ]", "[warn]"))
    probe = [x for x in lines if "PM sampling" in x]
    assert len(probe) == 1 and probe[0].startswith("[warn] PM sampling") and "no_driver" in probe[0], lines
    off = gpuflow("doctor", env={**env, "GPUFLOW_GPU_METRICS": "0"}, timeout=60).stdout
    assert "PM sampling " not in off   # the probe starts the driver: only with --gpu-metrics on


def options(built, **given):
    return OPTIONS.resolve({"cuda_lib": str(built["fake"]), "cupti_lib": str(built["fake"]), **given}, {})


def test_the_probe_says_what_it_samples_or_why_not(built):
    ok = doctor.probe(str(built["sampler"]), options(built), {"GPUFLOW_FAKE_PM": "ok"})
    assert ok.ok and ok.needed_for == "speed"
    assert ok.detail == "GPU 0 samples: CUPTI 130001, chip GH100, every 1 ms, 8 of 9 metrics (8 metrics)"
    busy = doctor.probe(str(built["sampler"]), options(built), {"GPUFLOW_FAKE_PM": "busy"})
    assert not busy.ok and busy.detail.startswith("GPU 0: counters_busy: cuptiPmSamplingEnable: "
                                                  "CUPTI_ERROR_HARDWARE_BUSY: another tool holds")


@pytest.mark.parametrize("restricted, allowed, ok, words", [
    (None, True, False, "no NVIDIA driver"),
    (False, False, True, "open to every user"),
    (True, True, True, "this user is one"),
    (True, False, False, "--gpu-metrics needs root or CAP_SYS_ADMIN"),
])
def test_the_privilege_check(restricted, allowed, ok, words):
    check = doctor.privilege_check(restricted, allowed)
    assert check.ok is ok and words in check.detail and check.needed_for == "speed"


def test_the_drivers_setting_is_read_from_its_params(tmp_path):
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\nEnableMSI: 1\n")
    assert doctor.admin_only(str(params)) is True
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert doctor.admin_only(str(params)) is False
    assert doctor.admin_only(str(tmp_path / "missing")) is None
