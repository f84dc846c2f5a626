/*
 * ring_producer.c — producer side of the GPUFlow ring: creation (a sealed memfd), record publication,
 * drop accounting and name interning. See ring_producer.h for the rules it keeps; the wire
 * format is gpuflow_ring.h. Plain C11 + POSIX, no dependency beyond libc/librt/libpthread.
 */
#define _GNU_SOURCE
#include "ring_producer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(rp_launch) == 32, "rp_launch is four words");

/* One interned launch configuration; its id is its index + 1. */
typedef struct rp_launch_entry {
    rp_launch key;
    uint8_t sent;        /* its LAUNCH record is in the ring */
} rp_launch_entry;

/* One interned name; its id is its index + 1. What every kernel record reads comes first (the
 * pointer cache's check, the name's last launch configuration, whether its chunks were sent), so
 * that the common record compares its launch configuration where it found its name, with no
 * further lookup; the text and its hash, read when a name is interned, come last. */
typedef struct rp_name_entry {
    uint64_t trusted_key;   /* a key found to point at this text in key epoch trusted_epoch */
    uint32_t trusted_epoch; /* 0: none */
    uint32_t launch_id;     /* the launch configuration this kernel name launched with last, once
                             * its LAUNCH record is in the ring (0: none yet) ... */
    rp_launch launch;       /* ... and that configuration, compared with every record's */
    uint8_t sent;        /* all NAME_CHUNK records of this name are in the ring */
    uint8_t kind;
    uint8_t truncated;
    uint32_t len;
    char *text;          /* owned copy, possibly truncated to GPUFLOW_NAME_MAX, NUL-terminated */
    uint64_t hash;
} rp_name_entry;

_Static_assert(sizeof(rp_name_entry) == 72, "a name entry: 56 bytes every record reads, 16 it does not");

/* Open-addressing map slot: key (pointer, or hash for the string map) -> id (0 = empty). */
typedef struct rp_slot {
    uint64_t key;
    uint32_t id;
} rp_slot;

typedef struct rp_map {
    rp_slot *slots;
    uint32_t cap;        /* power of two, 0 before the first insert */
    uint32_t used;
} rp_map;

struct rp_ring {
    pthread_mutex_t lock;
    uintptr_t batch_owner; /* the thread holding the lock across a batch (rp_batch_begin), or 0 */
    gpuflow_ring_header *hdr;
    gpuflow_record *recs;
    size_t map_size;
    uint32_t capacity;
    uint32_t mask;
    uint64_t head;       /* producer's copy of hdr->head */
    uint64_t tail_seen;  /* last tail read from the consumer */
    uint64_t dropped;
    uint64_t incomplete;
    uint64_t cupti_dropped;
    uint64_t buffers;
    uint64_t translate_ns;
    int frozen;
    int fd;              /* the ring's memory file */
    rp_name_entry *names;
    uint32_t n_names;
    uint32_t names_cap;
    rp_map by_ptr;
    rp_map by_text;
    rp_launch_entry *launches;
    uint32_t n_launches;
    uint32_t launches_cap;
    rp_map by_launch;    /* hash of a launch key -> id (collisions keep both) */
    uint32_t key_epoch;  /* rp_key_epoch_begin's count, never 0 once begun (it skips 0 when it
                          * wraps); 0: every key hit is compared */
};

