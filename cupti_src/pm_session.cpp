/*
 * pm_session.cpp — one GPU's PM sampling session (pm_session.h).
 *
 * The metrics are tried slot by slot in the order they matter (warps in flight, SM active, DRAM,
 * PCIe), each slot from its candidate names in turn, and a candidate stays only if every metric
 * chosen so far still fits one pass: PM sampling cannot replay, so a set needing two passes is
 * refused by CUPTI, and a name a chip does not know is skipped, not fatal. What was left out is
 * in the ring's `slots_collected` and the status detail.
 */
#include "pm_session.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

namespace {

enum Scale { AS_IS = 0, RATIO_TO_PCT = 1, BYTES_TO_RATE = 2 };

struct Candidate {
    int slot;
    const char *name;
    int scale;
};

// In the order slots are chosen: a slot earlier in this list wins room in the one pass.
const Candidate kCandidates[] = {
    {GPUFLOW_PM_WARPS_AVG, "sm__warps_active.avg.pct_of_peak_sustained_elapsed", AS_IS},
    {GPUFLOW_PM_WARPS_MIN, "sm__warps_active.min.pct_of_peak_sustained_elapsed", AS_IS},
    {GPUFLOW_PM_WARPS_MAX, "sm__warps_active.max.pct_of_peak_sustained_elapsed", AS_IS},
    {GPUFLOW_PM_SM_ACTIVE_AVG, "sm__cycles_active.avg.pct_of_peak_sustained_elapsed", AS_IS},
    {GPUFLOW_PM_SM_ACTIVE_AVG, "sm__cycles_active.avg.per_cycle_elapsed", RATIO_TO_PCT},
    {GPUFLOW_PM_SM_ACTIVE_MIN, "sm__cycles_active.min.pct_of_peak_sustained_elapsed", AS_IS},
    {GPUFLOW_PM_SM_ACTIVE_MIN, "sm__cycles_active.min.per_cycle_elapsed", RATIO_TO_PCT},
    {GPUFLOW_PM_SM_ACTIVE_MAX, "sm__cycles_active.max.pct_of_peak_sustained_elapsed", AS_IS},
    {GPUFLOW_PM_SM_ACTIVE_MAX, "sm__cycles_active.max.per_cycle_elapsed", RATIO_TO_PCT},
    {GPUFLOW_PM_DRAM_PCT, "dram__throughput.avg.pct_of_peak_sustained_elapsed", AS_IS},
    {GPUFLOW_PM_DRAM_PCT, "dramc__throughput.avg.pct_of_peak_sustained_elapsed", AS_IS},
    {GPUFLOW_PM_PCIE_READ_BPS, "pcie__read_bytes.sum", BYTES_TO_RATE},
    {GPUFLOW_PM_PCIE_READ_BPS, "pcie__read_bytes.sum.per_second", AS_IS},
    {GPUFLOW_PM_PCIE_WRITE_BPS, "pcie__write_bytes.sum", BYTES_TO_RATE},
    {GPUFLOW_PM_PCIE_WRITE_BPS, "pcie__write_bytes.sum.per_second", AS_IS},
};

const char *kNoPrivilege =
    "the GPU's counters are for administrators here (NVreg_RestrictProfilingToAdminUsers=1): "
    "run gpuflow as root or with CAP_SYS_ADMIN, or set that module option to 0";
const char *kBusy =
    "another tool holds this GPU's counters (Nsight Compute, Nsight Systems GPU metrics, DCGM "
    "profiling); GPUFlow does not take them";

uint64_t realtime_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

template <typename T>
T params(size_t size)
{
    T p;
    memset(&p, 0, sizeof p);
    p.structSize = size;
    return p;
}
#define PARAMS(T) params<T>(T##_STRUCT_SIZE)

}  // namespace

bool PmSession::fail(uint32_t status, int32_t error, const char *step, const char *advice)
{
    pm_ring_set_status(&ring_, status, error, "%s: %s", step, advice);
    return false;
}

