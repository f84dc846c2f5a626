/*
 * pm_layout_probe.c — prints the sample format's numbers from cupti_src/pm_samples.h, one
 * "name value" a line, for tests/pmsampling/test_layout.py to compare with samples_layout.py.
 */
#include <stddef.h>
#include <stdio.h>

#include "pm_samples.h"

#define FIELD(f) printf("OFF_%s %zu\n", #f, offsetof(gpuflow_pm_header, f))

int main(void)
{
    printf("MAGIC %llu\nVERSION %u\nHEADER_SIZE %u\nRECORD_SIZE %u\n", (unsigned long long)GPUFLOW_PM_MAGIC,
           GPUFLOW_PM_VERSION, GPUFLOW_PM_HEADER_SIZE, GPUFLOW_PM_RECORD_SIZE);
    printf("MIN_CAPACITY %u\nMAX_CAPACITY %u\nTEXT_MAX %u\nCHIP_MAX %u\nDETAIL_MAX %u\nSLOTS %u\n",
           GPUFLOW_PM_MIN_CAPACITY, GPUFLOW_PM_MAX_CAPACITY, GPUFLOW_PM_TEXT_MAX, GPUFLOW_PM_CHIP_MAX,
           GPUFLOW_PM_DETAIL_MAX, GPUFLOW_PM_SLOTS);
    printf("HELLO_MAGIC %llu\nHELLO_SIZE %u\n", (unsigned long long)GPUFLOW_PM_HELLO_MAGIC, GPUFLOW_PM_HELLO_SIZE);
    printf("KIND_SAMPLE %d\nKIND_CLOCK %d\nSLOT_COUNT %d\nSTOPPED %d\nOK %d\nSTARTING %d\n", GPUFLOW_PM_SAMPLE,
           GPUFLOW_PM_CLOCK, GPUFLOW_PM_SLOT_COUNT, GPUFLOW_PM_STOPPED, GPUFLOW_PM_OK, GPUFLOW_PM_STARTING);
    printf("STATUS_COUNT %d\n", GPUFLOW_PM_STATUS_MAX + 1);
    printf("FLAG_CONTEXT_HELD %u\nFLAG_CLOCK_SUSPECT %u\n", GPUFLOW_PM_FLAG_CONTEXT_HELD, GPUFLOW_PM_FLAG_CLOCK_SUSPECT);
    FIELD(magic); FIELD(version); FIELD(header_size); FIELD(record_size); FIELD(capacity); FIELD(status);
    FIELD(error); FIELD(device_index); FIELD(device_count); FIELD(sm_count); FIELD(slots_collected);
    FIELD(interval_ns); FIELD(flags); FIELD(uuid); FIELD(device_name); FIELD(chip_name); FIELD(samples_written);
    FIELD(samples_dropped); FIELD(hw_overflows); FIELD(decode_passes); FIELD(cpu_ns); FIELD(detail); FIELD(head);
    FIELD(tail);
    printf("RECORD_VALUES %zu\n", offsetof(gpuflow_pm_record, values));
    printf("SLOT_WARPS_AVG %d\nSLOT_PCIE_WRITE_BPS %d\n", GPUFLOW_PM_WARPS_AVG, GPUFLOW_PM_PCIE_WRITE_BPS);
    return 0;
}
