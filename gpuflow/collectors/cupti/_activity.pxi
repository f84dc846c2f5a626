# Per-device and per-configuration aggregates of the compiled decoder (included by _decoder_c.pyx
# after its drain loop's helpers; types in _activity_types.pxi).
#
# What they are and their bounds: _activity_layout.py; the same rules in Python, which the tests
# compare with these case by case: _activity_py.py. The drain loop calls act_kernel once per valid
# kernel record and act_copy once per valid copy or memset; both are O(1) for the usual input (the
# configuration the name's latest launch had, a kernel that starts after the device's latest busy
# interval starts), and bounded otherwise: four configurations compared, a binary search and a move
# of at most BUSY_INTERVALS_MAX intervals (16 KiB). Everything else runs at frame time.

from libc.string cimport memmove

cdef extern from *:
    """
    /* act_kernel reads a KERNEL record's grid (bytes 40-47) and block and registers (48-55) as two
     * little-endian words, as the format lays them out (gpuflow_ring.h) */
    _Static_assert(offsetof(gpuflow_record, body.act.u.kernel.grid_x) == 40, "grid at 40");
    _Static_assert(offsetof(gpuflow_record, body.act.u.kernel.grid_z) == 46, "grid z at 46");
    _Static_assert(offsetof(gpuflow_record, body.act.u.kernel.block_x) == 48, "block at 48");
    _Static_assert(offsetof(gpuflow_record, body.act.u.kernel.registers) == 54, "registers at 54");
    _Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the ring is little-endian");
    """

from gpuflow.collectors.cupti import _activity_layout as AL


cdef inline uint64_t a_sat_add(Act *a, uint64_t x, uint64_t y) noexcept nogil:
    cdef uint64_t t = x + y
    if t < x:
        a.saturated = 1
        return UINT64_MAX
    return t


cdef inline DevAct *act_device(State *s, uint32_t dev) noexcept nogil:
    """The device's aggregates, made at its first record; NULL when the table is full (counted in
    ``overflow``) or out of memory (``s.oom``). A process's records name one device or a few, in
    runs: a small direct-mapped cache by the id's low bits answers them."""
    cdef uint32_t slot = s.act.cache_slot[dev & (A_DEVICE_CACHE - 1)]
    if slot and s.act.cache_dev[dev & (A_DEVICE_CACHE - 1)] == dev:
        return &s.act.devs[slot - 1]
    return act_device_slow(s, dev)


cdef DevAct *act_device_slow(State *s, uint32_t dev) noexcept nogil:
    cdef Act *a = &s.act
    cdef int32_t di
    cdef void *p
    if a.dev_map.slots == NULL:
        if map_init(&a.dev_map) != 0:
            s.oom = 1
            return NULL
    di = map_find(&a.dev_map, dev, 0, 0)
    if di < 0:
        if a.n_devs >= s.max_lanes:
            a.overflow += 1
            return NULL
        p = grow(a.devs_keys, &a.keys_alloc, a.n_devs + 1, sizeof(uint32_t))
        if p == NULL:
            s.oom = 1
            return NULL
        a.devs_keys = <uint32_t *>p
        p = grow(a.devs, &a.devs_alloc, a.n_devs + 1, sizeof(DevAct))
        if p == NULL or map_insert(&a.dev_map, dev, 0, 0, <int32_t>a.n_devs) != 0:
            if p != NULL:
                a.devs = <DevAct *>p
            s.oom = 1
            return NULL
        a.devs = <DevAct *>p
        di = <int32_t>a.n_devs
        memset(&a.devs[di], 0, sizeof(DevAct))
        a.devs[di].first = UINT64_MAX
        a.devs_keys[di] = dev
        a.n_devs += 1
    a.cache_dev[dev & (A_DEVICE_CACHE - 1)] = dev
    a.cache_slot[dev & (A_DEVICE_CACHE - 1)] = <uint32_t>di + 1
    return &a.devs[di]


cdef void busy_settle(Act *a, DevAct *d, uint64_t until) noexcept nogil:
    """Fold every busy interval (or part of one) before ``until`` into ``busy``."""
    cdef uint32_t n = 0
    if until <= d.settled:
        return
    while n < d.n_iv and d.iv[n].start < until:
        d.busy = a_sat_add(a, d.busy, (d.iv[n].end if d.iv[n].end < until else until) - d.iv[n].start)
        n += 1
    if n and d.iv[n - 1].end > until:       # the last one straddles: its rest stays
        d.iv[n - 1].start = until
        n -= 1
    if n:
        memmove(d.iv, d.iv + n, (d.n_iv - n) * sizeof(Interval))
        d.n_iv -= n
    d.settled = until


