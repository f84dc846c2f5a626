/*
 * pm_api.cpp — loading the CUDA driver and CUPTI for the PM-sampling helper (pm_api.h).
 *
 * libcuda is the driver's (libcuda.so.1); libcupti is the one named on the command line, else the
 * CUDA 13 then 12 soname on the library path. A libcupti without the PM sampling entry points
 * (before CUDA 12.6) is told apart from a missing one, so the status can say which.
 */
#include "pm_api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

namespace {

template <typename F>
bool resolve(void *lib, const char *name, F *slot)
{
    void *p = dlsym(lib, name);
    *slot = reinterpret_cast<F>(p);
    return p != nullptr;
}

void *open_first(const char *given, const char *const *sonames, char *why, unsigned why_size)
{
    if (given && *given) {
        void *lib = dlopen(given, RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            snprintf(why, why_size, "%s", dlerror());
        return lib;
    }
    for (const char *const *s = sonames; *s; ++s) {
        void *lib = dlopen(*s, RTLD_NOW | RTLD_LOCAL);
        if (lib)
            return lib;
        snprintf(why, why_size, "%s", dlerror());
    }
    return nullptr;
}

}  // namespace

PmLoadResult pm_api_load(PmApi *api, const char *cuda_path, const char *cupti_path, char *why, unsigned why_size)
{
    memset(api, 0, sizeof *api);
    static const char *const cuda_names[] = {"libcuda.so.1", nullptr};
    static const char *const cupti_names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so", nullptr};
    void *cuda = open_first(cuda_path, cuda_names, why, why_size);
    if (!cuda)
        return PM_NO_CUDA;
    bool ok = resolve(cuda, "cuInit", &api->cuInit) && resolve(cuda, "cuDeviceGetCount", &api->cuDeviceGetCount)
        && resolve(cuda, "cuDeviceGet", &api->cuDeviceGet) && resolve(cuda, "cuDeviceGetName", &api->cuDeviceGetName)
        && resolve(cuda, "cuDeviceGetAttribute", &api->cuDeviceGetAttribute)
        && resolve(cuda, "cuGetErrorName", &api->cuGetErrorName)
        && resolve(cuda, "cuDevicePrimaryCtxRetain", &api->cuDevicePrimaryCtxRetain)
        && resolve(cuda, "cuCtxSetCurrent", &api->cuCtxSetCurrent)
        && (resolve(cuda, "cuDeviceGetUuid_v2", &api->cuDeviceGetUuid) || resolve(cuda, "cuDeviceGetUuid", &api->cuDeviceGetUuid));
    if (!ok) {
        snprintf(why, why_size, "the CUDA driver lacks an entry point the sampler needs");
        return PM_NO_CUDA;
    }
    void *cupti = open_first(cupti_path, cupti_names, why, why_size);
    if (!cupti)
        return PM_NO_CUPTI;
    ok = resolve(cupti, "cuptiGetResultString", &api->cuptiGetResultString)
        && resolve(cupti, "cuptiGetTimestamp", &api->cuptiGetTimestamp)
        && resolve(cupti, "cuptiGetVersion", &api->cuptiGetVersion)
        && resolve(cupti, "cuptiProfilerInitialize", &api->cuptiProfilerInitialize)
        && resolve(cupti, "cuptiProfilerDeInitialize", &api->cuptiProfilerDeInitialize)
        && resolve(cupti, "cuptiDeviceGetChipName", &api->cuptiDeviceGetChipName)
        && resolve(cupti, "cuptiProfilerDeviceSupported", &api->cuptiProfilerDeviceSupported);
    if (!ok) {
        snprintf(why, why_size, "this libcupti lacks the profiler entry points");
        return PM_OLD_CUPTI;
    }
    ok = resolve(cupti, "cuptiProfilerHostInitialize", &api->cuptiProfilerHostInitialize)
        && resolve(cupti, "cuptiProfilerHostDeinitialize", &api->cuptiProfilerHostDeinitialize)
        && resolve(cupti, "cuptiProfilerHostConfigAddMetrics", &api->cuptiProfilerHostConfigAddMetrics)
        && resolve(cupti, "cuptiProfilerHostGetConfigImageSize", &api->cuptiProfilerHostGetConfigImageSize)
        && resolve(cupti, "cuptiProfilerHostGetConfigImage", &api->cuptiProfilerHostGetConfigImage)
        && resolve(cupti, "cuptiProfilerHostGetNumOfPasses", &api->cuptiProfilerHostGetNumOfPasses)
        && resolve(cupti, "cuptiProfilerHostEvaluateToGpuValues", &api->cuptiProfilerHostEvaluateToGpuValues)
        && resolve(cupti, "cuptiPmSamplingGetCounterAvailability", &api->cuptiPmSamplingGetCounterAvailability)
        && resolve(cupti, "cuptiPmSamplingEnable", &api->cuptiPmSamplingEnable)
        && resolve(cupti, "cuptiPmSamplingDisable", &api->cuptiPmSamplingDisable)
        && resolve(cupti, "cuptiPmSamplingSetConfig", &api->cuptiPmSamplingSetConfig)
        && resolve(cupti, "cuptiPmSamplingGetCounterDataSize", &api->cuptiPmSamplingGetCounterDataSize)
        && resolve(cupti, "cuptiPmSamplingCounterDataImageInitialize", &api->cuptiPmSamplingCounterDataImageInitialize)
        && resolve(cupti, "cuptiPmSamplingStart", &api->cuptiPmSamplingStart)
        && resolve(cupti, "cuptiPmSamplingStop", &api->cuptiPmSamplingStop)
        && resolve(cupti, "cuptiPmSamplingDecodeData", &api->cuptiPmSamplingDecodeData)
        && resolve(cupti, "cuptiPmSamplingGetCounterDataInfo", &api->cuptiPmSamplingGetCounterDataInfo)
        && resolve(cupti, "cuptiPmSamplingCounterDataGetSampleInfo", &api->cuptiPmSamplingCounterDataGetSampleInfo);
    if (!ok) {
        snprintf(why, why_size, "this libcupti has no PM sampling API (it came with CUDA 12.6)");
        return PM_OLD_CUPTI;
    }
    return PM_LOADED;
}

const char *pm_cupti_text(const PmApi *api, CUptiResult result)
{
    static thread_local char number[32];
    const char *s = nullptr;
    if (api->cuptiGetResultString && api->cuptiGetResultString(result, &s) == CUPTI_SUCCESS && s && *s)
        return s;
    snprintf(number, sizeof number, "CUPTI error %d", (int)result);
    return number;
}

const char *pm_cuda_text(const PmApi *api, CUresult result)
{
    static thread_local char number[32];
    const char *s = nullptr;
    if (api->cuGetErrorName && api->cuGetErrorName(result, &s) == CUDA_SUCCESS && s && *s)
        return s;
    snprintf(number, sizeof number, "CUDA error %d", (int)result);
    return number;
}
