# Per-device and per-configuration aggregates: the C types (included by _decoder_c.pyx before its
# State, which holds an Act; _activity.pxi has the functions, _activity_layout.py the rules and
# _activity_py.py their readable statement).

cdef enum:
    A_CONFIGS_PER_NAME = 4          # _activity_layout.CONFIGS_PER_NAME
    A_BUSY_INTERVALS_MAX = 1024     # _activity_layout.BUSY_INTERVALS_MAX
    A_N_MEMORY = 3                  # len(_activity_layout.MEMORY_CLASSES)
    A_FIRST_INTERVALS = 16
    A_DEVICE_CACHE = 8
    A_MORE = 4                  # KCfgSet.cur: a configuration beyond the four kept


cdef struct KCfg:               # one launch configuration of a kernel name: 64 bytes, one line
    uint64_t key0               # the KERNEL record's bytes 48-55: block x, y, z, registers
    uint64_t key1               # launch id | device << 32
    uint64_t grid               # bytes 40-47 of its latest launch: grid x, y, z (its blocks are known)
    uint64_t count              # its launches, timed launches and time in its runs before the
    uint64_t timed              # current one (see KCfgSet)
    uint64_t total
    uint64_t grid_min           # blocks
    uint64_t grid_max

cdef struct KCfgSet:            # a kernel name's configurations, first seen first
    KCfg cfg[4]                 # A_CONFIGS_PER_NAME
    uint64_t more_count         # launches in further configurations (closed runs)
    uint64_t more_timed
    uint64_t more_total
    uint64_t mark_count         # the name's KStat counters when the current run began: the run's
    uint64_t mark_timed         # launches are the name's since (a launch with the configuration
    uint64_t mark_total         # of the launch before it adds nothing here)
    uint64_t stamp              # Act.stamp when a configuration, a grid extreme or "more" last appeared
    uint8_t n
    uint8_t cur                 # the current run's configuration: < n; A_MORE: a further one;
                                # anything else (0 with n 0: a zeroed set): no launch yet

cdef struct Interval:
    uint64_t start
    uint64_t end

cdef struct CopyAgg:            # timed copies of one (direction, host memory)
    uint64_t count
    uint64_t bytes
    uint64_t total

cdef struct DevAct:
    Interval *iv                # unsettled busy intervals: sorted, none overlapping or touching
    uint32_t n_iv
    uint32_t iv_alloc
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
    uint64_t overflow
    int saturated
    uint64_t stamp              # counts the changes kernel_configs(since) reports