cdef void busy_add(State *s, DevAct *d, uint64_t start, uint64_t end) noexcept nogil:
    """Merge [start, end) into the device's unsettled intervals: the general case (busy_note has
    the usual ones); ``start`` is at or after ``d.settled``, ``end`` after ``start``."""
    cdef uint32_t n = d.n_iv, i, j, lo, hi, mid, alloc
    cdef void *p
    if n == 0 or d.iv[n - 1].start <= start:
        i = n                               # after every interval's start
    else:
        lo = 0                              # i = how many intervals start at or before it
        hi = n - 1                          # (d.iv[n - 1].start > start)
        while lo < hi:
            mid = (lo + hi) >> 1
            if d.iv[mid].start <= start:
                lo = mid + 1
            else:
                hi = mid
        i = lo
    if i and d.iv[i - 1].end >= start:      # overlaps or touches the one before
        i -= 1
        start = d.iv[i].start
    j = i                                   # [i, j): the intervals it overlaps or touches
    while j < n and d.iv[j].start <= end:
        if d.iv[j].end > end:
            end = d.iv[j].end
        j += 1
    if j == i:                              # a new interval at i
        if n == d.iv_alloc:
            alloc = d.iv_alloc * 2 if d.iv_alloc else A_FIRST_INTERVALS
            if alloc > A_BUSY_INTERVALS_MAX + 1:
                alloc = A_BUSY_INTERVALS_MAX + 1
            p = realloc(d.iv, alloc * sizeof(Interval))
            if p == NULL:
                s.oom = 1
                return
            d.iv = <Interval *>p
            d.iv_alloc = alloc
        memmove(d.iv + i + 1, d.iv + i, (n - i) * sizeof(Interval))
        n += 1
    elif j > i + 1:                         # several became one
        memmove(d.iv + i + 1, d.iv + j, (n - j) * sizeof(Interval))
        n -= j - i - 1
    d.iv[i].start = start
    d.iv[i].end = end
    d.n_iv = n
    if n > A_BUSY_INTERVALS_MAX:            # settle the older half
        busy_settle(&s.act, d, d.iv[A_BUSY_INTERVALS_MAX // 2 - 1].end)


cdef void busy_late(Act *a, DevAct *d, uint64_t start, uint64_t end) noexcept nogil:
    """A kernel reaching back before what was settled: counted, its part before not added."""
    d.late += 1
    d.late_ns = a_sat_add(a, d.late_ns, (end if end < d.settled else d.settled) - start)


cdef inline void busy_note(State *s, DevAct *d, uint64_t start, uint64_t end) noexcept nogil:
    """A timed kernel on the device: its extremes, and its interval merged into the busy ones. The
    usual kernel overlaps or follows the device's latest interval: a few compares here."""
    cdef Interval *last
    d.any_timed = 1
    if start < d.first:
        d.first = start
    if end > d.last:
        d.last = end
    if start < d.settled:
        busy_late(&s.act, d, start, end)
        start = d.settled
    if end <= start:
        return
    if d.n_iv:
        last = &d.iv[d.n_iv - 1]
        if last.start <= start and start <= last.end:   # overlaps or touches the latest: grows it
            if end > last.end:
                last.end = end
            return
    busy_add(s, d, start, end)


cdef KCfgSet *act_cfgs_grow(State *s, uint32_t idx) noexcept nogil:
    """Room for the configurations of the names up to dense index ``idx`` (each starting with no
    launch); NULL when out of memory."""
    cdef Act *a = &s.act
    cdef uint32_t old = a.cfgs_alloc
    cdef void *p = grow(a.cfgs, &a.cfgs_alloc, idx + 1, sizeof(KCfgSet))
    if p == NULL:
        s.oom = 1
        return NULL
    a.cfgs = <KCfgSet *>p
    memset(&a.cfgs[old], 0, (a.cfgs_alloc - old) * sizeof(KCfgSet))
    return &a.cfgs[idx]


cdef inline uint64_t grid_blocks(uint64_t grid) noexcept nogil:
    """A launch's blocks from the KERNEL record's bytes 40-47 (grid x: 32 bits, y and z: 16)."""
    return (grid & 0xFFFFFFFFULL) * ((grid >> 32) & 0xFFFFULL) * (grid >> 48)


cdef inline void config_stamp(Act *a, KCfgSet *cs) noexcept nogil:
    a.stamp += 1
    cs.stamp = a.stamp


cdef void config_grid(Act *a, KCfgSet *cs, KCfg *c, uint64_t grid) noexcept nogil:
    """A launch with another grid than the configuration's latest: its extremes, if it is one."""
    cdef uint64_t blocks = grid_blocks(grid)
    c.grid = grid
    if blocks < c.grid_min or blocks > c.grid_max:
        if blocks < c.grid_min:
            c.grid_min = blocks
        else:
            c.grid_max = blocks
        config_stamp(a, cs)


cdef void config_switch(Act *a, KCfgSet *cs, const KStat *k, uint64_t key0, uint64_t key1,
                        uint64_t grid) noexcept nogil:
    """A launch whose configuration is not the current run's: the run closes (its launches, the
    name's since the run began, go to its configuration), and one begins with this launch's
    configuration: found, added (the first CONFIGS_PER_NAME), or a further one."""
    cdef uint8_t i, found = A_MORE
    cdef KCfg *c
    if cs.cur < cs.n:
        c = &cs.cfg[cs.cur]
        c.count += k.count - cs.mark_count
        c.timed += k.timed - cs.mark_timed
        c.total += k.total - cs.mark_total
    elif cs.cur == A_MORE:
        cs.more_count += k.count - cs.mark_count
        cs.more_timed += k.timed - cs.mark_timed
        cs.more_total += k.total - cs.mark_total
    cs.mark_count = k.count
    cs.mark_timed = k.timed
    cs.mark_total = k.total
    for i in range(cs.n):
        if cs.cfg[i].key0 == key0 and cs.cfg[i].key1 == key1:
            found = i
            break
    if found == A_MORE and cs.n < A_CONFIGS_PER_NAME:
        found = cs.n
        c = &cs.cfg[found]
        memset(c, 0, sizeof(KCfg))
        c.key0 = key0
        c.key1 = key1
        c.grid = grid
        c.grid_min = c.grid_max = grid_blocks(grid)
        cs.n += 1
        config_stamp(a, cs)
    elif found == A_MORE:
        if cs.cur != A_MORE and cs.more_count == 0:
            config_stamp(a, cs)       # the first launch in a further configuration
    elif cs.cfg[found].grid != grid:
        config_grid(a, cs, &cs.cfg[found], grid)
    cs.cur = found


cdef inline void act_kernel(State *s, int32_t idx, const gpuflow_record *r, int timed,
                            const KStat *k) noexcept nogil:
    """A valid kernel record of the name at dense index ``idx`` (-1: a name beyond max_names),
    whose counters ``k`` do not count it yet. The usual launch has the configuration and the grid
    of its name's launch before it: two keys and a grid compared, and its interval noted."""
    cdef Act *a = &s.act
    cdef KCfgSet *cs
    cdef KCfg *c
    cdef DevAct *d
    cdef uint64_t key0, key1, grid
    if idx < 0:
        cs = &a.other
    elif <uint32_t>idx < a.cfgs_alloc:
        cs = &a.cfgs[idx]
    else:
        cs = act_cfgs_grow(s, <uint32_t>idx)
        if cs == NULL:
            return
    memcpy(&key0, <const char *>r + 48, 8)
    memcpy(&grid, <const char *>r + 40, 8)
    key1 = r.body.act.u.kernel.launch_id | (<uint64_t>r.device << 32)
    if cs.cur < cs.n:
        c = &cs.cfg[cs.cur]
        if c.key0 == key0 and c.key1 == key1:
            if c.grid != grid:
                config_grid(a, cs, c, grid)
        else:
            config_switch(a, cs, k, key0, key1, grid)
    else:
        config_switch(a, cs, k, key0, key1, grid)
    if timed:
        d = act_device(s, r.device)
        if d != NULL:
            busy_note(s, d, r.body.act.start, r.body.act.end)
    elif a.cache_dev[r.device & (A_DEVICE_CACHE - 1)] != r.device or not a.cache_slot[r.device & (A_DEVICE_CACHE - 1)]:
        act_device(s, r.device)   # an untimed kernel's device is known too (or counted in overflow)


cdef inline void act_copy(State *s, const gpuflow_record *r, int direction, int timed) noexcept nogil:
    """A valid copy or memset record of ``direction`` (its index in _layout.DIRECTIONS)."""
    cdef Act *a = &s.act
    cdef const gpuflow_copy_payload *c = &r.body.act.u.copy
    cdef DevAct *d = act_device(s, r.device)
    cdef CopyAgg *g
    cdef uint8_t kind = 0
    cdef int memory
    if d == NULL or not timed:
        return
    if direction == 0:
        kind = c.src_kind
    elif direction == 1:
        kind = c.dst_kind
    memory = 0 if kind == 1 else 1 if kind == 2 else 2
    g = &d.copies[direction * A_N_MEMORY + memory]
    g.count += 1
    g.bytes = a_sat_add(a, g.bytes, c.bytes)
    g.total = a_sat_add(a, g.total, r.body.act.end - r.body.act.start)


cdef void act_free(Act *a) noexcept nogil:
    cdef uint32_t i
    for i in range(a.n_devs):
        free(a.devs[i].iv)
    free(a.devs)
    free(a.devs_keys)
    free(a.dev_map.slots)
    free(a.cfgs)
    memset(a, 0, sizeof(Act))


# -- accessors (frame time, with the GIL) ------------------------------------------------------
cdef tuple act_config_tuples(const KCfgSet *cs, const KStat *k):
    """A name's configurations, its current run counted in (``k``: the name's counters)."""
    cdef uint8_t i
    cdef const KCfg *c
    cdef uint64_t count, timed, total
    out = []
    for i in range(cs.n):
        c = &cs.cfg[i]
        count, timed, total = c.count, c.timed, c.total
        if cs.cur == i:                     # its current run
            count += k.count - cs.mark_count
            timed += k.timed - cs.mark_timed
            total += k.total - cs.mark_total
        out.append(AL.KernelConfig(<uint32_t>(c.key1 >> 32), (<uint16_t>c.key0, <uint16_t>(c.key0 >> 16),
                                                             <uint16_t>(c.key0 >> 32)), <uint16_t>(c.key0 >> 48),
                                   <uint32_t>c.key1, count, timed, total, c.grid_min, c.grid_max))
    count, timed, total = cs.more_count, cs.more_timed, cs.more_total
    if cs.cur == A_MORE:
        count += k.count - cs.mark_count
        timed += k.timed - cs.mark_timed
        total += k.total - cs.mark_total
    return (tuple(out), (count, timed, total))


cdef tuple act_configs(const State *s, uint64_t since):
    """(stamp, [(name id, configurations, more)]): the kernel names whose configurations changed
    after stamp ``since`` (0: every name that launched), by id; OTHER_NAME_ID last."""
    cdef uint32_t i
    cdef uint32_t n = s.n_names if s.n_names < s.act.cfgs_alloc else s.act.cfgs_alloc
    out = []
    for i in range(n):
        if s.act.cfgs[i].stamp > since:
            out.append((s.names[i].id, *act_config_tuples(&s.act.cfgs[i], &s.kstats[i])))
    out.sort(key=_first)
    if s.act.other.stamp > since:
        out.append((OTHER_NAME_ID, *act_config_tuples(&s.act.other, &s.other)))
    return (s.act.stamp, out)


def _first(entry):
    return entry[0]


cdef dict act_activity(const State *s):
    cdef uint32_t i, j
    cdef const DevAct *d
    devices = []
    for i in range(s.act.n_devs):
        d = &s.act.devs[i]
        copies = tuple([(j // A_N_MEMORY, j % A_N_MEMORY, d.copies[j].count, d.copies[j].bytes,
                         d.copies[j].total) for j in range(6 * A_N_MEMORY) if d.copies[j].count])
        devices.append(AL.DeviceActivity(s.act.devs_keys[i], d.settled, d.busy, d.late, d.late_ns,
                                         d.first if d.any_timed else None, d.last if d.any_timed else None,
                                         copies))
    devices.sort(key=_first)
    return {"devices": devices, "overflow": s.act.overflow, "saturated": bool(s.act.saturated)}


cdef void act_settle(State *s, uint64_t until) noexcept nogil:
    cdef uint32_t i
    for i in range(s.act.n_devs):
        busy_settle(&s.act, &s.act.devs[i], until)
