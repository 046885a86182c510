/* SST tables: allocation, connection, pushes and the peer cache. */
#include <stdlib.h>
#include <string.h>

#include "sst/sst_impl.h"
#include "util/error.h"
#include "util/log.h"

static uint32_t padded_row_size(const struct sst_schema *schema)
{
    return (schema->row_size + SST_CACHE_LINE - 1) / SST_CACHE_LINE * SST_CACHE_LINE;
}

/* A row's size rounded up to the transport's slice alignment (cache lines
 * when it has none): on shm, whole pages. */
static uint32_t row_stride(const struct sst_engine *engine, uint32_t row_size)
{
    uint32_t align = tp_attr(engine->endpoint)->slice_align;
    if (align < SST_CACHE_LINE)
        align = SST_CACHE_LINE;
    return (row_size + align - 1) / align * align;
}

int sst_table_create(struct sst_engine *engine, const struct sst_schema *schema, uint32_t num_rows,
                     uint32_t my_row, struct sst_table **out)
{
    if (num_rows == 0 || num_rows > SST_MAX_ROWS || my_row >= num_rows)
        return sp_error(SPINDLE_EINVAL, "sst: %u rows with my row %u (rows must be 1..%d)",
                        num_rows, my_row, SST_MAX_ROWS);
    struct sst_table *table = calloc(1, sizeof *table);
    if (table == NULL || (table->schema = malloc(sizeof *schema)) == NULL) {
        free(table);
        return sp_error(SPINDLE_ENOMEM, "sst: out of memory for a table");
    }
    memcpy(table->schema, schema, sizeof *schema);
    table->schema->row_size = padded_row_size(schema);
    table->engine = engine;
    table->num_rows = num_rows;
    table->my_row = my_row;
    table->row_stride = row_stride(engine, table->schema->row_size);
    table->size = (size_t)num_rows * table->row_stride;
    void *base;
    int rc = tp_mr_alloc(engine->endpoint, table->size, TP_MR_REMOTE_WRITE, &base, &table->mr);
    if (rc != 0) {
        free(table->schema);
        free(table);
        return rc;
    }
    table->base = base;
    for (uint32_t row = 0; row < SST_MAX_ROWS; row++)
        table->peer_of_row[row] = -1;
    pthread_mutex_lock(&engine->lock);
    table->next = engine->tables;
    engine->tables = table;
    if (atomic_load(&engine->polling)) /* pushed with the next heartbeat */
        sst_write_u64(table, SST_HEADER_SLEEP, SST_SLEEP_POLLING);
    pthread_mutex_unlock(&engine->lock);
    *out = table;
    return 0;
}

int sst_table_set_side_region(struct sst_table *table, size_t size, unsigned flags)
{
    if (size == 0)
        return sp_error(SPINDLE_EINVAL, "sst: a side region of 0 bytes");
    if (table->side_mr != NULL)
        return sp_error(SPINDLE_EINVAL, "sst: the table already has a %zu-byte side region",
                        table->side_size);
    for (uint32_t row = 0; row < table->num_rows; row++)
        if (table->peer_of_row[row] >= 0)
            return sp_error(SPINDLE_EINVAL, "sst: side region added after connecting row %u", row);
    struct sst_engine *engine = table->engine;
    void *side;
    int rc =
        tp_mr_alloc(engine->endpoint, size, flags | TP_MR_REMOTE_WRITE, &side, &table->side_mr);
    if (rc != 0)
        return rc;
    table->side = side;
    table->side_size = size;
    return 0;
}

int sst_table_set_side_slice(struct sst_table *table, uint32_t row, uint64_t offset,
                             uint64_t length)
{
    uint32_t align = sst_table_slice_align(table);
    if (row >= table->num_rows || row == table->my_row)
        return sp_error(SPINDLE_EINVAL, "sst: side slice of row %u (my row %u of %u)", row,
                        table->my_row, table->num_rows);
    if (table->peer_of_row[row] >= 0)
        return sp_error(SPINDLE_EINVAL, "sst: side slice of row %u set after connecting it", row);
    if (align != 0 && (offset % align != 0 || length % align != 0))
        return sp_error(SPINDLE_EINVAL,
                        "sst: side slice of row %u (%llu bytes at %llu) is not aligned to %u", row,
                        (unsigned long long)length, (unsigned long long)offset, align);
    table->side_sliced[row] = true;
    table->side_slice_offset[row] = offset;
    table->side_slice_length[row] = length;
    return 0;
}

