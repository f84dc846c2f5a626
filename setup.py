"""Build script: the optional Cython parts (the ring decoder, the export's slice encoder) and the
injected CUPTI collector library.

Both native parts are optional so that ``pip install .`` works on a machine with no compiler
toolchain for them and no CUDA toolkit: without the decoder GPUFlow uses its pure-Python twin,
without the injection library ``gpuflow watch`` works and ``gpuflow run`` explains what is
missing. ``GPUFLOW_REQUIRE_EXTENSIONS=1`` (set by CI) turns any build failure, or missing
CUPTI headers, into a hard error. ``GPUFLOW_DISABLE_EXTENSIONS=1`` skips the native builds.
Everything else about the package is declared in pyproject.toml.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Distribution, Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent.resolve()
REQUIRE = os.environ.get("GPUFLOW_REQUIRE_EXTENSIONS") == "1"
DISABLE = os.environ.get("GPUFLOW_DISABLE_EXTENSIONS") == "1"
if REQUIRE and DISABLE:
    sys.exit("GPUFLOW_REQUIRE_EXTENSIONS and GPUFLOW_DISABLE_EXTENSIONS are both set")

INJECT_SOURCES = ["cupti_src/gpuflow_inject.c", "cupti_src/activity.c", "cupti_src/flusher.c",
                  "cupti_src/cupti_loader.c", "cupti_src/buffer_pool.c", "cupti_src/ring_producer.c",
                  "cupti_src/ring_handover.c"]
INJECT_OUTPUT = "gpuflow/collectors/cupti/libgpuflow_inject.so"
INJECT_VERSION_SCRIPT = "cupti_src/exports.map"
# the PM-sampling helper (docs/gpu-metrics.md, "PM sampling"): an executable, C and C++ parts
PM_SAMPLER_C = ["cupti_src/pm_ring.c"]
PM_SAMPLER_CXX = ["cupti_src/pm_sampler.cpp", "cupti_src/pm_session.cpp", "cupti_src/pm_api.cpp"]
PM_SAMPLER_OUTPUT = "gpuflow/collectors/pmsampling/gpuflow-pm-sampler"


def cupti_include_dirs() -> list[str]:
    """Directories holding cupti.h and cuda.h: CUDA_HOME, the conventional toolkit, or wheels."""
    candidates = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "include")
    candidates += [Path("/usr/local/cuda/include"), Path("/opt/cuda/include")]
    try:  # the nvidia-cuda-cupti / nvidia-cuda-runtime wheels (CUDA 13 layout, then 12)
        import nvidia  # type: ignore[import-not-found]

        for root in map(Path, nvidia.__path__):
            candidates += [root / "cu13" / "include", root / "cuda_cupti" / "include",
                           root / "cuda_runtime" / "include"]
    except ImportError:
        pass
    found = [str(p) for p in candidates if (p / "cupti_activity.h").exists() or (p / "cuda.h").exists()]
    return list(dict.fromkeys(found))


def have_cupti_headers(dirs: list[str]) -> bool:
    return any((Path(d) / "cupti_activity.h").exists() for d in dirs) and any(
        (Path(d) / "cuda.h").exists() for d in dirs
    )


class BuildNative(build_ext):
    """build_ext that tolerates failures (unless required) and also links the injection library."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - reported, then re-raised when required
            self._report("Cython decoder", exc)
        self.build_injection_library()
        self.build_pm_sampler()

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._report(ext.name, exc)

    def _report(self, what: str, exc: BaseException) -> None:
        if REQUIRE:
            raise exc
        print(f"WARNING: building {what} failed ({exc}); GPUFlow falls back where it can.",
              file=sys.stderr)

    def build_injection_library(self) -> None:
        if DISABLE:
            return
        sources = [s for s in INJECT_SOURCES if (HERE / s).exists()]
        includes = cupti_include_dirs()
        if len(sources) != len(INJECT_SOURCES) or not have_cupti_headers(includes):
            msg = ("CUPTI/CUDA headers not found (set CUDA_HOME); libgpuflow_inject.so not built, "
                   "`gpuflow run` will explain what is missing")
            if REQUIRE:
                raise RuntimeError(msg)
            print(f"WARNING: {msg}", file=sys.stderr)
            return
        if self.inplace:
            output = HERE / INJECT_OUTPUT
        else:
            output = Path(self.build_lib) / INJECT_OUTPUT
        output.parent.mkdir(parents=True, exist_ok=True)
        compiler = self.compiler
        try:
            objects = compiler.compile(
                sources,
                output_dir=self.build_temp,
                include_dirs=["cupti_src", *includes],
                extra_postargs=["-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-pthread",
                                "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
            )
            compiler.link_shared_object(
                objects,
                str(output),
                libraries=["dl", "rt"],
                extra_postargs=["-pthread", f"-Wl,--version-script={HERE / INJECT_VERSION_SCRIPT}",
                                "-Wl,--as-needed", "-Wl,-z,defs"],
            )
        except Exception as exc:  # noqa: BLE001
            self._report("libgpuflow_inject.so", exc)
            return
        print(f"built {output}")

    def build_pm_sampler(self) -> None:
        """gpuflow-pm-sampler, built like the injection library: the toolkit's headers only,
        libcuda and libcupti loaded at run time."""
        includes = cupti_include_dirs()
        if DISABLE:
            return
        if not any((Path(d) / "cupti_pmsampling.h").exists() for d in includes):
            msg = "CUPTI's PM sampling headers (CUDA 12.6+) not found; gpuflow-pm-sampler not built, no --gpu-metrics"
            if REQUIRE:
                raise RuntimeError(msg)
            print(f"WARNING: {msg}", file=sys.stderr)
            return
        output = (HERE if self.inplace else Path(self.build_lib)) / PM_SAMPLER_OUTPUT
        output.parent.mkdir(parents=True, exist_ok=True)
        warn = ["-O2", "-Wall", "-Wextra", "-pthread"]
        try:
            objects = self.compiler.compile(PM_SAMPLER_C, output_dir=self.build_temp, include_dirs=["cupti_src"],
                                            extra_postargs=["-std=c11", *warn])
            objects += self.compiler.compile(PM_SAMPLER_CXX, output_dir=self.build_temp,
                                             include_dirs=["cupti_src", *includes], extra_postargs=["-std=c++17", *warn])
            self.compiler.link_executable(objects, output.name, output_dir=str(output.parent), libraries=["dl"],
                                          extra_postargs=["-pthread", "-Wl,--as-needed"], target_lang="c++")
        except Exception as exc:  # noqa: BLE001
            self._report("gpuflow-pm-sampler", exc)
            return
        print(f"built {output}")


def extensions() -> list[Extension]:
    """The compiled twins: the ring decoder, the export's slice encoder (gpuflow/export), the
    window answer's integer-column writer (gpuflow/transport/json_ints.py), the stream's span
    row and kernel entry writer (gpuflow/transport/wire_text.py), the snapshot builder's kernel
    table helper (gpuflow/collectors/cupti/kernel_table.py), a hub's span row reader
    (gpuflow/collectors/fleet/lane_columns.py) and the snapshot objects' positional constructor
    (gpuflow/core/frozen.py)."""
    if DISABLE:
        return []
    sources = {"gpuflow.collectors.cupti._decoder_c": ("gpuflow/collectors/cupti/_decoder_c.pyx", ["cupti_src"]),
               "gpuflow.collectors.cupti._kernel_table_c": ("gpuflow/collectors/cupti/_kernel_table_c.pyx", []),
               "gpuflow.export._slices_c": ("gpuflow/export/_slices_c.pyx", []),
               "gpuflow.transport._json_ints_c": ("gpuflow/transport/_json_ints_c.pyx", []),
               "gpuflow.transport._wire_text_c": ("gpuflow/transport/_wire_text_c.pyx", []),
               "gpuflow.transport._lane_text_c": ("gpuflow/transport/_lane_text_c.pyx", []),
               "gpuflow.collectors.fleet._rows_c": ("gpuflow/collectors/fleet/_rows_c.pyx", []),
               "gpuflow.collectors.fleet._checks_c": ("gpuflow/collectors/fleet/_checks_c.pyx", []),
               "gpuflow.core._slots_c": ("gpuflow/core/_slots_c.pyx", [])}
    present = {name: spec for name, spec in sources.items() if (HERE / spec[0]).exists()}
    if not present:
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        if REQUIRE:
            raise
        print("WARNING: Cython is not installed; using the pure-Python twins", file=sys.stderr)
        return []
    exts = [Extension(name, [pyx], include_dirs=includes, extra_compile_args=["-O3"], optional=not REQUIRE)
            for name, (pyx, includes) in present.items()]
    return cythonize(exts, compiler_directives={"language_level": "3", "boundscheck": False,
                                                "wraparound": False, "cdivision": True})


class NativeDistribution(Distribution):
    """Always run build_ext: it also links the injection library, and the wheel is per-platform."""

    def has_ext_modules(self) -> bool:
        return not DISABLE


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildNative}, distclass=NativeDistribution)
