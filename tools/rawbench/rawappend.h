/*
 * spindle-rawbench --append: the raw disk reference that logged delivery
 * (spindle-bench --log-dir, docs/LOGS.md) is compared against. WRITERS
 * processes each append RECORDS records of the size a logged message of
 * --msg-size bytes takes (record header, message fields, payload) to a
 * fresh file of their own in DIR, BATCH records per write, one fdatasync
 * per write: what the log's writer threads do, without the library.
 */
#ifndef SPINDLE_RAWAPPEND_H
#define SPINDLE_RAWAPPEND_H

#include <stdbool.h>
#include <stdint.h>

struct raw_append_config {
    const char *dir;
    uint32_t writers;
    uint32_t msg_size;
    uint32_t batch;   /* records per write and fdatasync */
    uint64_t records; /* per writer */
    /* --direct: the whole 4 KiB blocks of each batch written with
     * O_DIRECT, the partial last block through the page cache and written
     * again with the next batch: the way the log's writer appends
     * (docs/LOGS.md "Appending"). Off: one buffered pwrite per batch. */
    bool direct;
};

/* Runs the writers, prints a summary line and one JSON line (writers,
 * msg_size, record_bytes, batch, records_per_writer, seconds,
 * append_records_per_s, append_mb_per_s: means over the writers). Returns
 * the exit status: 0, or 1 when a writer failed (its reason on stderr). */
int raw_append(const struct raw_append_config *config);

#endif
