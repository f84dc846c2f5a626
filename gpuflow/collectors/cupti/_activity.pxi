# Per-device and per-configuration aggregates of the compiled decoder (included by _decoder_c.pyx
# after its drain loop's helpers; types in _activity_types.pxi).
#
# What they are and their bounds: _activity_layout.py; the same rules in Python, which the tests
# compare with these case by case: _activity_py.py. The drain loop calls act_kernel once per valid
# kernel record and act_copy once per valid copy or memset; both are O(1) for the usual input (the
# configuration the name's latest launch had, a kernel that starts after the device's latest busy
# interval starts), and bounded otherwise: four configurations compared, a binary search and a move
# of at most BUSY_INTERVALS_MAX intervals (16 KiB). Everything else runs at frame time.

from libc.string cimport memmove, memcpy

cdef extern from *:
    int __builtin_ctz(unsigned int x) nogil

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
    """Fold every busy interval (or part of one) before ``until`` into ``busy`` (the runs are
    empty: settling happens at merge points and between drain() calls)."""
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


cdef int iv_reserve(State *s, Interval **iv, uint32_t *alloc, uint32_t need) noexcept nogil:
    """Room for ``need`` intervals in ``*iv`` (doubling from A_FIRST_INTERVALS); -1: out of memory."""
    cdef uint32_t n = alloc[0]
    cdef void *p
    if need <= n:
        return 0
    if n == 0:
        n = A_FIRST_INTERVALS
    while n < need:
        n *= 2
    p = realloc(iv[0], n * sizeof(Interval))
    if p == NULL:
        s.oom = 1
        return -1
    iv[0] = <Interval *>p
    alloc[0] = n
    return 0


cdef void busy_merge_run(State *s, DevAct *d, const Interval *src, uint32_t m) noexcept nogil:
    """Merge ``m`` intervals, sorted and none overlapping or touching, into the device's
    unsettled ones (the same kind): the intervals ending before the first of them stay where they
    are, the rest and these are merged into place."""
    cdef Act *a = &s.act
    cdef uint32_t n = d.n_iv, lo = 0, hi = d.n_iv, mid, k, i = 0, j = 0, out, take
    cdef Interval cur, nxt
    if iv_reserve(s, &d.iv, &d.iv_alloc, n + m) != 0:
        return
    while lo < hi:                          # lo = the first that ends at or after src[0] starts
        mid = (lo + hi) >> 1
        if d.iv[mid].end < src[0].start:
            lo = mid + 1
        else:
            hi = mid
    if lo == n:                             # after all of them (the usual case): appended
        memcpy(d.iv + n, src, m * sizeof(Interval))
        d.n_iv = n + m
        return
    k = n - lo
    if iv_reserve(s, &a.scratch, &a.scratch_alloc, k + 1) != 0:
        return
    memcpy(a.scratch, d.iv + lo, k * sizeof(Interval))
    out = lo
    a.scratch[k].start = UINT64_MAX         # a sentinel after the copy: i never passes k
    cur = a.scratch[0] if a.scratch[0].start <= src[0].start else src[0]
    if a.scratch[0].start <= src[0].start:
        i = 1
    else:
        j = 1
    while i + j < k + m:
        take = j >= m or a.scratch[i].start <= src[j].start
        nxt = a.scratch[i] if take else src[j]
        i += take
        j += 1 - take
        if nxt.start <= cur.end:            # overlaps or touches: one interval
            if nxt.end > cur.end:
                cur.end = nxt.end
        else:
            d.iv[out] = cur
            out += 1
            cur = nxt
    d.iv[out] = cur
    d.n_iv = out + 1


cdef void busy_fold(State *s, DevAct *d) noexcept nogil:
    """Merge every run into the unsettled intervals and empty the runs."""
    cdef uint32_t r
    for r in range(A_RUNS):
        if d.run_n[r]:
            d.any_timed = 1
            if d.run[r][0].start < d.first:
                d.first = d.run[r][0].start
            if d.run[r][d.run_n[r] - 1].end > d.last:
                d.last = d.run[r][d.run_n[r] - 1].end
            busy_merge_run(s, d, d.run[r], d.run_n[r])
            d.run_n[r] = 0
            d.run_key[r] = 0