uint32_t sst_table_slice_align(const struct sst_table *table)
{
    return tp_attr(table->engine->endpoint)->slice_align;
}

/* Tells the endpoint the member ids that may connect (tp_set_members): the
 * rows of every granted table the engine holds, so the current view's
 * members and, while a view change or a join builds the next table, the
 * next view's (a joiner is a row there before it can learn an address to
 * connect to: the table is granted before it is exported). With no
 * granted table left the last set stays. Takes the engine lock. */
static int admit_members(struct sst_engine *engine)
{
    pthread_mutex_lock(&engine->lock);
    size_t tables = 0;
    for (const struct sst_table *t = engine->tables; t != NULL; t = t->next)
        tables += t->members_known;
    uint32_t *ids = tables > 0 ? malloc(tables * SST_MAX_ROWS * sizeof *ids) : NULL;
    uint32_t count = 0;
    for (const struct sst_table *t = engine->tables; ids != NULL && t != NULL; t = t->next) {
        for (uint32_t row = 0; t->members_known && row < t->num_rows; row++) {
            bool seen = false;
            for (uint32_t i = 0; i < count && !seen; i++)
                seen = ids[i] == t->member_of_row[row];
            if (!seen)
                ids[count++] = t->member_of_row[row];
        }
    }
    pthread_mutex_unlock(&engine->lock);
    if (tables > 0 && ids == NULL)
        return sp_error(SPINDLE_ENOMEM, "sst: out of memory for the member ids of %zu tables",
                        tables);
    int rc = count > 0 ? tp_set_members(engine->endpoint, ids, count) : 0;
    free(ids);
    return rc;
}

int sst_table_grant_rows(struct sst_table *table, const uint32_t *member_of_row)
{
    pthread_mutex_lock(&table->engine->lock);
    memcpy(table->member_of_row, member_of_row, table->num_rows * sizeof *member_of_row);
    table->members_known = true;
    pthread_mutex_unlock(&table->engine->lock);
    int rc = admit_members(table->engine);
    for (uint32_t row = 0; row < table->num_rows && rc == 0; row++)
        if (row != table->my_row)
            rc = tp_mr_grant(table->mr, member_of_row[row], (uint64_t)row * table->row_stride,
                             table->row_stride);
    return rc;
}

int sst_table_grant_side(struct sst_table *table, uint32_t member, uint64_t offset, uint64_t length)
{
    if (table->side_mr == NULL)
        return sp_error(SPINDLE_EINVAL, "sst: a side grant to member %u, but no side region",
                        member);
    return tp_mr_grant(table->side_mr, member, offset, length);
}

int sst_table_export(struct sst_table *table, struct sst_member_desc *out)
{
    memset(out, 0, sizeof *out);
    int rc = tp_address(table->engine->endpoint, &out->address);
    if (rc == 0)
        rc = tp_mr_export(table->mr, &out->region);
    if (rc == 0 && table->side_mr != NULL)
        rc = tp_mr_export(table->side_mr, &out->side);
    return rc;
}

/* Imports, of row's owner, our row of its table (all we write there) and,
 * when it has one, its side region or the slice of it we write. */
static int import_regions(struct sst_table *table, uint32_t row, struct tp_peer *peer,
                          const struct sst_member_desc *desc)
{
    int rc = tp_rmr_import_slice(peer, &desc->region, (uint64_t)table->my_row * table->row_stride,
                                 table->row_stride, &table->rmr[row]);
    bool sliced = table->side_sliced[row];
    if (rc != 0 || desc->side.len == 0 || (sliced && table->side_slice_length[row] == 0))
        return rc;
    if (sliced)
        rc = tp_rmr_import_slice(peer, &desc->side, table->side_slice_offset[row],
                                 table->side_slice_length[row], &table->side_rmr[row]);
    else
        rc = tp_rmr_import(peer, &desc->side, &table->side_rmr[row]);
    if (rc != 0) {
        tp_rmr_release(peer, table->rmr[row]);
        table->rmr[row] = NULL;
    }
    return rc;
}