/* ------------------------------------------------------------------------------------------ */
/* small helpers                                                                              */

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t fnv1a(const char *s, size_t n, uint64_t seed)
{
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static void store_u64(volatile uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

/* Take the ring's lock, unless the calling thread holds it across a batch (rp_batch_begin);
 * returns whether it was taken here (and must be given back with ring_unlock). Only the owner
 * itself can read its own id in batch_owner, which it sets and clears under the lock. */
static inline int ring_lock(rp_ring *r)
{
    uintptr_t owner = __atomic_load_n(&r->batch_owner, __ATOMIC_RELAXED);
    if (owner && owner == (uintptr_t)pthread_self())
        return 0;
    pthread_mutex_lock(&r->lock);
    return 1;
}

static inline void ring_unlock(rp_ring *r, int taken)
{
    if (taken)
        pthread_mutex_unlock(&r->lock);
}

static int valid_capacity(uint32_t c)
{
    return c >= GPUFLOW_MIN_CAPACITY && c <= GPUFLOW_MAX_CAPACITY && (c & (c - 1)) == 0;
}

size_t rp_segment_size(uint32_t capacity)
{
    return (size_t)GPUFLOW_HEADER_SIZE + (size_t)capacity * GPUFLOW_RECORD_SIZE;
}

/* ------------------------------------------------------------------------------------------ */
/* maps                                                                                       */

static int map_grow(rp_map *m)
{
    uint32_t ncap = m->cap ? m->cap * 2 : 64;
    rp_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    for (uint32_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].id)
            continue;
        uint32_t j = (uint32_t)mix64(m->slots[i].key) & (ncap - 1);
        while (ns[j].id)
            j = (j + 1) & (ncap - 1);
        ns[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

/* Pointer map: exact key. Returns id or 0. */
static uint32_t ptr_get(const rp_map *m, uint64_t key)
{
    if (!m->cap)
        return 0;
    uint32_t j = (uint32_t)mix64(key) & (m->cap - 1);
    while (m->slots[j].id) {
        if (m->slots[j].key == key)
            return m->slots[j].id;
        j = (j + 1) & (m->cap - 1);
    }
    return 0;
}

/* Insert or overwrite key -> id. Returns 0, or -1 on allocation failure. */
static int ptr_put(rp_map *m, uint64_t key, uint32_t id)
{
    if ((m->used + 1) * 2 > m->cap && map_grow(m) != 0)
        return -1;
    uint32_t j = (uint32_t)mix64(key) & (m->cap - 1);
    while (m->slots[j].id) {
        if (m->slots[j].key == key) {
            m->slots[j].id = id;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->slots[j].key = key;
    m->slots[j].id = id;
    m->used++;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* name interning (lock held)                                                                 */

static int name_matches(const rp_name_entry *e, const char *s)
{
    if (strncmp(e->text, s, e->len) != 0)
        return 0;
    return e->truncated || s[e->len] == '\0';
}

static uint32_t text_lookup(rp_ring *r, uint64_t hash, int kind, const char *s)
{
    const rp_map *m = &r->by_text;
    if (!m->cap)
        return 0;
    uint32_t j = (uint32_t)mix64(hash) & (m->cap - 1);
    while (m->slots[j].id) {
        if (m->slots[j].key == hash) {
            const rp_name_entry *e = &r->names[m->slots[j].id - 1];
            if (e->kind == kind && name_matches(e, s))
                return m->slots[j].id;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return 0;
}

/* Insert a hash -> id entry without overwriting (hash collisions keep both). */
static int text_insert(rp_map *m, uint64_t hash, uint32_t id)
{
    if ((m->used + 1) * 2 > m->cap && map_grow(m) != 0)
        return -1;
    uint32_t j = (uint32_t)mix64(hash) & (m->cap - 1);
    while (m->slots[j].id)
        j = (j + 1) & (m->cap - 1);
    m->slots[j].key = hash;
    m->slots[j].id = id;
    m->used++;
    return 0;
}

/* Whether two launch configurations are the same: four 64-bit compares, the width they were
 * stored in (rp_launch_pack), no call, one branch. */
static inline int launch_key_equal(const rp_launch *a, const rp_launch *b)
{
    return ((a->w[0] ^ b->w[0]) | (a->w[1] ^ b->w[1]) | (a->w[2] ^ b->w[2]) | (a->w[3] ^ b->w[3])) == 0;
}

/* The id of launch configuration `k`, interning it if new; 0 on allocation failure or once
 * GPUFLOW_LAUNCH_ID_MAX configurations are defined. */
static uint32_t intern_launch(rp_ring *r, const rp_launch *k)
{
    uint64_t hash = fnv1a((const char *)k, sizeof *k, 0x4c41554e4348ull);
    const rp_map *m = &r->by_launch;
    if (m->cap) {
        uint32_t j = (uint32_t)mix64(hash) & (m->cap - 1);
        while (m->slots[j].id) {
            if (m->slots[j].key == hash && launch_key_equal(&r->launches[m->slots[j].id - 1].key, k))
                return m->slots[j].id;
            j = (j + 1) & (m->cap - 1);
        }
    }
    if (r->n_launches == GPUFLOW_LAUNCH_ID_MAX)
        return 0; /* the format's last id is taken: this configuration goes unnamed (id 0) */
    if (r->n_launches == r->launches_cap) {
        uint32_t ncap = r->launches_cap ? r->launches_cap * 2 : 16;
        rp_launch_entry *nv = realloc(r->launches, (size_t)ncap * sizeof *nv);
        if (!nv)
            return 0;
        r->launches = nv;
        r->launches_cap = ncap;
    }
    uint32_t id = r->n_launches + 1;
    if (text_insert(&r->by_launch, hash, id) != 0)
        return 0;
    r->launches[r->n_launches].key = *k;
    r->launches[r->n_launches].sent = 0;
    r->n_launches++;
    return id;
}

/* Remember that pkey pointed at e's text in this key epoch (nothing outside an epoch). */
static void trust_key(rp_ring *r, rp_name_entry *e, uint64_t pkey)
{
    e->trusted_key = pkey;
    e->trusted_epoch = r->key_epoch;
}

/* Returns the name id for (kind, s), creating it if new; 0 on allocation failure. A key found
 * in the pointer cache is checked against the interned text (an address can be reused for
 * another string once its first one is freed) once per key epoch, not per record. */
static uint32_t intern(rp_ring *r, int kind, const void *key, const char *s)
{
    uint64_t pkey = 0;
    if (key) {
        pkey = (uint64_t)(uintptr_t)key ^ ((uint64_t)kind << 62);
        uint32_t id = ptr_get(&r->by_ptr, pkey);
        if (id) {
            rp_name_entry *e = &r->names[id - 1];
            if (r->key_epoch && e->trusted_epoch == r->key_epoch && e->trusted_key == pkey)
                return id;
            if (name_matches(e, s)) {
                trust_key(r, e, pkey);
                return id;
            }
        }
    }
    size_t len = strnlen(s, GPUFLOW_NAME_MAX + 1);
    int truncated = len > GPUFLOW_NAME_MAX;
    if (truncated)
        len = GPUFLOW_NAME_MAX;
    uint64_t hash = fnv1a(s, len, (uint64_t)kind);
    uint32_t id = text_lookup(r, hash, kind, s);
    if (!id) {
        if (r->n_names == r->names_cap) {
            uint32_t ncap = r->names_cap ? r->names_cap * 2 : 64;
            rp_name_entry *nv = realloc(r->names, (size_t)ncap * sizeof *nv);
            if (!nv)
                return 0;
            r->names = nv;
            r->names_cap = ncap;
        }
        char *copy = malloc(len + 1);
        if (!copy)
            return 0;
        memcpy(copy, s, len);
        copy[len] = '\0';
        id = r->n_names + 1;
        if (text_insert(&r->by_text, hash, id) != 0) {
            free(copy);
            return 0;
        }
        rp_name_entry *e = &r->names[r->n_names++];
        e->text = copy;
        e->hash = hash;
        e->len = (uint32_t)len;
        e->kind = (uint8_t)kind;
        e->truncated = (uint8_t)truncated;
        e->sent = 0;
        e->trusted_epoch = 0;
        e->launch_id = 0;
    }
    if (key && ptr_put(&r->by_ptr, pkey, id) == 0) /* a failed cache insert only costs a lookup */
        trust_key(r, &r->names[id - 1], pkey);
    return id;
}

static uint32_t chunks_for(const rp_name_entry *e)
{
    uint32_t n = (e->len + GPUFLOW_NAME_CHUNK_TEXT - 1) / GPUFLOW_NAME_CHUNK_TEXT;
    return n ? n : 1;
}

static void write_chunks(rp_ring *r, uint64_t at, uint32_t id, const rp_name_entry *e,
                         uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        gpuflow_record *dst = &r->recs[(at + i) & r->mask];
        gpuflow_record c;
        memset(&c, 0, sizeof c);
        c.type = GPUFLOW_REC_NAME_CHUNK;
        c.flags = (uint16_t)((i + 1 == n ? GPUFLOW_FLAG_NAME_LAST : 0) |
                             (e->truncated ? GPUFLOW_FLAG_NAME_TRUNCATED : 0) |
                             (e->kind == RP_NAME_STREAM ? GPUFLOW_FLAG_NAME_STREAM : 0));
        c.device = id;
        uint32_t off = i * GPUFLOW_NAME_CHUNK_TEXT;
        uint32_t take = e->len - off < GPUFLOW_NAME_CHUNK_TEXT ? e->len - off
                                                                : GPUFLOW_NAME_CHUNK_TEXT;
        c.body.name.offset = off;
        c.body.name.total_len = e->len;
        if (take)
            memcpy(c.body.name.text, e->text + off, take);
        memcpy(dst, &c, sizeof c);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* open / close                                                                               */

/* The memory file behind a ring: sized, its memory reserved, then sealed so that its size can never
 * change under a consumer's mapping (a shrink would turn the consumer's next read into SIGBUS). */
static int make_memfd(size_t size, int *out)
{
    int fd = memfd_create("gpuflow-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return errno;
    int err = 0;
    if (ftruncate(fd, (off_t)size) != 0)
        err = errno;
    if (!err)
        err = posix_fallocate(fd, 0, (off_t)size); /* returns the error number itself */
    if (!err && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        err = errno;
    if (err) {
        close(fd);
        return err;
    }
    *out = fd;
    return 0;
}

int rp_create(rp_ring **out, int pid, uint32_t capacity)
{
    if (!out || !valid_capacity(capacity) || pid <= 0)
        return -EINVAL;
    *out = NULL;
    rp_ring *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    size_t size = rp_segment_size(capacity);
    int fd = -1;
    int err = make_memfd(size, &fd);
    void *base = MAP_FAILED;
    if (!err) {
        base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
            err = errno;
    }
    if (!err && pthread_mutex_init(&r->lock, NULL) != 0) {
        munmap(base, size);
        err = ENOMEM;
    }
    if (err) {
        if (fd >= 0)
            close(fd);
        free(r);
        return -err;
    }
    r->fd = fd;
    r->hdr = (gpuflow_ring_header *)base;
    r->recs = (gpuflow_record *)((char *)base + GPUFLOW_HEADER_SIZE);
    r->map_size = size;
    r->capacity = capacity;
    r->mask = capacity - 1;

    gpuflow_ring_header *h = r->hdr; /* a fresh memory file reads as zeros */
    h->version = GPUFLOW_RING_VERSION;
    h->header_size = GPUFLOW_HEADER_SIZE;
    h->record_size = GPUFLOW_RECORD_SIZE;
    h->capacity = capacity;
    h->producer_pid = pid;
    h->status = GPUFLOW_STATUS_STARTING;
    h->started_wall_ns = (int64_t)wall_ns();
    __atomic_store_n(&h->magic, GPUFLOW_RING_MAGIC, __ATOMIC_RELEASE); /* last */
    *out = r;
    return 0;
}

int rp_close(rp_ring *r)
{
    if (!r)
        return -EINVAL;
    int rc = 0;
    if (munmap(r->hdr, r->map_size) != 0)
        rc = -errno;
    if (close(r->fd) != 0 && rc == 0)
        rc = -errno;
    for (uint32_t i = 0; i < r->n_names; i++)
        free(r->names[i].text);
    free(r->names);
    free(r->by_ptr.slots);
    free(r->by_text.slots);
    free(r->launches);
    free(r->by_launch.slots);
    pthread_mutex_destroy(&r->lock);
    free(r);
    return rc;
}

int rp_fd(const rp_ring *r)
{
    return r->fd;
}

/* ------------------------------------------------------------------------------------------ */
/* publication (lock held)                                                                    */

/* Free slots, re-reading the consumer's tail only when the cached view is too small. */
static uint64_t free_slots(rp_ring *r, uint64_t need)
{
    uint64_t used = r->head - r->tail_seen;
    if (used <= r->capacity && r->capacity - used >= need)
        return r->capacity - used;
    r->tail_seen = __atomic_load_n(&r->hdr->tail, __ATOMIC_ACQUIRE);
    used = r->head - r->tail_seen;
    if (used > r->capacity) /* a consumer that wrote nonsense: treat as full, never overwrite */
        return 0;
    return r->capacity - used;
}

static void publish(rp_ring *r, uint64_t n)
{
    r->head += n;
    __atomic_store_n(&r->hdr->head, r->head, __ATOMIC_RELEASE);
}

static void count_drop(rp_ring *r)
{
    r->dropped++;
    store_u64(&r->hdr->dropped_ring, r->dropped);
}

static int is_activity(uint16_t type)
{
    return type == GPUFLOW_REC_KERNEL || type == GPUFLOW_REC_MEMCPY ||
           type == GPUFLOW_REC_MEMSET;
}

/* The LAUNCH record defining launch id `id` (lock held). */
static void write_launch(rp_ring *r, uint64_t at, uint32_t id, const rp_launch *k)
{
    gpuflow_record c;
    memset(&c, 0, sizeof c);
    c.type = GPUFLOW_REC_LAUNCH;
    int32_t static_shared = (int32_t)(uint32_t)k->w[0], dynamic_shared = (int32_t)(k->w[0] >> 32);
    int requested = (int)(k->w[3] >> 16 & 0xff);
    uint32_t limit = (uint32_t)(k->w[3] >> 32);
    c.flags = requested ? GPUFLOW_FLAG_CARVEOUT : 0;
    c.device = id;
    gpuflow_launch_payload *l = &c.body.launch;
    l->static_shared_bytes = static_shared > 0 ? (uint32_t)static_shared : 0;
    l->dynamic_shared_bytes = dynamic_shared > 0 ? (uint32_t)dynamic_shared : 0;
    l->shared_executed_bytes = (uint32_t)(k->w[2] >> 32);
    l->cluster_x = (uint32_t)k->w[1];
    l->cluster_y = (uint32_t)(k->w[1] >> 32);
    l->cluster_z = (uint32_t)k->w[2];
    l->cache_config = (uint8_t)k->w[3];
    l->shared_config = (uint8_t)(k->w[3] >> 8);
    l->carveout_requested = requested ? (uint8_t)(k->w[3] >> 24) : 0;
    l->shmem_limit_config = (uint8_t)(limit > 0xff ? 0xff : limit);
    memcpy(&r->recs[at & r->mask], &c, sizeof c);
}



/* What launch_changed returns beside the id: its LAUNCH record must go in the ring first. */
#define RP_LAUNCH_DEFINE 0x80000000u
_Static_assert(GPUFLOW_LAUNCH_ID_MAX < RP_LAUNCH_DEFINE, "a launch id leaves the top bit free");

/* The launch id of a kernel whose configuration is not its name's last one (or whose name has
 * none yet, or no name): interned, with RP_LAUNCH_DEFINE when its LAUNCH record must go in the
 * ring before the kernel's. Out of the per-record path: a name launches with one configuration,
 * as a rule, so this runs once per name and configuration. */
static __attribute__((noinline)) uint32_t launch_changed(rp_ring *r, rp_name_entry *e,
                                                        const rp_launch *launch)
{
    uint32_t lid = intern_launch(r, launch); /* 0: none (out of memory, or past GPUFLOW_LAUNCH_ID_MAX) */
    if (lid && !r->launches[lid - 1].sent)
        return lid | RP_LAUNCH_DEFINE;
    if (e && lid) {
        e->launch_id = lid;
        e->launch = *launch;
    }
    return lid;
}

/* rp_push, and for a kernel (`launch` not NULL) its launch configuration too. */
static int push(rp_ring *r, gpuflow_record *rec, int name_kind, const void *key, const char *name,
                const rp_launch *launch)
{
    if (!r || !rec)
        return 0;
    if (is_activity(rec->type)) {
        uint64_t s = rec->body.act.start, e = rec->body.act.end;
        if ((s == 0 && e == 0) || e < s) {
            rec->flags |= GPUFLOW_FLAG_NO_TIMING;
            rec->body.act.start = 0;
            rec->body.act.end = 0;
        }
    }
    int taken = ring_lock(r);
    if (r->frozen) {
        ring_unlock(r, taken);
        return 0;
    }
    uint32_t id = 0, nchunks = 0, lid = 0, nlaunch = 0;
    rp_name_entry *e = NULL;
    if (name_kind != RP_NAME_NONE && name) {
        id = intern(r, name_kind, key, name);
        if (id) {
            e = &r->names[id - 1];
            if (!e->sent)
                nchunks = chunks_for(e);
        }
    }
    if (name_kind != RP_NAME_NONE)
        rec->body.act.u.kernel.name_id = id;
    if (launch) {
        if (__builtin_expect(e && e->launch_id && launch_key_equal(&e->launch, launch), 1)) {
            lid = e->launch_id; /* as last time, and already defined: the common case */
        } else {
            lid = launch_changed(r, e, launch);
            nlaunch = lid >> 31;
            lid &= ~RP_LAUNCH_DEFINE;
        }
        rec->body.act.u.kernel.launch_id = lid;
    }
    uint64_t need = (uint64_t)nchunks + nlaunch + 1;
    if (free_slots(r, need) < need) {
        count_drop(r);
        ring_unlock(r, taken);
        return 0;
    }
    if (nchunks)
        write_chunks(r, r->head, id, e, nchunks);
    if (nlaunch)
        write_launch(r, r->head + nchunks, lid, launch);
    memcpy(&r->recs[(r->head + nchunks + nlaunch) & r->mask], rec, sizeof *rec);
    publish(r, need);
    if (nchunks)
        e->sent = 1;
    if (nlaunch) {
        r->launches[lid - 1].sent = 1;
        if (e) {
            e->launch_id = lid;
            e->launch = *launch;
        }
    }
    if (is_activity(rec->type) && (rec->flags & GPUFLOW_FLAG_NO_TIMING)) {
        r->incomplete++;
        store_u64(&r->hdr->incomplete, r->incomplete);
    }
    ring_unlock(r, taken);
    return 1;
}

int rp_push(rp_ring *r, gpuflow_record *rec, int name_kind, const void *key, const char *name)
{
    return push(r, rec, name_kind, key, name, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* record builders                                                                            */

static void act_init(gpuflow_record *rec, uint16_t type, uint32_t dev, uint32_t ctx,
                     uint32_t stream, uint64_t start, uint64_t end)
{
    memset(rec, 0, sizeof *rec);
    rec->type = type;
    rec->device = dev;
    rec->body.act.start = start;
    rec->body.act.end = end;
    rec->body.act.context = ctx;
    rec->body.act.stream = stream;
}

static uint16_t clamp16(uint32_t v)
{
    return v > 0xffffu ? 0xffffu : (uint16_t)v;
}

int rp_kernel(rp_ring *r, uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
              uint64_t end, uint32_t correlation, const void *name_key, const char *mangled,
              const uint32_t grid[3], const uint32_t block[3], uint16_t registers,
              const rp_launch *launch, uint32_t graph_id)
{
    gpuflow_record rec;
    act_init(&rec, GPUFLOW_REC_KERNEL, dev, ctx, stream, start, end);
    gpuflow_kernel_payload *k = &rec.body.act.u.kernel;
    k->correlation = correlation;
    k->grid_x = grid[0];
    k->grid_y = clamp16(grid[1]);
    k->grid_z = clamp16(grid[2]);
    k->block_x = clamp16(block[0]);
    k->block_y = clamp16(block[1]);
    k->block_z = clamp16(block[2]);
    k->registers = registers;
    k->graph_id = graph_id;
    if (graph_id)
        rec.flags |= GPUFLOW_FLAG_GRAPH;
    return push(r, &rec, RP_NAME_KERNEL, name_key, mangled, launch); /* NULL: launch id 0 */
}

int rp_memcpy(rp_ring *r, uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
              uint64_t end, uint32_t correlation, uint8_t copy_kind, uint8_t src_kind,
              uint8_t dst_kind, uint64_t bytes, uint32_t src_dev, uint32_t dst_dev,
              uint16_t extra_flags, uint32_t graph_id)
{
    gpuflow_record rec;
    act_init(&rec, GPUFLOW_REC_MEMCPY, dev, ctx, stream, start, end);
    gpuflow_copy_payload *c = &rec.body.act.u.copy;
    c->correlation = correlation;
    c->copy_kind = copy_kind;
    c->src_kind = src_kind;
    c->dst_kind = dst_kind;
    c->bytes = bytes;
    c->src_device = src_dev;
    c->dst_device = dst_dev;
    c->graph_id = graph_id;
    rec.flags = (uint16_t)(extra_flags & (GPUFLOW_FLAG_ASYNC | GPUFLOW_FLAG_GRAPH));
    if (graph_id)
        rec.flags |= GPUFLOW_FLAG_GRAPH;
    return rp_push(r, &rec, RP_NAME_NONE, NULL, NULL);
}

int rp_memset(rp_ring *r, uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
              uint64_t end, uint32_t correlation, uint64_t bytes, uint32_t value,
              uint8_t memory_kind, uint16_t extra_flags, uint32_t graph_id)
{
    gpuflow_record rec;
    act_init(&rec, GPUFLOW_REC_MEMSET, dev, ctx, stream, start, end);
    gpuflow_copy_payload *c = &rec.body.act.u.copy;
    c->correlation = correlation;
    c->dst_kind = memory_kind;
    c->bytes = bytes;
    c->src_device = dev;
    c->dst_device = dev;
    c->value = value;
    c->graph_id = graph_id;
    rec.flags = (uint16_t)(extra_flags & (GPUFLOW_FLAG_ASYNC | GPUFLOW_FLAG_GRAPH));
    if (graph_id)
        rec.flags |= GPUFLOW_FLAG_GRAPH;
    return rp_push(r, &rec, RP_NAME_NONE, NULL, NULL);
}

int rp_stream_name(rp_ring *r, uint32_t dev, uint32_t ctx, uint32_t stream, const char *name)
{
    gpuflow_record rec;
    act_init(&rec, GPUFLOW_REC_STREAM_NAME, dev, ctx, stream, 0, 0);
    return rp_push(r, &rec, RP_NAME_STREAM, NULL, name ? name : "");
}

int rp_context(rp_ring *r, uint32_t dev, uint32_t ctx, uint32_t null_stream)
{
    gpuflow_record rec;
    act_init(&rec, GPUFLOW_REC_CONTEXT, dev, ctx, null_stream, 0, 0);
    return rp_push(r, &rec, RP_NAME_NONE, NULL, NULL);
}

int rp_device(rp_ring *r, uint32_t dev, const char *name, const rp_device_facts *facts)
{
    gpuflow_record rec;
    act_init(&rec, GPUFLOW_REC_DEVICE, dev, 0, 0, 0, 0);
    if (facts) {
        gpuflow_device_payload *d = &rec.body.dev;
        memcpy(d->uuid, facts->uuid, sizeof d->uuid);
        d->sm_count = facts->sm_count;
        d->cc_major = facts->cc_major;
        d->cc_minor = facts->cc_minor;
    }
    return rp_push(r, &rec, RP_NAME_KERNEL, NULL, name ? name : "");
}

void rp_batch_begin(rp_ring *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    __atomic_store_n(&r->batch_owner, (uintptr_t)pthread_self(), __ATOMIC_RELAXED);
}

void rp_batch_end(rp_ring *r)
{
    if (!r)
        return;
    __atomic_store_n(&r->batch_owner, (uintptr_t)0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&r->lock);
}

void rp_key_epoch_begin(rp_ring *r)
{
    if (!r)
        return;
    int taken = ring_lock(r);
    if (++r->key_epoch == 0) /* wrapped (after 2^32 buffers): 0 means "no epoch" */
        r->key_epoch = 1;
    ring_unlock(r, taken);
}

int rp_clock_sync(rp_ring *r, uint64_t cupti_ns, uint64_t wall)
{
    gpuflow_record rec;
    act_init(&rec, GPUFLOW_REC_CLOCK_SYNC, 0, 0, 0, cupti_ns, wall);
    int ok = rp_push(r, &rec, RP_NAME_NONE, NULL, NULL);
    int taken = ring_lock(r);
    if (!r->frozen) { /* latest pair, best effort: the CLOCK_SYNC records are authoritative */
        __atomic_store_n(&r->hdr->clock_cupti_ns, (int64_t)cupti_ns, __ATOMIC_RELAXED);
        __atomic_store_n(&r->hdr->clock_wall_ns, (int64_t)wall, __ATOMIC_RELAXED);
    }
    ring_unlock(r, taken);
    return ok;
}

/* ------------------------------------------------------------------------------------------ */
/* header fields                                                                              */

void rp_set_status(rp_ring *r, uint32_t status, const char *detail)
{
    int taken = ring_lock(r);
    if (!r->frozen) {
        char buf[GPUFLOW_DETAIL_MAX];
        memset(buf, 0, sizeof buf);
        if (detail)
            snprintf(buf, sizeof buf, "%s", detail);
        memcpy(r->hdr->status_detail, buf, sizeof buf);
        __atomic_store_n(&r->hdr->status, status, __ATOMIC_RELEASE);
    }
    ring_unlock(r, taken);
}

uint32_t rp_status(rp_ring *r)
{
    return __atomic_load_n(&r->hdr->status, __ATOMIC_ACQUIRE);
}

void rp_set_info(rp_ring *r, uint32_t cupti_version, uint32_t flush_ms)
{
    int taken = ring_lock(r);
    if (!r->frozen) {
        r->hdr->cupti_version = cupti_version;
        r->hdr->flush_ms = flush_ms;
    }
    ring_unlock(r, taken);
}

/* Add n to one of the header's counters (and its private copy), unless the ring is frozen. */
static void add_counter(rp_ring *r, uint64_t *mine, volatile uint64_t *published, uint64_t n)
{
    int taken = ring_lock(r);
    if (!r->frozen) {
        *mine += n;
        store_u64(published, *mine);
    }
    ring_unlock(r, taken);
}

void rp_add_cupti_dropped(rp_ring *r, uint64_t n)
{
    if (n)
        add_counter(r, &r->cupti_dropped, &r->hdr->dropped_cupti, n);
}

void rp_add_buffers_completed(rp_ring *r, uint64_t n)
{
    add_counter(r, &r->buffers, &r->hdr->buffers_completed, n);
}

void rp_add_translate_cpu_ns(rp_ring *r, uint64_t ns)
{
    add_counter(r, &r->translate_ns, &r->hdr->translate_cpu_ns, ns);
}

void rp_mark_exited(rp_ring *r)
{
    int taken = ring_lock(r);
    if (!r->frozen) {
        r->frozen = 1;
        __atomic_store_n(&r->hdr->producer_exited, 1u, __ATOMIC_RELEASE);
    }
    ring_unlock(r, taken);
}

uint64_t rp_head(rp_ring *r)
{
    return __atomic_load_n(&r->hdr->head, __ATOMIC_ACQUIRE);
}

uint64_t rp_tail(rp_ring *r)
{
    return __atomic_load_n(&r->hdr->tail, __ATOMIC_ACQUIRE);
}

uint64_t rp_dropped(rp_ring *r)
{
    int taken = ring_lock(r);
    uint64_t v = r->dropped;
    ring_unlock(r, taken);
    return v;
}

uint64_t rp_incomplete(rp_ring *r)
{
    int taken = ring_lock(r);
    uint64_t v = r->incomplete;
    ring_unlock(r, taken);
    return v;
}

uint32_t rp_launches_interned(rp_ring *r)
{
    int taken = ring_lock(r);
    uint32_t v = r->n_launches;
    ring_unlock(r, taken);
    return v;
}

uint32_t rp_names_interned(rp_ring *r)
{
    int taken = ring_lock(r);
    uint32_t v = r->n_names;
    ring_unlock(r, taken);
    return v;
}

/* ------------------------------------------------------------------------------------------ */
/* test hooks                                                                                 */

int rp_push_raw(rp_ring *r, const void *rec64)
{
    int taken = ring_lock(r);
    int ok = 0;
    if (!r->frozen && free_slots(r, 1) >= 1) {
        memcpy(&r->recs[r->head & r->mask], rec64, GPUFLOW_RECORD_SIZE);
        publish(r, 1);
        ok = 1;
    } else if (!r->frozen) {
        count_drop(r);
    }
    ring_unlock(r, taken);
    return ok;
}

void rp_write_slot(rp_ring *r, uint64_t index, const void *rec64)
{
    int taken = ring_lock(r);
    memcpy(&r->recs[index & r->mask], rec64, GPUFLOW_RECORD_SIZE);
    ring_unlock(r, taken);
}

void rp_set_head(rp_ring *r, uint64_t head)
{
    int taken = ring_lock(r);
    r->head = head;
    __atomic_store_n(&r->hdr->head, head, __ATOMIC_RELEASE);
    ring_unlock(r, taken);
}

gpuflow_ring_header *rp_header(rp_ring *r)
{
    return r->hdr;
}
