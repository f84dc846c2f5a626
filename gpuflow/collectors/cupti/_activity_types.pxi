# Per-device and per-configuration aggregates: the C types (included by _decoder_c.pyx before its
# State, which holds an Act; _activity.pxi has the functions, _activity_layout.py the rules and
# _activity_py.py their readable statement).

cdef enum:
    A_CONFIGS_PER_NAME = 4          # _activity_layout.CONFIGS_PER_NAME
    A_BUSY_INTERVALS_MAX = 1024     # _activity_layout.BUSY_INTERVALS_MAX
    A_BUSY_MERGE_KERNELS = 2048     # _activity_layout.BUSY_MERGE_KERNELS
    A_N_MEMORY = 3                  # len(_activity_layout.MEMORY_CLASSES)
    A_FIRST_INTERVALS = 16
    A_DEVICE_CACHE = 8
    A_RUNS = 4                      # sorted runs a device's new intervals gather in (DevAct; busy_best
                                    # is written for four)
    A_RUN_MAX = 512                 # intervals a run holds before the runs are folded

cdef extern from *:
    # KCfgSet.key1's mark of a used slot (a valid launch id is at most LAUNCH_ID_LIMIT, 17 bits;
    # devices 32 bits: bits 0-51)
    const uint64_t A_KEY_USED "(1ULL << 63)"


cdef struct KCfg:               # one launch configuration's figures: 40 bytes
    uint64_t count              # its launches, timed launches, their time
    uint64_t timed
    uint64_t total
    uint64_t grid_min           # blocks
    uint64_t grid_max

cdef struct KCfgSet:            # a kernel name's configurations, first seen first
    uint64_t key0[4]            # the KERNEL record's bytes 48-55: block x, y, z, registers
    uint64_t key1[4]            # launch id | device << 20 | A_KEY_USED (0: a slot not used yet)
    KCfg cfg[4]                 # A_CONFIGS_PER_NAME
    uint64_t more_count         # launches in further configurations
    uint64_t more_timed
    uint64_t more_total
    uint64_t stamp              # Act.stamp when a configuration, a grid extreme or "more" last appeared
    uint32_t n
    uint8_t hit[8]              # by the device id's low 3 bits: the slot that device's latest
                                # launch of the name was counted in (0 before one)

cdef struct Interval:
    uint64_t start
    uint64_t end

cdef struct CopyAgg:            # timed copies of one (direction, host memory)
    uint64_t count
    uint64_t bytes
    uint64_t total

cdef struct DevAct:
    Interval *iv                # unsettled busy intervals: sorted, none overlapping or touching
    uint32_t n_iv               # (at a merge point at most A_BUSY_INTERVALS_MAX; in between at
    uint32_t iv_alloc           # most A_BUSY_MERGE_KERNELS more)
    Interval *run[4]            # A_RUNS runs of intervals noted since the runs were last folded
    uint32_t run_n[4]           # into iv: each sorted by start, none overlapping or touching
    uint32_t run_alloc[4]       # (a kernel extending a run's latest interval grows it)
    uint64_t run_key[4]         # the start of each run's latest interval + 1; 0: an empty run
    uint32_t run_cur            # the run the latest kernel went to
    uint32_t noted              # kernels noted since the last merge point
    uint64_t settled            # busy time before this is in `busy`
    uint64_t busy
    uint64_t late
    uint64_t late_ns
    uint64_t first              # earliest timed kernel start (UINT64_MAX before one), latest end
    uint64_t last
    int any_timed               # a timed kernel ran on it: first and last are its
    CopyAgg copies[18]          # direction * A_N_MEMORY + memory class

cdef struct Act:
    KCfgSet *cfgs               # by kernel name's dense index (the kstats' index)
    uint32_t cfgs_alloc
    KCfgSet other               # the kernels of names beyond max_names
    DevAct *devs                # by first appearance; devs_keys[i] is devs[i]'s device id
    uint32_t *devs_keys
    uint32_t n_devs
    uint32_t devs_alloc
    uint32_t keys_alloc
    Map dev_map                 # device id -> index (initialised at the first device)
    uint32_t cache_dev[8]       # a direct-mapped cache in front of dev_map, by the id's low bits
    uint32_t cache_slot[8]      # (A_DEVICE_CACHE): the index + 1; 0: empty
    Interval *scratch           # the folds' copy of the intervals they merge into (one for all
    uint32_t scratch_alloc      # devices: a fold is done one device at a time)
    uint64_t overflow
    int saturated
    uint64_t stamp              # counts the changes kernel_configs(since) reports