/* Connects one row. Lock held. */
static int connect_row(struct sst_table *table, uint32_t row, const struct sst_member_desc *desc,
                       int timeout_ms)
{
    struct sst_engine *engine = table->engine;
    uint32_t index;
    int rc = sst_peer_get(engine, &desc->address, timeout_ms, &index);
    if (rc != 0)
        return rc;
    if (engine->peers[index].failed)
        rc = sp_error(SPINDLE_EPEERFAILED, "sst: the member of row %u already failed", row);
    else
        rc = import_regions(table, row, engine->peers[index].peer, desc);
    if (rc != 0) {
        pthread_mutex_lock(&engine->post_lock);
        sst_peer_put(engine, index);
        pthread_mutex_unlock(&engine->post_lock);
        return rc;
    }
    table->peer_of_row[row] = (int32_t)index;
    return 0;
}

int sst_table_connect(struct sst_table *table, const struct sst_member_desc *descs, int timeout_ms,
                      uint64_t *failed)
{
    struct sst_engine *engine = table->engine;
    int rc = 0;
    if (failed != NULL)
        *failed = 0;
    pthread_mutex_lock(&engine->lock);
    for (uint32_t row = 0; row < table->num_rows && rc == 0; row++) {
        if (row == table->my_row || table->peer_of_row[row] >= 0)
            continue;
        rc = connect_row(table, row, &descs[row], timeout_ms);
        if (rc == 0 || failed == NULL || rc == SPINDLE_ENOMEM)
            continue;
        SP_LOG_WARNING("sst", "row %u: not connected, marked failed: %s", row, spindle_errmsg());
        atomic_store(&table->failed[row], true);
        *failed |= 1ull << row;
        rc = 0;
    }
    pthread_mutex_unlock(&engine->lock);
    return rc;
}

void sst_table_destroy(struct sst_table *table)
{
    if (table == NULL)
        return;
    struct sst_engine *engine = table->engine;
    pthread_mutex_lock(&engine->lock);
    /* An in-flight post (early unlock: engine lock dropped, post_lock held)
     * may still write through this table's remote regions; wait for it
     * before releasing them (lock order: lock, then post_lock). */
    pthread_mutex_lock(&engine->post_lock);
    /* Drop queued writes that reference this table's memory. */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < engine->num_pending; i++) {
        const struct tp_mr *local_mr = engine->pending[i].write.local_mr;
        if (local_mr != table->mr && local_mr != table->side_mr)
            engine->pending[kept++] = engine->pending[i];
    }
    engine->num_pending = kept;
    for (struct sst_table **link = &engine->tables; *link != NULL; link = &(*link)->next) {
        if (*link == table) {
            *link = table->next;
            break;
        }
    }
    for (uint32_t row = 0; row < table->num_rows; row++) {
        int32_t index = table->peer_of_row[row];
        if (index < 0)
            continue;
        tp_rmr_release(engine->peers[index].peer, table->rmr[row]);
        if (table->side_rmr[row] != NULL)
            tp_rmr_release(engine->peers[index].peer, table->side_rmr[row]);
        sst_peer_put(engine, (uint32_t)index);
    }
    pthread_mutex_unlock(&engine->post_lock);
    pthread_mutex_unlock(&engine->lock);
    /* Its members no longer connect unless another table has them (a
     * member the next view removed). */
    if (table->members_known)
        (void)admit_members(engine);
    if (table->side_mr != NULL)
        tp_mr_free(engine->endpoint, table->side_mr);
    tp_mr_free(engine->endpoint, table->mr);
    free(table->schema);
    free(table);
}

uint32_t sst_table_my_row(const struct sst_table *table)
{
    return table->my_row;
}