bool PmSession::cupti_fail(CUptiResult r, const char *step)
{
    char what[120];
    snprintf(what, sizeof what, "%s: %s", step, pm_cupti_text(&api_, r));
    bool counters_step = strstr(step, "Enable") || strstr(step, "Start") || strstr(step, "Availability");
    if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES || r == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
        return fail(GPUFLOW_PM_NO_PRIVILEGE, r, what, kNoPrivilege);
    if (r == CUPTI_ERROR_HARDWARE_BUSY || r == CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED
        || (r == CUPTI_ERROR_INVALID_OPERATION && counters_step))
        return fail(GPUFLOW_PM_COUNTERS_BUSY, r, what, kBusy);
    if (r == CUPTI_ERROR_NOT_SUPPORTED || r == CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED
        || r == CUPTI_ERROR_NOT_COMPATIBLE || (r >= CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED
                                               && r <= CUPTI_ERROR_INVALID_CHIP_NAME))
        return fail(GPUFLOW_PM_UNSUPPORTED, r, what, "this GPU or its configuration cannot be PM-sampled");
    return fail(GPUFLOW_PM_CUPTI_ERROR, r, what, "PM sampling could not start");
}

bool PmSession::open_device()
{
    gpuflow_pm_header *h = ring_.header;
    CUresult r = api_.cuInit(0);
    if (r != CUDA_SUCCESS) {
        char why[160];
        snprintf(why, sizeof why, "the CUDA driver did not start (%s)", pm_cuda_text(&api_, r));
        return fail(r == CUDA_ERROR_NO_DEVICE ? GPUFLOW_PM_NO_DEVICE : GPUFLOW_PM_NO_DRIVER, r, "cuInit", why);
    }
    int count = 0;
    r = api_.cuDeviceGetCount(&count);
    if (r == CUDA_SUCCESS && count > 0)
        h->device_count = (uint32_t)count;
    CUdevice dev = 0;
    if (r != CUDA_SUCCESS || s_.device >= count || api_.cuDeviceGet(&dev, s_.device) != CUDA_SUCCESS) {
        char why[120];
        snprintf(why, sizeof why, "there is no CUDA device %d (%d found)", s_.device, count);
        return fail(GPUFLOW_PM_NO_DEVICE, r, "cuDeviceGet", why);
    }
    h->device_index = (uint32_t)s_.device;
    char name[GPUFLOW_PM_TEXT_MAX] = {0};
    if (api_.cuDeviceGetName(name, sizeof name - 1, dev) == CUDA_SUCCESS)
        pm_copy_text(h->device_name, GPUFLOW_PM_TEXT_MAX, name);
    CUuuid uuid;
    if (api_.cuDeviceGetUuid(&uuid, dev) == CUDA_SUCCESS)
        memcpy(h->uuid, uuid.bytes, sizeof h->uuid);
    int sms = 0;
    if (api_.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == CUDA_SUCCESS && sms > 0)
        h->sm_count = (uint32_t)sms;
    return true;
}

