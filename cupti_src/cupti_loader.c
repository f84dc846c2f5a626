/*
 * cupti_loader.c — dlopen libcupti at run time, resolve every entry point with dlsym, check the
 * version. No link-time dependency on CUPTI or CUDA; nothing here may crash or exit.
 */
#define _GNU_SOURCE
#include "cupti_loader.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuflow_ring.h"

static const char *const SONAMES[] = {"libcupti.so.13", "libcupti.so.12"};

/* Oldest accepted: CUDA 12.0's CUPTI (API version 18). 12.x report small numbers, 13.x report
 * 13xxyy; record offsets we read are identical across these (cupti_records.h). */
#define GF_CUPTI_MIN_LEGACY 18u
#define GF_CUPTI_MAX_LEGACY 99u
#define GF_CUPTI_MIN_13     130000u
#define GF_CUPTI_MAX_13     139999u

/* The file the handle really is: dladdr on one of its symbols, made absolute. */
static void loaded_path(gf_cupti *c, const char *fallback)
{
    Dl_info info;
    void *sym = dlsym(c->handle, "cuptiGetVersion");
    char resolved[PATH_MAX];
    const char *name = fallback;
    if (sym && dladdr(sym, &info) && info.dli_fname && info.dli_fname[0])
        name = info.dli_fname;
    if (realpath(name, resolved))
        name = resolved;
    snprintf(c->path, sizeof c->path, "%s", name);
}

static void *found(gf_cupti *c, void *h, const char *name)
{
    loaded_path(c, name);
    return h;
}

static void *open_cupti(gf_cupti *c, const char *env_path, char *why, size_t why_len)
{
    void *h = NULL;
    if (env_path && env_path[0] && (h = dlopen(env_path, RTLD_NOW | RTLD_NOLOAD)))
        return found(c, h, env_path);
    for (size_t i = 0; i < sizeof SONAMES / sizeof SONAMES[0]; i++)
        if ((h = dlopen(SONAMES[i], RTLD_NOW | RTLD_NOLOAD)))
            return found(c, h, SONAMES[i]);
    if (env_path && env_path[0]) { /* explicit path: that file or nothing (one CUPTI per process) */
        if ((h = dlopen(env_path, RTLD_NOW | RTLD_LOCAL)))
            return found(c, h, env_path);
        const char *e = dlerror();
        snprintf(why, why_len, "cannot load GPUFLOW_CUPTI_PATH=%s: %s", env_path,
                 e ? e : "unknown error");
        return NULL;
    }
    for (size_t i = 0; i < sizeof SONAMES / sizeof SONAMES[0]; i++)
        if ((h = dlopen(SONAMES[i], RTLD_NOW | RTLD_LOCAL)))
            return found(c, h, SONAMES[i]);
    const char *e = dlerror();
    snprintf(why, why_len, "libcupti not found (GPUFLOW_CUPTI_PATH unset; %s)",
             e ? e : "no libcupti.so.13/.12 on the library path");
    return NULL;
}

#define REQUIRE(field, sym)                                                                     \
    do {                                                                                        \
        *(void **)(&c->field) = dlsym(c->handle, sym);                                          \
        if (!c->field) {                                                                        \
            snprintf(detail, detail_len, "%s lacks %s: unsupported CUPTI", c->path, sym);       \
            return GPUFLOW_STATUS_CUPTI_VERSION;                                                \
        }                                                                                       \
    } while (0)

#define OPTIONAL(field, sym) (*(void **)(&c->field) = dlsym(c->handle, sym))

uint32_t gf_cupti_load(gf_cupti *c, char *detail, size_t detail_len)
{
    memset(c, 0, sizeof *c);
    c->handle = open_cupti(c, secure_getenv("GPUFLOW_CUPTI_PATH"), detail, detail_len);
    if (!c->handle)
        return GPUFLOW_STATUS_CUPTI_MISSING;
    REQUIRE(GetVersion, "cuptiGetVersion");
    REQUIRE(Subscribe, "cuptiSubscribe");
    REQUIRE(Unsubscribe, "cuptiUnsubscribe");
    REQUIRE(EnableCallback, "cuptiEnableCallback");
    REQUIRE(ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
    REQUIRE(ActivityEnable, "cuptiActivityEnable");
    REQUIRE(ActivityDisable, "cuptiActivityDisable");
    REQUIRE(ActivityFlushAll, "cuptiActivityFlushAll");
    REQUIRE(ActivityGetNextRecord, "cuptiActivityGetNextRecord");
    REQUIRE(ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
    REQUIRE(ActivitySetAttribute, "cuptiActivitySetAttribute");
    REQUIRE(GetTimestamp, "cuptiGetTimestamp");
    OPTIONAL(GetResultString, "cuptiGetResultString");
    OPTIONAL(Subscribe_v2, "cuptiSubscribe_v2");
    OPTIONAL(ActivityEnableAndDump, "cuptiActivityEnableAndDump");
    OPTIONAL(ActivityRegisterTimestampCallback, "cuptiActivityRegisterTimestampCallback");

    uint32_t v = 0;
    CUptiResult r = c->GetVersion(&v);
    if (r != CUPTI_SUCCESS) {
        char buf[96];
        snprintf(detail, detail_len, "cuptiGetVersion failed: %s",
                 gf_cupti_error(c, r, buf, sizeof buf));
        return GPUFLOW_STATUS_CUPTI_VERSION;
    }
    c->version = v;
    int ok = (v >= GF_CUPTI_MIN_LEGACY && v <= GF_CUPTI_MAX_LEGACY) ||
             (v >= GF_CUPTI_MIN_13 && v <= GF_CUPTI_MAX_13);
    if (!ok) {
        snprintf(detail, detail_len,
                 "CUPTI API version %u from %s is not supported (need CUDA 12.x or 13.x)", v,
                 c->path);
        return GPUFLOW_STATUS_CUPTI_VERSION;
    }
    snprintf(detail, detail_len, "CUPTI %u loaded from %s", v, c->path);
    return GPUFLOW_STATUS_OK;
}

const char *gf_cupti_error(const gf_cupti *c, CUptiResult r, char *buf, size_t len)
{
    const char *s = NULL;
    if (!c->GetResultString || c->GetResultString(r, &s) != CUPTI_SUCCESS || !s)
        s = "CUPTI error";
    snprintf(buf, len, "%s (%d)", s, (int)r);
    return buf;
}

uint32_t gf_status_for_error(CUptiResult r)
{
    switch ((int)r) {
    case 39: /* CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED */
        return GPUFLOW_STATUS_CUPTI_IN_USE;
    case 27: /* NOT_SUPPORTED */
    case 33: /* VIRTUALIZED_DEVICE_NOT_SUPPORTED */
    case 35: /* INSUFFICIENT_PRIVILEGES */
    case 40: /* VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES */
    case 41: /* CONFIDENTIAL_COMPUTING_NOT_SUPPORTED */
    case 42: /* CMP_DEVICE_NOT_SUPPORTED */
    case 43: /* MIG_DEVICE_NOT_SUPPORTED */
    case 44: /* SLI_DEVICE_NOT_SUPPORTED */
    case 45: /* WSL_DEVICE_NOT_SUPPORTED */
        return GPUFLOW_STATUS_UNSUPPORTED;
    default:
        return GPUFLOW_STATUS_CUPTI_ERROR;
    }
}