uint8_t *sst_row(struct sst_table *table, uint32_t row)
{
    return table->base + (size_t)row * table->row_stride;
}

bool sst_row_failed(struct sst_table *table, uint32_t row)
{
    return row < table->num_rows && atomic_load(&table->failed[row]);
}

void sst_table_suspect(struct sst_table *table, uint32_t row, int error)
{
    if (row >= table->num_rows || row == table->my_row ||
        atomic_exchange(&table->failed[row], true))
        return;
    struct sst_engine *engine = table->engine;
    if (engine->on_failure != NULL)
        engine->on_failure(engine->on_failure_ctx, table, row, error);
}

void sst_table_excuse(struct sst_table *table, uint32_t row)
{
    if (row >= table->num_rows)
        return;
    struct sst_engine *engine = table->engine;
    pthread_mutex_lock(&engine->lock);
    table->beat_at_ns[row] = 0; /* the stall clock starts at the next look */
    pthread_mutex_unlock(&engine->lock);
}

enum sst_link sst_table_link(struct sst_table *table, uint32_t row)
{
    if (row >= table->num_rows)
        return SST_LINK_NONE;
    if (row == table->my_row)
        return SST_LINK_SELF;
    struct sst_engine *engine = table->engine;
    /* The peer cache may grow (a join) under the lock. */
    pthread_mutex_lock(&engine->lock);
    int32_t peer = table->peer_of_row[row];
    enum sst_link link = SST_LINK_NONE;
    if (atomic_load(&table->failed[row]) || (peer >= 0 && engine->peers[peer].failed))
        link = SST_LINK_FAILED;
    else if (peer >= 0)
        link = SST_LINK_CONNECTED;
    pthread_mutex_unlock(&engine->lock);
    return link;
}

const char *sst_engine_backend(const struct sst_engine *engine)
{
    return tp_name(engine->endpoint);
}

uint8_t *sst_side(struct sst_table *table)
{
    return table->side;
}

/* True when row's owner is connected and not known to have failed. */
static bool row_reachable(const struct sst_table *table, uint32_t row)
{
    int32_t peer = table->peer_of_row[row];
    return peer >= 0 && !atomic_load(&table->failed[row]) && !table->engine->peers[peer].failed;
}

/* Appends one write to row's owner (reachable) to the queue. Lock held. A
 * write that asks for a ring gets one when the doorbell is cheap (shm,
 * fabric); otherwise (verbs: a ring is a work request) only when the owner
 * announced that it sleeps (odd SLEEP word in its row). Read before the
 * post, that word can miss a sleep announced meanwhile; such a sleeper
 * wakes at its next ring or at the end of its max_sleep_ms. An owner that
 * announced dedicated-CPU polling never sleeps and is never rung: on shm
 * a ring is an atomic add on a line of the owner's, which the next ring
 * from another member takes away again. */
static int enqueue(struct sst_table *table, uint32_t row, struct tp_write write, bool ring)
{
    struct sst_engine *engine = table->engine;
    if (ring) {
        uint64_t sleep = sst_read_u64(table, row, SST_HEADER_SLEEP);
        if ((sleep & SST_SLEEP_POLLING) != 0)
            ring = false;
        else if ((tp_attr(engine->endpoint)->caps & TP_CAP_CHEAP_DOORBELL) == 0)
            ring = (sleep & 1) != 0;
    }
    if (engine->num_pending == engine->cap_pending) {
        uint32_t cap = engine->cap_pending ? engine->cap_pending * 2 : 64;
        struct sst_pending *grown = realloc(engine->pending, cap * sizeof *grown);
        if (grown == NULL)
            return sp_error(SPINDLE_ENOMEM, "sst: out of memory queueing a push");
        engine->pending = grown;
        engine->cap_pending = cap;
    }
    int32_t peer = table->peer_of_row[row];
    engine->pending[engine->num_pending++] = (struct sst_pending){
        .peer = (uint32_t)peer,
        .target = engine->peers[peer].peer,
        .ring = ring,
        .write = write,
    };
    return 0;
}