bool PmSession::host_object(const std::vector<const char *> &metrics, size_t *passes)
{
    drop_host_object();
    auto init = PARAMS(CUpti_Profiler_Host_Initialize_Params);
    init.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    init.pChipName = chip_.c_str();
    init.pCounterAvailabilityImage = availability_.data();
    CUptiResult r = api_.cuptiProfilerHostInitialize(&init);
    if (r != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiProfilerHostInitialize");
    host_ = init.pHostObject;
    *passes = 0;
    auto add = PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
    add.pHostObject = host_;
    add.ppMetricNames = const_cast<const char **>(metrics.data());
    add.numMetrics = metrics.size();
    if (api_.cuptiProfilerHostConfigAddMetrics(&add) != CUPTI_SUCCESS)
        return true;   // a name this chip does not know: no pass at all
    auto size = PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
    size.pHostObject = host_;
    if ((r = api_.cuptiProfilerHostGetConfigImageSize(&size)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiProfilerHostGetConfigImageSize");
    config_.assign(size.configImageSize, 0);
    auto image = PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
    image.pHostObject = host_;
    image.configImageSize = config_.size();
    image.pConfigImage = config_.data();
    if ((r = api_.cuptiProfilerHostGetConfigImage(&image)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiProfilerHostGetConfigImage");
    auto count = PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
    count.configImageSize = config_.size();
    count.pConfigImage = config_.data();
    if ((r = api_.cuptiProfilerHostGetNumOfPasses(&count)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiProfilerHostGetNumOfPasses");
    *passes = count.numOfPasses;
    return true;
}

void PmSession::drop_host_object()
{
    if (!host_)
        return;
    auto p = PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
    p.pHostObject = host_;
    api_.cuptiProfilerHostDeinitialize(&p);
    host_ = nullptr;
}

bool PmSession::pick_metrics()
{
    metrics_.clear();
    slot_of_.clear();
    scale_of_.clear();
    uint32_t done = 0;
    for (const Candidate &c : kCandidates) {
        if (done & (1u << c.slot))
            continue;
        std::vector<const char *> trial = metrics_;
        trial.push_back(c.name);
        size_t passes = 0;
        if (!host_object(trial, &passes))
            return false;
        if (passes != 1)
            continue;
        metrics_ = trial;
        slot_of_.push_back(c.slot);
        scale_of_.push_back(c.scale);
        chosen_name_[c.slot] = c.name;
        done |= 1u << c.slot;
    }
    if (metrics_.empty())
        return fail(GPUFLOW_PM_UNSUPPORTED, 0, "choosing metrics",
                    "this chip offers none of the metrics GPUFlow samples in one pass");
    size_t passes = 0;
    if (!host_object(metrics_, &passes))   // the host object kept for evaluating samples
        return false;
    values_.assign(metrics_.size(), 0.0);
    ring_.header->slots_collected = done;
    return true;
}

bool PmSession::counter_data_image()
{
    uint32_t per_pass = (uint32_t)((uint64_t)s_.decode_ms * 1000000ull / s_.interval_ns);
    auto size = PARAMS(CUpti_PmSampling_GetCounterDataSize_Params);
    size.pPmSamplingObject = sampler_;
    size.pMetricNames = const_cast<const char **>(metrics_.data());
    size.numMetrics = metrics_.size();
    size.maxSamples = per_pass * 2 + 256;
    CUptiResult r = api_.cuptiPmSamplingGetCounterDataSize(&size);
    if (r != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiPmSamplingGetCounterDataSize");
    image_.assign(size.counterDataSize, 0);
    auto init = PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params);
    init.pPmSamplingObject = sampler_;
    init.counterDataSize = image_.size();
    init.pCounterData = image_.data();
    if ((r = api_.cuptiPmSamplingCounterDataImageInitialize(&init)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiPmSamplingCounterDataImageInitialize");
    image_blank_ = image_;   // restored after each decode: cheaper than initialising again
    return true;
}

bool PmSession::configure()
{
    auto init = PARAMS(CUpti_Profiler_Initialize_Params);
    CUptiResult r = api_.cuptiProfilerInitialize(&init);
    if (r != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiProfilerInitialize");
    profiler_up_ = true;
    auto chip = PARAMS(CUpti_Device_GetChipName_Params);
    chip.deviceIndex = (size_t)s_.device;
    if ((r = api_.cuptiDeviceGetChipName(&chip)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiDeviceGetChipName");
    chip_ = chip.pChipName ? chip.pChipName : "";
    pm_copy_text(ring_.header->chip_name, GPUFLOW_PM_CHIP_MAX, chip_.c_str());
    auto support = PARAMS(CUpti_Profiler_DeviceSupported_Params);
    support.cuDevice = (CUdevice)s_.device;
    support.api = CUPTI_PROFILER_PM_SAMPLING;
    if ((r = api_.cuptiProfilerDeviceSupported(&support)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiProfilerDeviceSupported");
    if (support.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
        const char *why = support.architecture != CUPTI_PROFILER_CONFIGURATION_SUPPORTED ? "its architecture"
            : support.vGpu != CUPTI_PROFILER_CONFIGURATION_SUPPORTED ? "a virtual GPU without profiling enabled"
            : support.confidentialCompute != CUPTI_PROFILER_CONFIGURATION_SUPPORTED ? "confidential computing"
            : support.cmp != CUPTI_PROFILER_CONFIGURATION_SUPPORTED ? "a mining processor (CMP)"
            : support.sli != CUPTI_PROFILER_CONFIGURATION_SUPPORTED ? "SLI"
            : support.wsl != CUPTI_PROFILER_CONFIGURATION_SUPPORTED ? "WSL" : "its configuration";
        char text[160];
        snprintf(text, sizeof text, "CUPTI cannot PM-sample this device: %s", why);
        return fail(GPUFLOW_PM_UNSUPPORTED, CUPTI_ERROR_NOT_SUPPORTED, "cuptiProfilerDeviceSupported", text);
    }
    auto avail = PARAMS(CUpti_PmSampling_GetCounterAvailability_Params);
    avail.deviceIndex = (size_t)s_.device;
    if ((r = api_.cuptiPmSamplingGetCounterAvailability(&avail)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiPmSamplingGetCounterAvailability");
    availability_.assign(avail.counterAvailabilityImageSize, 0);
    avail.pCounterAvailabilityImage = availability_.data();
    if ((r = api_.cuptiPmSamplingGetCounterAvailability(&avail)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiPmSamplingGetCounterAvailability");
    if (!pick_metrics())
        return false;
    auto enable = PARAMS(CUpti_PmSampling_Enable_Params);
    enable.deviceIndex = (size_t)s_.device;
    if ((r = api_.cuptiPmSamplingEnable(&enable)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiPmSamplingEnable");
    sampler_ = enable.pPmSamplingObject;
    auto config = PARAMS(CUpti_PmSampling_SetConfig_Params);
    config.pPmSamplingObject = sampler_;
    config.configSize = config_.size();
    config.pConfig = config_.data();
    config.hardwareBufferSize = s_.hw_buffer_bytes;
    config.samplingInterval = s_.interval_ns;
    config.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    config.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
    if ((r = api_.cuptiPmSamplingSetConfig(&config)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiPmSamplingSetConfig");
    if (!counter_data_image())
        return false;
    auto start = PARAMS(CUpti_PmSampling_Start_Params);
    start.pPmSamplingObject = sampler_;
    if ((r = api_.cuptiPmSamplingStart(&start)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiPmSamplingStart");
    started_ = true;
    return true;
}

bool PmSession::start()
{
    if (!open_device())
        return false;
    ring_.header->interval_ns = s_.interval_ns;
    if (!configure()) {
        int32_t err = ring_.header->error;
        if (context_taken_ || (err != CUPTI_ERROR_INVALID_CONTEXT && err != CUPTI_ERROR_NOT_INITIALIZED))
            return false;
        // CUPTI would not work without a context on the device: hold the primary one, say so
        stop();
        CUdevice dev = 0;
        CUcontext ctx = nullptr;
        if (api_.cuDeviceGet(&dev, s_.device) != CUDA_SUCCESS || api_.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS
            || api_.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
            return false;
        context_taken_ = true;
        ring_.header->flags |= GPUFLOW_PM_FLAG_CONTEXT_HELD;
        __atomic_store_n(&ring_.header->status, (uint32_t)GPUFLOW_PM_STARTING, __ATOMIC_RELEASE);
        if (!configure())
            return false;
    }
    uint32_t version = 0;
    api_.cuptiGetVersion(&version);
    int collected = __builtin_popcount(ring_.header->slots_collected);
    pm_ring_set_status(&ring_, GPUFLOW_PM_OK, 0, "CUPTI %u, chip %s, every %.3g ms, %d of %d metrics%s", version,
                       chip_.c_str(), s_.interval_ns / 1e6, collected, (int)GPUFLOW_PM_SLOT_COUNT,
                       context_taken_ ? ", holding a CUDA context" : "");
    clock_sync();
    return true;
}

void PmSession::clock_sync()
{
    gpuflow_pm_record rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = GPUFLOW_PM_CLOCK;
    uint64_t before = realtime_ns(), cupti = 0;
    if (api_.cuptiGetTimestamp(&cupti) != CUPTI_SUCCESS)
        return;
    uint64_t after = realtime_ns();
    rec.start = cupti;
    rec.end = before + (after - before) / 2;
    pm_ring_push(&ring_, &rec);
}

bool PmSession::restart()
{
    auto stop_p = PARAMS(CUpti_PmSampling_Stop_Params);
    stop_p.pPmSamplingObject = sampler_;
    api_.cuptiPmSamplingStop(&stop_p);
    image_ = image_blank_;
    auto start_p = PARAMS(CUpti_PmSampling_Start_Params);
    start_p.pPmSamplingObject = sampler_;
    CUptiResult r = api_.cuptiPmSamplingStart(&start_p);
    return r == CUPTI_SUCCESS || cupti_fail(r, "cuptiPmSamplingStart (after the GPU's buffer overflowed)");
}

bool PmSession::decode()
{
    gpuflow_pm_header *h = ring_.header;
    for (int round = 0; round < 8; ++round) {
        auto p = PARAMS(CUpti_PmSampling_DecodeData_Params);
        p.pPmSamplingObject = sampler_;
        p.pCounterDataImage = image_.data();
        p.counterDataImageSize = image_.size();
        CUptiResult r = api_.cuptiPmSamplingDecodeData(&p);
        if (r == CUPTI_ERROR_OUT_OF_MEMORY) {   // the GPU's buffer overflowed: its samples are lost
            __atomic_store_n(&h->hw_overflows, h->hw_overflows + 1, __ATOMIC_RELAXED);
            return restart();
        }
        if (r != CUPTI_SUCCESS)
            return cupti_fail(r, "cuptiPmSamplingDecodeData");
        if (p.overflow)
            __atomic_store_n(&h->hw_overflows, h->hw_overflows + 1, __ATOMIC_RELAXED);
        auto info = PARAMS(CUpti_PmSampling_GetCounterDataInfo_Params);
        info.pCounterDataImage = image_.data();
        info.counterDataImageSize = image_.size();
        if ((r = api_.cuptiPmSamplingGetCounterDataInfo(&info)) != CUPTI_SUCCESS)
            return cupti_fail(r, "cuptiPmSamplingGetCounterDataInfo");
        uint64_t now = 0;
        api_.cuptiGetTimestamp(&now);
        for (size_t i = 0; i < info.numCompletedSamples; ++i) {
            auto s = PARAMS(CUpti_PmSampling_CounterData_GetSampleInfo_Params);
            s.pPmSamplingObject = sampler_;
            s.pCounterDataImage = image_.data();
            s.counterDataImageSize = image_.size();
            s.sampleIndex = i;
            if (api_.cuptiPmSamplingCounterDataGetSampleInfo(&s) != CUPTI_SUCCESS || s.endTimestamp <= s.startTimestamp
                || s.endTimestamp <= last_end_)
                continue;
            auto e = PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
            e.pHostObject = host_;
            e.pCounterDataImage = image_.data();
            e.counterDataImageSize = image_.size();
            e.rangeIndex = i;
            e.ppMetricNames = const_cast<const char **>(metrics_.data());
            e.numMetrics = metrics_.size();
            e.pMetricValues = values_.data();
            if (api_.cuptiProfilerHostEvaluateToGpuValues(&e) != CUPTI_SUCCESS)
                continue;
            gpuflow_pm_record rec;
            memset(&rec, 0, sizeof rec);
            rec.kind = GPUFLOW_PM_SAMPLE;
            rec.start = s.startTimestamp;
            rec.end = s.endTimestamp;
            double seconds = (s.endTimestamp - s.startTimestamp) / 1e9;
            for (size_t m = 0; m < metrics_.size(); ++m) {
                double v = values_[m];
                if (scale_of_[m] == RATIO_TO_PCT)
                    v *= 100.0;
                else if (scale_of_[m] == BYTES_TO_RATE)
                    v /= seconds;
                if (v != v)   // NaN: CUPTI had no value
                    continue;
                rec.values[slot_of_[m]] = (float)v;
                rec.valid |= (uint16_t)(1u << slot_of_[m]);
            }
            last_end_ = s.endTimestamp;
            if (now && (s.endTimestamp > now + 1000000000ull || s.endTimestamp + 60000000000ull < now))
                h->flags |= GPUFLOW_PM_FLAG_CLOCK_SUSPECT;
            pm_ring_push(&ring_, &rec);
        }
        image_ = image_blank_;
        if (p.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL)
            break;
    }
    __atomic_store_n(&h->decode_passes, h->decode_passes + 1, __ATOMIC_RELAXED);
    return true;
}

void PmSession::stop()
{
    if (started_) {
        auto p = PARAMS(CUpti_PmSampling_Stop_Params);
        p.pPmSamplingObject = sampler_;
        api_.cuptiPmSamplingStop(&p);
        started_ = false;
        decode();   // what the GPU completed before it stopped
    }
    if (sampler_) {
        auto p = PARAMS(CUpti_PmSampling_Disable_Params);
        p.pPmSamplingObject = sampler_;
        api_.cuptiPmSamplingDisable(&p);
        sampler_ = nullptr;
    }
    drop_host_object();
    if (profiler_up_) {
        auto p = PARAMS(CUpti_Profiler_DeInitialize_Params);
        api_.cuptiProfilerDeInitialize(&p);
        profiler_up_ = false;
    }
}
