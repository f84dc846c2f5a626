/*
 * pm_session.h — one GPU's PM sampling session: from the driver to samples in a ring.
 *
 * start() walks CUPTI's sequence (profiler initialise, chip name, device support, counter
 * availability, host object and single-pass metrics, config image, enable, set config, counter
 * data image, start) and on any refusal writes the ring's status (pm_samples.h) with the CUDA or
 * CUPTI result and a sentence saying what to do, and returns false. decode() moves every sample
 * the GPU completed since the last call into the ring. stop() stops and disables.
 *
 * Constraints: one thread calls all of these; nothing here takes the GPU's counters from another
 * tool (a busy counter is reported, never forced); a CUDA context is made only when CUPTI
 * refuses to work without one, and the ring's flags say so.
 */
#ifndef GPUFLOW_PM_SESSION_H
#define GPUFLOW_PM_SESSION_H

#include <stdint.h>

#include <string>
#include <vector>

#include "pm_api.h"
#include "pm_ring.h"

struct PmSettings {
    int device = 0;
    uint64_t interval_ns = 1000000;        // 1 ms
    uint64_t hw_buffer_bytes = 64ull << 20;
    uint32_t decode_ms = 50;
};

class PmSession {
  public:
    PmSession(const PmApi &api, pm_ring &ring, const PmSettings &settings) : api_(api), ring_(ring), s_(settings) {}
    bool start();
    bool decode();          // false: sampling failed for good (the status says why)
    void stop();
    void clock_sync();      // a CLOCK record: CUPTI's timestamp and CLOCK_REALTIME together
    // what each slot was collected with ("" for a slot not collected), for --probe
    const std::string &metric_of(int slot) const { return chosen_name_[slot]; }

  private:
    bool fail(uint32_t status, int32_t error, const char *step, const char *advice);
    bool cupti_fail(CUptiResult r, const char *step);
    bool open_device();
    bool configure();
    bool pick_metrics();
    bool host_object(const std::vector<const char *> &metrics, size_t *passes);
    void drop_host_object();
    bool counter_data_image();
    bool restart();

    const PmApi &api_;
    pm_ring &ring_;
    PmSettings s_;
    bool context_taken_ = false;
    bool profiler_up_ = false;
    bool started_ = false;
    uint64_t last_end_ = 0;
    std::string chip_;
    std::vector<uint8_t> availability_, config_, image_, image_blank_;
    CUpti_Profiler_Host_Object *host_ = nullptr;
    CUpti_PmSampling_Object *sampler_ = nullptr;
    std::vector<const char *> metrics_;     // what is collected, in slot order of slot_of_
    std::vector<int> slot_of_;              // metrics_[i] fills slot slot_of_[i]
    std::vector<int> scale_of_;             // how metrics_[i]'s value becomes the slot's
    std::vector<double> values_;
    std::string chosen_name_[GPUFLOW_PM_SLOTS];
};

#endif /* GPUFLOW_PM_SESSION_H */
