/*
 * pm_api.h — the CUDA driver and CUPTI entry points the PM-sampling helper uses, loaded at run
 * time (pm_api.cpp), never linked: a machine without a driver or with an older CUPTI gets a status
 * and a sentence, not a loader error, and the helper builds wherever the headers are.
 *
 * Constraints: the headers provide types only; every pointer here is resolved with dlsym from the
 * libcuda and libcupti the helper was told to load (or the usual sonames).
 */
#ifndef GPUFLOW_PM_API_H
#define GPUFLOW_PM_API_H

#include <cuda.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_result.h>
#include <cupti_target.h>

struct PmApi {
    // libcuda
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetUuid)(CUuuid *, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*cuGetErrorName)(CUresult, const char **);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    // libcupti: common
    CUptiResult (*cuptiGetResultString)(CUptiResult, const char **);
    CUptiResult (*cuptiGetTimestamp)(uint64_t *);
    CUptiResult (*cuptiGetVersion)(uint32_t *);
    // libcupti: profiler target and host
    CUptiResult (*cuptiProfilerInitialize)(CUpti_Profiler_Initialize_Params *);
    CUptiResult (*cuptiProfilerDeInitialize)(CUpti_Profiler_DeInitialize_Params *);
    CUptiResult (*cuptiDeviceGetChipName)(CUpti_Device_GetChipName_Params *);
    CUptiResult (*cuptiProfilerDeviceSupported)(CUpti_Profiler_DeviceSupported_Params *);
    CUptiResult (*cuptiProfilerHostInitialize)(CUpti_Profiler_Host_Initialize_Params *);
    CUptiResult (*cuptiProfilerHostDeinitialize)(CUpti_Profiler_Host_Deinitialize_Params *);
    CUptiResult (*cuptiProfilerHostConfigAddMetrics)(CUpti_Profiler_Host_ConfigAddMetrics_Params *);
    CUptiResult (*cuptiProfilerHostGetConfigImageSize)(CUpti_Profiler_Host_GetConfigImageSize_Params *);
    CUptiResult (*cuptiProfilerHostGetConfigImage)(CUpti_Profiler_Host_GetConfigImage_Params *);
    CUptiResult (*cuptiProfilerHostGetNumOfPasses)(CUpti_Profiler_Host_GetNumOfPasses_Params *);
    CUptiResult (*cuptiProfilerHostEvaluateToGpuValues)(CUpti_Profiler_Host_EvaluateToGpuValues_Params *);
    // libcupti: PM sampling (CUDA 12.6+)
    CUptiResult (*cuptiPmSamplingGetCounterAvailability)(CUpti_PmSampling_GetCounterAvailability_Params *);
    CUptiResult (*cuptiPmSamplingEnable)(CUpti_PmSampling_Enable_Params *);
    CUptiResult (*cuptiPmSamplingDisable)(CUpti_PmSampling_Disable_Params *);
    CUptiResult (*cuptiPmSamplingSetConfig)(CUpti_PmSampling_SetConfig_Params *);
    CUptiResult (*cuptiPmSamplingGetCounterDataSize)(CUpti_PmSampling_GetCounterDataSize_Params *);
    CUptiResult (*cuptiPmSamplingCounterDataImageInitialize)(CUpti_PmSampling_CounterDataImage_Initialize_Params *);
    CUptiResult (*cuptiPmSamplingStart)(CUpti_PmSampling_Start_Params *);
    CUptiResult (*cuptiPmSamplingStop)(CUpti_PmSampling_Stop_Params *);
    CUptiResult (*cuptiPmSamplingDecodeData)(CUpti_PmSampling_DecodeData_Params *);
    CUptiResult (*cuptiPmSamplingGetCounterDataInfo)(CUpti_PmSampling_GetCounterDataInfo_Params *);
    CUptiResult (*cuptiPmSamplingCounterDataGetSampleInfo)(CUpti_PmSampling_CounterData_GetSampleInfo_Params *);
};

// What loading found: 0 and nothing else on success; otherwise which library failed and why.
enum PmLoadResult { PM_LOADED = 0, PM_NO_CUDA = 1, PM_NO_CUPTI = 2, PM_OLD_CUPTI = 3 };

// Load libcuda (`cuda_path`, or libcuda.so.1) and libcupti (`cupti_path`, or libcupti.so.13, .12)
// and resolve every entry point. On failure `why` (of `why_size` bytes) says what was missing.
PmLoadResult pm_api_load(PmApi *api, const char *cuda_path, const char *cupti_path, char *why, unsigned why_size);

// CUPTI's name for a result ("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"), or its number as text.
const char *pm_cupti_text(const PmApi *api, CUptiResult result);
// The driver's name for a result ("CUDA_ERROR_NO_DEVICE"), or its number as text.
const char *pm_cuda_text(const PmApi *api, CUresult result);

#endif /* GPUFLOW_PM_API_H */