cdef void busy_merge_point(State *s, DevAct *d) noexcept nogil:
    """Every interval noted so far merged into the unsettled ones; more than BUSY_INTERVALS_MAX of
    them: the older ones settle, the newest BUSY_INTERVALS_MAX // 2 + 1 stay."""
    busy_fold(s, d)
    d.noted = 0
    if d.n_iv > A_BUSY_INTERVALS_MAX:
        busy_settle(&s.act, d, d.iv[d.n_iv - A_BUSY_INTERVALS_MAX // 2 - 2].end)


cdef void busy_late(Act *a, DevAct *d, uint64_t start, uint64_t end) noexcept nogil:
    """A kernel reaching back before what was settled: counted, its part before not added."""
    d.late += 1
    d.late_ns = a_sat_add(a, d.late_ns, (end if end < d.settled else d.settled) - start)


cdef void busy_place(State *s, DevAct *d, uint32_t best, uint64_t start, uint64_t end) noexcept nogil:
    """[start, end) after the latest interval of run ``best`` (A_RUNS: no run's latest interval
    starts at or before it: an empty run takes it, or if there is none the runs are folded
    first), or extending that interval; a full run: the runs are folded first."""
    cdef uint32_t j, n
    cdef Interval *last
    if best == A_RUNS:
        for j in range(A_RUNS):
            if d.run_n[j] == 0:
                best = j
                break
        else:                               # it starts before every run's latest interval
            busy_fold(s, d)
            best = 0
    d.run_cur = best
    n = d.run_n[best]
    if n:
        last = &d.run[best][n - 1]
        if start <= last.end:
            if end > last.end:
                last.end = end
            return
        if n + 1 >= A_RUN_MAX:
            busy_fold(s, d)
            n = 0
    if iv_reserve(s, &d.run[best], &d.run_alloc[best], n + 2) != 0:
        return
    d.run[best][n].start = start
    d.run[best][n].end = end
    d.run_n[best] = n + 1
    d.run_key[best] = start + 1


cdef int busy_odd(State *s, DevAct *d, uint64_t start, uint64_t end) noexcept nogil:
    """A kernel reaching back before what was settled, or of no time: its extremes, its lateness,
    and what is left of it placed; 1 if something was."""
    d.any_timed = 1
    if start < d.first:
        d.first = start
    if end > d.last:
        d.last = end
    if start < d.settled:
        busy_late(&s.act, d, start, end)
        start = d.settled
    if end <= start:
        return 0
    busy_place(s, d, busy_best(d, start), start, end)
    return 1


cdef inline uint32_t busy_best(const DevAct *d, uint64_t start) noexcept nogil:
    """The run whose latest interval starts latest at or before ``start``; A_RUNS: none (an empty
    run's key 0 wraps to the greatest value, so it never is)."""
    cdef uint64_t k0 = d.run_key[0], k1 = d.run_key[1], k2 = d.run_key[2], k3 = d.run_key[3]
    cdef uint64_t bk
    cdef uint32_t b = 0
    k0 = k0 if k0 - 1 <= start else 0
    k1 = k1 if k1 - 1 <= start else 0
    k2 = k2 if k2 - 1 <= start else 0
    k3 = k3 if k3 - 1 <= start else 0
    bk = k0
    if k1 > bk:
        bk = k1
        b = 1
    if k2 > bk:
        bk = k2
        b = 2
    if k3 > bk:
        bk = k3
        b = 3
    return b if bk else A_RUNS


cdef inline void busy_note(State *s, DevAct *d, uint64_t start, uint64_t end) noexcept nogil:
    """A timed kernel on the device: its interval noted in a run (the runs' extremes are the
    device's first start and last end, taken when they are folded). The usual kernel overlaps,
    touches or follows the latest interval of the run busy_best picks (no branch on which): a few
    compares here."""
    cdef uint32_t i, n
    cdef Interval *last
    if start < d.settled or end <= start:
        if not busy_odd(s, d, start, end):
            return
    else:
        i = busy_best(d, start)
        n = d.run_n[i] if i < A_RUNS else 0
        if n:
            last = &d.run[i][n - 1]
            if start <= last.end:               # overlaps or touches its latest: grows it
                if end > last.end:
                    last.end = end
            elif n + 1 < d.run_alloc[i]:        # follows its latest (a slot stays spare: the
                                                # merge may read one past a run)
                last[1].start = start
                last[1].end = end
                d.run_n[i] = n + 1
                d.run_key[i] = start + 1
            else:
                busy_place(s, d, i, start, end)
        else:
            busy_place(s, d, i, start, end)
    d.noted += 1
    if d.noted >= A_BUSY_MERGE_KERNELS:
        busy_merge_point(s, d)


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


cdef void config_extreme(Act *a, KCfgSet *cs, KCfg *c, uint64_t blocks) noexcept nogil:
    """A launch with fewer or more blocks than any of its configuration before."""
    if blocks < c.grid_min:
        c.grid_min = blocks
    if blocks > c.grid_max:
        c.grid_max = blocks
    config_stamp(a, cs)


cdef void config_other(Act *a, KCfgSet *cs, uint32_t dev, uint64_t key0, uint64_t key1, uint64_t blocks,
                       int timed, uint64_t dur) noexcept nogil:
    """A launch in none of the name's configurations: a new one (the first CONFIGS_PER_NAME), or
    a further one, counted in "more"."""
    cdef KCfg *c
    if cs.n < A_CONFIGS_PER_NAME:
        cs.hit[dev & 7] = cs.n
        cs.key0[cs.n] = key0
        cs.key1[cs.n] = key1
        c = &cs.cfg[cs.n]
        c.count = 1
        c.timed = timed
        c.total = dur
        c.grid_min = c.grid_max = blocks
        cs.n += 1
        config_stamp(a, cs)
        return
    if cs.more_count == 0:
        config_stamp(a, cs)
    cs.more_count += 1
    cs.more_timed += timed
    cs.more_total = a_sat_add(a, cs.more_total, dur)


cdef inline void act_kernel(State *s, int32_t idx, const gpuflow_record *r, int timed,
                            uint64_t dur) noexcept nogil:
    """A valid kernel record of the name at dense index ``idx`` (-1: a name beyond max_names),
    ``dur`` its time (0 untimed). Its configuration is found by comparing the four kept keys at
    once, counted there, and its grid compared with the configuration's extremes; its interval
    is noted on its device."""
    cdef Act *a = &s.act
    cdef KCfgSet *cs
    cdef KCfg *c
    cdef DevAct *d
    cdef uint64_t key0, key1, grid, blocks
    cdef uint32_t m, h
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
    key1 = r.body.act.u.kernel.launch_id | (<uint64_t>r.device << 20) | A_KEY_USED
    blocks = grid_blocks(grid)
    h = cs.hit[r.device & 7]
    c = &cs.cfg[h]
    if cs.key0[h] == key0 and cs.key1[h] == key1:   # the configuration of the device's launch before
        c.count += 1
        c.timed += <uint64_t>timed
        c.total = a_sat_add(a, c.total, dur)
        if blocks < c.grid_min or blocks > c.grid_max:
            config_extreme(a, cs, c, blocks)
        busy_kernel(s, r, timed)
        return
    m = ((<uint32_t>(cs.key0[0] == key0) & <uint32_t>(cs.key1[0] == key1))
         | ((<uint32_t>(cs.key0[1] == key0) & <uint32_t>(cs.key1[1] == key1)) << 1)
         | ((<uint32_t>(cs.key0[2] == key0) & <uint32_t>(cs.key1[2] == key1)) << 2)
         | ((<uint32_t>(cs.key0[3] == key0) & <uint32_t>(cs.key1[3] == key1)) << 3))
    if m:
        h = __builtin_ctz(m)
        cs.hit[r.device & 7] = h
        c = &cs.cfg[h]
        c.count += 1
        c.timed += <uint64_t>timed
        c.total = a_sat_add(a, c.total, dur)
        if blocks < c.grid_min or blocks > c.grid_max:
            config_extreme(a, cs, c, blocks)
    else:
        config_other(a, cs, r.device, key0, key1, blocks, timed, dur)
    busy_kernel(s, r, timed)


cdef inline void busy_kernel(State *s, const gpuflow_record *r, int timed) noexcept nogil:
    cdef Act *a = &s.act
    cdef DevAct *d
    if timed:
        d = act_device(s, r.device)
        if d != NULL:
            busy_note(s, d, r.body.act.start, r.body.act.end)
    elif a.cache_dev[r.device & (A_DEVICE_CACHE - 1)] != r.device or not a.cache_slot[r.device & (A_DEVICE_CACHE - 1)]:
        act_device(s, r.device)   # an untimed kernel's device is known too (or counted in overflow)


cdef void act_pass_end(State *s) noexcept nogil:
    """The end of a drain() call: a merge point for every device that noted a kernel."""
    cdef uint32_t i
    for i in range(s.act.n_devs):
        if s.act.devs[i].noted:
            busy_merge_point(s, &s.act.devs[i])


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
    cdef uint32_t i, r
    for i in range(a.n_devs):
        free(a.devs[i].iv)
        for r in range(A_RUNS):
            free(a.devs[i].run[r])
    free(a.devs)
    free(a.devs_keys)
    free(a.dev_map.slots)
    free(a.cfgs)
    free(a.scratch)
    memset(a, 0, sizeof(Act))


# -- accessors (frame time, with the GIL) ------------------------------------------------------
cdef tuple act_config_tuples(const KCfgSet *cs):
    """A name's configurations and its launches in further ones."""
    cdef uint32_t i
    cdef const KCfg *c
    cdef uint64_t key0, key1
    out = []
    for i in range(cs.n):
        c = &cs.cfg[i]
        key0, key1 = cs.key0[i], cs.key1[i]
        out.append(AL.KernelConfig(<uint32_t>(key1 >> 20), (<uint16_t>key0, <uint16_t>(key0 >> 16),
                                                           <uint16_t>(key0 >> 32)), <uint16_t>(key0 >> 48),
                                   <uint32_t>(key1 & 0xFFFFF), c.count, c.timed, c.total, c.grid_min, c.grid_max))
    return (tuple(out), (cs.more_count, cs.more_timed, cs.more_total))


cdef tuple act_configs(const State *s, uint64_t since):
    """(stamp, [(name id, configurations, more)]): the kernel names whose configurations changed
    after stamp ``since`` (0: every name that launched), by id; OTHER_NAME_ID last."""
    cdef uint32_t i
    cdef uint32_t n = s.n_names if s.n_names < s.act.cfgs_alloc else s.act.cfgs_alloc
    out = []
    for i in range(n):
        if s.act.cfgs[i].stamp > since:
            out.append((s.names[i].id, *act_config_tuples(&s.act.cfgs[i])))
    out.sort(key=_first)
    if s.act.other.stamp > since:
        out.append((OTHER_NAME_ID, *act_config_tuples(&s.act.other)))
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


ACTIVITY_LIMITS = {"CONFIGS_PER_NAME": A_CONFIGS_PER_NAME, "BUSY_INTERVALS_MAX": A_BUSY_INTERVALS_MAX,
                   "BUSY_MERGE_KERNELS": A_BUSY_MERGE_KERNELS, "N_MEMORY": A_N_MEMORY}