int sst_queue_write(struct sst_table *table, uint32_t row, uint32_t offset, uint32_t length,
                    bool ring)
{
    if (!row_reachable(table, row))
        return 0;
    uint32_t row_stride = table->row_stride;
    return enqueue(table, row,
                   (struct tp_write){.local = sst_row(table, table->my_row) + offset,
                                     .local_mr = table->mr,
                                     .remote = table->rmr[row],
                                     .remote_offset = (uint64_t)table->my_row * row_stride + offset,
                                     .length = length},
                   ring);
}

void sst_table_announce_removed(struct sst_table *table, uint64_t rows)
{
    struct sst_engine *engine = table->engine;
    pthread_mutex_lock(&engine->lock);
    sst_write_u64(table, SST_HEADER_REMOVED, rows);
    uint32_t row_stride = table->row_stride;
    for (uint32_t row = 0; row < table->num_rows; row++) {
        int32_t peer = table->peer_of_row[row];
        /* Suspected rows too (table->failed): a suspicion may be wrong,
         * and exactly those owners need the notice. */
        if (row == table->my_row || peer < 0 || engine->peers[peer].failed)
            continue;
        (void)enqueue(table, row,
                      (struct tp_write){.local = sst_row(table, table->my_row),
                                        .local_mr = table->mr,
                                        .remote = table->rmr[row],
                                        .remote_offset = (uint64_t)table->my_row * row_stride,
                                        .length = SST_ROW_HEADER},
                      true);
    }
    sst_unlock_and_post(engine);
}

