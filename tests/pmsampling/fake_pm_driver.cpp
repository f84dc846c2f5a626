/*
 * fake_pm_driver.cpp — stands in for the GPU under the real gpuflow-pm-sampler: one shared
 * library that exports the CUDA driver entry points and the CUPTI profiler and PM sampling entry
 * points the sampler resolves (cupti_src/pm_api.cpp), built from the toolkit's own headers, so
 * the sampler's whole sequence runs here without a GPU. Built by tests/pmsampling/conftest.py;
 * the sampler loads it with --cuda-lib and --cupti-lib.
 *
 * GPUFLOW_FAKE_PM picks a scenario: ok (default), no_privilege, busy, unsupported, no_device,
 * no_driver, needs_context, overflow, decode_fails, hang. In every scenario the device is
 * "Fake H200" with 132 SMs and the UUID bytes 0x10..0x1f; the chip rejects the
 * sm__cycles_active *.pct_of_peak_sustained_elapsed names (the sampler must fall back to
 * *.per_cycle_elapsed, a ratio), and a set of more than 8 metrics takes two passes (so the
 * ninth slot, PCIe writes, is left out: "not available").
 *
 * Samples: sample k (k = 0, 1, ... since Start) covers [t0 + k·I, t0 + (k+1)·I) in CUPTI time,
 * which here is CLOCK_REALTIME ns, and a decode hands out every sample whose end has passed.
 * Its values are fake_value(k, metric) below; tests/pmsampling/fake_values.py computes the same.
 *
 * Constraints: test-only; single-threaded use (the sampler calls from one thread).
 */
#include <cuda.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

namespace {

struct Image {
    uint64_t magic, first, count, max;
};
const uint64_t kImageMagic = 0x46414b45494d47ull;

uint64_t g_interval = 1000000, g_t0 = 0, g_next = 0;
int g_decodes = 0;
bool g_context = false, g_started = false;

const char *scenario()
{
    const char *s = getenv("GPUFLOW_FAKE_PM");
    return s && *s ? s : "ok";
}
bool is(const char *name) { return strcmp(scenario(), name) == 0; }

uint64_t now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double fake_value(uint64_t k, const char *metric)
{
    double b = (double)(k % 50) * 2.0;   // 0, 2, ..., 98
    bool mn = strstr(metric, ".min.") != nullptr, mx = strstr(metric, ".max.") != nullptr;
    if (strstr(metric, "sm__warps_active"))
        return mn ? b / 2 : mx ? (b + 1 > 100 ? 100 : b + 1) : b;
    if (strstr(metric, "sm__cycles_active")) {   // a ratio: the sampler makes it a percentage
        double pct = mn ? (100 - b) / 2 : mx ? 100 - b / 4 : 100 - b;
        return pct / 100.0;
    }
    if (strstr(metric, "throughput"))
        return 7.5;
    if (strstr(metric, "pcie__read_bytes"))
        return 1000.0 * (double)(k % 10);   // bytes in the sample
    if (strstr(metric, "pcie__write_bytes"))
        return 500.0;
    return 0;
}

bool known_metric(const char *m)
{
    if (strstr(m, "sm__cycles_active") && strstr(m, "pct_of_peak_sustained_elapsed"))
        return false;
    return strstr(m, "sm__warps_active") || strstr(m, "sm__cycles_active") || strstr(m, "dram__throughput")
        || (strstr(m, "pcie__") && !strstr(m, "per_second"));
}

struct Host {
    size_t metrics = 0;
    bool bad = false;
};

}  // namespace

extern "C" {

// -- the driver -------------------------------------------------------------------------------------
CUresult cuInit(unsigned int)
{
    if (is("no_device"))
        return CUDA_ERROR_NO_DEVICE;
    if (is("no_driver"))
        return CUDA_ERROR_UNKNOWN;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int *n) { *n = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice *d, int i) { if (i != 0) return CUDA_ERROR_INVALID_DEVICE; *d = 0; return CUDA_SUCCESS; }
CUresult cuDeviceGetName(char *name, int len, CUdevice) { strncpy(name, "Fake H200", (size_t)len); return CUDA_SUCCESS; }
CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice)
{
    for (int i = 0; i < 16; ++i)
        u->bytes[i] = (char)(0x10 + i);
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice)
{
    *v = a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 132 : 0;
    return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice) { *c = (CUcontext)0x1; g_context = true; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }

// -- CUPTI ------------------------------------------------------------------------------------------
CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
    switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: *s = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; break;
    case CUPTI_ERROR_HARDWARE_BUSY: *s = "CUPTI_ERROR_HARDWARE_BUSY"; break;
    case CUPTI_ERROR_INVALID_CONTEXT: *s = "CUPTI_ERROR_INVALID_CONTEXT"; break;
    default: *s = "CUPTI_ERROR_UNKNOWN"; break;
    }
    return CUPTI_SUCCESS;
}
CUptiResult cuptiGetTimestamp(uint64_t *t) { *t = now_ns(); return CUPTI_SUCCESS; }
CUptiResult cuptiGetVersion(uint32_t *v) { *v = 130001; return CUPTI_SUCCESS; }
CUptiResult cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params *)
{
    if (is("hang"))
        for (;;)
            pause();
    return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerDeInitialize(CUpti_Profiler_DeInitialize_Params *) { return CUPTI_SUCCESS; }
CUptiResult cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params *p) { p->pChipName = "GH100"; return CUPTI_SUCCESS; }
CUptiResult cuptiProfilerDeviceSupported(CUpti_Profiler_DeviceSupported_Params *p)
{
    bool vgpu = is("unsupported");
    p->architecture = p->sli = p->confidentialCompute = p->cmp = p->wsl = CUPTI_PROFILER_CONFIGURATION_SUPPORTED;
    p->vGpu = vgpu ? CUPTI_PROFILER_CONFIGURATION_DISABLED : CUPTI_PROFILER_CONFIGURATION_SUPPORTED;
    p->isSupported = vgpu ? CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED : CUPTI_PROFILER_CONFIGURATION_SUPPORTED;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingGetCounterAvailability(CUpti_PmSampling_GetCounterAvailability_Params *p)
{
    p->counterAvailabilityImageSize = 64;
    if (p->pCounterAvailabilityImage)
        memset(p->pCounterAvailabilityImage, 0xa5, 64);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostInitialize(CUpti_Profiler_Host_Initialize_Params *p)
{
    p->pHostObject = reinterpret_cast<CUpti_Profiler_Host_Object *>(new Host());
    return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostDeinitialize(CUpti_Profiler_Host_Deinitialize_Params *p)
{
    delete reinterpret_cast<Host *>(p->pHostObject);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostConfigAddMetrics(CUpti_Profiler_Host_ConfigAddMetrics_Params *p)
{
    Host *h = reinterpret_cast<Host *>(p->pHostObject);
    for (size_t i = 0; i < p->numMetrics; ++i)
        if (!known_metric(p->ppMetricNames[i]))
            return CUPTI_ERROR_INVALID_METRIC_NAME;
    h->metrics += p->numMetrics;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostGetConfigImageSize(CUpti_Profiler_Host_GetConfigImageSize_Params *p)
{
    p->configImageSize = 16;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostGetConfigImage(CUpti_Profiler_Host_GetConfigImage_Params *p)
{
    Host *h = reinterpret_cast<Host *>(p->pHostObject);
    memset(p->pConfigImage, 0, p->configImageSize);
    memcpy(p->pConfigImage, &h->metrics, sizeof h->metrics);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostGetNumOfPasses(CUpti_Profiler_Host_GetNumOfPasses_Params *p)
{
    size_t metrics = 0;
    memcpy(&metrics, p->pConfigImage, sizeof metrics);
    p->numOfPasses = metrics > 8 ? 2 : 1;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingEnable(CUpti_PmSampling_Enable_Params *p)
{
    if (is("no_privilege"))
        return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
    if (is("busy"))
        return CUPTI_ERROR_HARDWARE_BUSY;
    if (is("needs_context") && !g_context)
        return CUPTI_ERROR_INVALID_CONTEXT;
    p->pPmSamplingObject = reinterpret_cast<CUpti_PmSampling_Object *>(0x2);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingDisable(CUpti_PmSampling_Disable_Params *) { return CUPTI_SUCCESS; }
CUptiResult cuptiPmSamplingSetConfig(CUpti_PmSampling_SetConfig_Params *p)
{
    if (p->triggerMode != CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL || p->samplingInterval == 0)
        return CUPTI_ERROR_INVALID_PARAMETER;
    g_interval = p->samplingInterval;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingGetCounterDataSize(CUpti_PmSampling_GetCounterDataSize_Params *p)
{
    p->counterDataSize = sizeof(Image) + p->maxSamples;   // the fake keeps no per-sample data
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingCounterDataImageInitialize(CUpti_PmSampling_CounterDataImage_Initialize_Params *p)
{
    Image im = {kImageMagic, 0, 0, p->counterDataSize - sizeof(Image)};
    memcpy(p->pCounterData, &im, sizeof im);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingStart(CUpti_PmSampling_Start_Params *)
{
    if (!g_started) {
        g_t0 = now_ns();
        g_started = true;
    }
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingStop(CUpti_PmSampling_Stop_Params *) { return CUPTI_SUCCESS; }
CUptiResult cuptiPmSamplingDecodeData(CUpti_PmSampling_DecodeData_Params *p)
{
    ++g_decodes;
    if (is("decode_fails") && g_decodes > 10)
        return CUPTI_ERROR_UNKNOWN;
    if (is("overflow") && g_decodes == 5) {   // the GPU's buffer overflowed: those samples are lost
        g_next = (now_ns() - g_t0) / g_interval;
        return CUPTI_ERROR_OUT_OF_MEMORY;
    }
    Image im;
    memcpy(&im, p->pCounterDataImage, sizeof im);
    if (im.magic != kImageMagic)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (im.count == 0)
        im.first = g_next;
    uint64_t done = (now_ns() - g_t0) / g_interval;   // samples whose end has passed
    uint64_t n = done > g_next ? done - g_next : 0;
    if (n > im.max - im.count)
        n = im.max - im.count;
    im.count += n;
    g_next += n;
    memcpy(p->pCounterDataImage, &im, sizeof im);
    p->decodeStopReason = im.count == im.max ? CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
                                             : CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
    p->overflow = 0;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingGetCounterDataInfo(CUpti_PmSampling_GetCounterDataInfo_Params *p)
{
    Image im;
    memcpy(&im, p->pCounterDataImage, sizeof im);
    p->numTotalSamples = im.max;
    p->numPopulatedSamples = p->numCompletedSamples = im.count;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingCounterDataGetSampleInfo(CUpti_PmSampling_CounterData_GetSampleInfo_Params *p)
{
    Image im;
    memcpy(&im, p->pCounterDataImage, sizeof im);
    if (p->sampleIndex >= im.count)
        return CUPTI_ERROR_INVALID_PARAMETER;
    uint64_t k = im.first + p->sampleIndex;
    p->startTimestamp = g_t0 + k * g_interval;
    p->endTimestamp = p->startTimestamp + g_interval;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostEvaluateToGpuValues(CUpti_Profiler_Host_EvaluateToGpuValues_Params *p)
{
    Image im;
    memcpy(&im, p->pCounterDataImage, sizeof im);
    if (p->rangeIndex >= im.count)
        return CUPTI_ERROR_INVALID_PARAMETER;
    uint64_t k = im.first + p->rangeIndex;
    for (size_t i = 0; i < p->numMetrics; ++i)
        p->pMetricValues[i] = fake_value(k, p->ppMetricNames[i]);
    return CUPTI_SUCCESS;
}

}  // extern "C"
