/*
 * cupti_loader.h — libcupti, loaded at run time and resolved symbol by symbol.
 *
 * libgpuflow_inject.so never links against libcupti (a missing or mismatched CUPTI must not stop
 * the traced program from starting): the CUPTI headers supply types and enums only, every entry
 * point is found with dlsym. Internal to the injected library (hidden visibility).
 */
#ifndef GPUFLOW_CUPTI_LOADER_H
#define GPUFLOW_CUPTI_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_result.h>

/* Our own copy of cuptiSubscribe_v2's parameter block (absent from pre-13 headers). */
typedef struct gf_subscriber_params {
    size_t structSize;
    const char *subscriberName;
    char *oldSubscriberName;
    size_t oldSubscriberSize;
} gf_subscriber_params;

typedef struct gf_cupti {
    void *handle;
    uint32_t version;                /* cuptiGetVersion() */
    char path[4096];                 /* the file loaded (dladdr + realpath), for details */
    /* required */
    CUptiResult (*GetVersion)(uint32_t *);
    CUptiResult (*Subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                  CUpti_CallbackId);
    CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                             CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*ActivityEnable)(CUpti_ActivityKind);
    CUptiResult (*ActivityDisable)(CUpti_ActivityKind);
    CUptiResult (*ActivityFlushAll)(uint32_t);
    CUptiResult (*ActivityGetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t *);
    CUptiResult (*ActivitySetAttribute)(CUpti_ActivityAttribute, size_t *, void *);
    CUptiResult (*GetTimestamp)(uint64_t *);
    /* optional (NULL when this CUPTI lacks them) */
    CUptiResult (*GetResultString)(CUptiResult, const char **);
    CUptiResult (*Subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                                gf_subscriber_params *);
    CUptiResult (*ActivityEnableAndDump)(CUpti_ActivityKind);
    CUptiResult (*ActivityRegisterTimestampCallback)(uint64_t (*)(void));
} gf_cupti;

/*
 * Load libcupti: a copy already in the process first (RTLD_NOLOAD: GPUFLOW_CUPTI_PATH, then the
 * sonames libcupti.so.13 / .12), else dlopen(GPUFLOW_CUPTI_PATH) — and only that when the
 * variable is set — else the sonames through the normal search path. Resolves every symbol and
 * checks the version. Returns a gpuflow_status: OK, CUPTI_MISSING or CUPTI_VERSION, with a
 * human-readable cause in `detail`.
 */
uint32_t gf_cupti_load(gf_cupti *c, char *detail, size_t detail_len);

/* "CUPTI_ERROR_xxx (n)" for the status detail; never NULL. */
const char *gf_cupti_error(const gf_cupti *c, CUptiResult r, char *buf, size_t len);

/* Maps a CUPTI error from subscribe/enable to a gpuflow_status (IN_USE, UNSUPPORTED, ERROR). */
uint32_t gf_status_for_error(CUptiResult r);

#endif /* GPUFLOW_CUPTI_LOADER_H */