int sst_push_side(struct sst_table *table, uint64_t local_offset, uint32_t length,
                  const uint32_t *rows, const uint64_t *remote_offsets, uint32_t num_rows)
{
    if (length == 0 || local_offset > table->side_size || length > table->side_size - local_offset)
        return sp_error(SPINDLE_EINVAL,
                        "sst: side push of %u bytes at offset %llu exceeds the %zu-byte "
                        "side region",
                        length, (unsigned long long)local_offset, table->side_size);
    if (rows == NULL || remote_offsets == NULL)
        return sp_error(SPINDLE_EINVAL, "sst: side push without rows or remote offsets");
    sst_stat_add(&table->engine->stats.pushes, 1);
    for (uint32_t i = 0; i < num_rows; i++) {
        uint32_t row = rows[i];
        if (row >= table->num_rows)
            return sp_error(SPINDLE_EINVAL, "sst: side push to row %u of a %u-row table", row,
                            table->num_rows);
        if (row == table->my_row || !row_reachable(table, row))
            continue;
        if (table->side_rmr[row] == NULL)
            return sp_error(SPINDLE_EINVAL,
                            "sst: side push to row %u, of whose side region nothing is imported",
                            row);
        int rc = enqueue(table, row,
                         (struct tp_write){.local = table->side + local_offset,
                                           .local_mr = table->side_mr,
                                           .remote = table->side_rmr[row],
                                           .remote_offset = remote_offsets[i],
                                           .length = length},
                         true);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int sst_push(struct sst_table *table, uint32_t offset, uint32_t length, const uint32_t *rows,
             uint32_t num_rows)
{
    if (length == 0 || offset > table->schema->row_size ||
        length > table->schema->row_size - offset)
        return sp_error(SPINDLE_EINVAL,
                        "sst: push of %u bytes at offset %u exceeds the %u-byte row", length,
                        offset, table->schema->row_size);
    sst_stat_add(&table->engine->stats.pushes, 1);
    int rc = 0;
    if (rows == NULL) {
        for (uint32_t row = 0; row < table->num_rows && rc == 0; row++) {
            if (row != table->my_row)
                rc = sst_queue_write(table, row, offset, length, true);
        }
        return rc;
    }
    for (uint32_t i = 0; i < num_rows && rc == 0; i++) {
        if (rows[i] >= table->num_rows)
            return sp_error(SPINDLE_EINVAL, "sst: push to row %u of a %u-row table", rows[i],
                            table->num_rows);
        if (rows[i] != table->my_row)
            rc = sst_queue_write(table, rows[i], offset, length, true);
    }
    return rc;
}

void sst_push_headers(struct sst_engine *engine)
{
    for (struct sst_table *table = engine->tables; table != NULL; table = table->next) {
        for (uint32_t row = 0; row < table->num_rows; row++) {
            if (row != table->my_row)
                (void)sst_queue_write(table, row, 0, SST_ROW_HEADER, false);
        }
    }
}

static int peer_find(const struct sst_engine *engine, const struct tp_desc *address)
{
    for (uint32_t i = 0; i < engine->num_peers; i++) {
        const struct sst_peer_ref *ref = &engine->peers[i];
        if (ref->refs > 0 && ref->address.len == address->len &&
            memcmp(ref->address.bytes, address->bytes, address->len) == 0)
            return (int)i;
    }
    return -1;
}

int sst_peer_get(struct sst_engine *engine, const struct tp_desc *address, int timeout_ms,
                 uint32_t *index)
{
    int found = peer_find(engine, address);
    if (found >= 0) {
        engine->peers[found].refs++;
        *index = (uint32_t)found;
        return 0;
    }
    /* A connect may wait for its peer up to timeout_ms (fabric, verbs):
     * the predicate thread must go on meanwhile (heartbeats, the old
     * view's failure reports), or the others take this member for dead.
     * Every backend's connect runs beside its poll (transport.h); setup
     * calls themselves are never concurrent (one membership thread), so
     * nobody else changes the peer cache while the lock is dropped. */
    struct tp_peer *peer = NULL;
    pthread_mutex_unlock(&engine->lock);
    int rc = tp_connect(engine->endpoint, address, timeout_ms, &peer);
    pthread_mutex_lock(&engine->lock);
    if (rc != 0)
        return rc;
    uint32_t slot = engine->num_peers;
    for (uint32_t i = 0; i < engine->num_peers; i++) {
        if (engine->peers[i].refs == 0) {
            slot = i;
            break;
        }
    }
    if (slot == engine->cap_peers) {
        uint32_t cap = engine->cap_peers ? engine->cap_peers * 2 : 8;
        struct sst_peer_ref *grown = realloc(engine->peers, cap * sizeof *grown);
        if (grown == NULL) {
            tp_disconnect(engine->endpoint, peer);
            return sp_error(SPINDLE_ENOMEM, "sst: out of memory for peers");
        }
        engine->peers = grown;
        engine->cap_peers = cap;
    }
    /* A failure the predicate thread polled while the lock was dropped
     * named a peer not yet in the cache: look at its state instead. */
    engine->peers[slot] = (struct sst_peer_ref){
        .address = *address, .refs = 1, .peer = peer, .failed = tp_peer_state(peer) != 0};
    if (slot == engine->num_peers)
        engine->num_peers++;
    *index = slot;
    return 0;
}

void sst_peer_put(struct sst_engine *engine, uint32_t index)
{
    struct sst_peer_ref *ref = &engine->peers[index];
    if (--ref->refs > 0)
        return;
    /* Queued writes to this peer must not outlive it. */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < engine->num_pending; i++) {
        if (engine->pending[i].peer != index)
            engine->pending[kept++] = engine->pending[i];
    }
    engine->num_pending = kept;
    sst_stuck_forget(engine, ref->peer);
    tp_disconnect(engine->endpoint, ref->peer);
    ref->peer = NULL;
}

void sst_peer_failed(struct sst_engine *engine, struct tp_peer *peer, int error)
{
    for (uint32_t i = 0; i < engine->num_peers; i++) {
        if (engine->peers[i].refs > 0 && engine->peers[i].peer == peer)
            engine->peers[i].failed = true;
    }
    for (struct sst_table *table = engine->tables; table != NULL; table = table->next) {
        for (uint32_t row = 0; row < table->num_rows; row++) {
            int32_t index = table->peer_of_row[row];
            if (index < 0 || engine->peers[index].peer != peer || atomic_load(&table->failed[row]))
                continue;
            atomic_store(&table->failed[row], true);
            if (engine->on_failure != NULL)
                engine->on_failure(engine->on_failure_ctx, table, row, error);
        }
    }
}
