/*
 * Writes the seed corpora of the fuzz targets (tests/fuzz), one folder per
 * target under the directory given, at build time: valid messages built
 * with the library's own encoders (the view messages from
 * tests/view/view_wire_samples.h, shared with the unit tests), so no binary
 * corpus lives in the repository. Every wire seed must be accepted by its
 * decoder, or this program fails and with it the build: a seed the decoder
 * refuses would start the fuzzer in the wrong place.
 *
 * Usage: fuzz_seeds OUT_DIR EXAMPLE_INI DDS_EXAMPLE_INI
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../examples/dds/dds_client_wire.h"
#include "../../examples/dds/dds_impl.h"
#include "control/ctl_wire.h"
#include "fuzz_common.h"
#include "fuzz_ctl_keys.h"
#include "fuzz_dds_seal_keys.h"
#include "group/admin.h"
#include "kv_resp.h"
#include "kv_store.h"
#include "kv_transfer.h"
#include "log/log_catchup.h"
#include "log/log_format.h"
#include "log/log_snapshot.h"
#include "smc/smc_p2p_wire.h"
#include "smc/smc_slot_wire.h"
#include "transport/shm/shm_impl.h"
#include "util/crc32c.h"
#include "view/view_wire_samples.h"
#ifdef SPINDLE_HAVE_FABRIC
#include "fuzz_fab_key.h"
#include "transport/fabric/fabric_impl.h"
#endif
#ifdef SPINDLE_HAVE_VERBS
#include "transport/verbs/verbs_impl.h"
#endif

static const char *out_dir;
static uint8_t buf[VIEW_WIRE_JOIN_VIEW_SIZE + 4096];

static void make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "fuzz_seeds: cannot create %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static void write_seed(const char *target, const char *name, const void *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, target);
    make_dir(path);
    snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
    FILE *file = fopen(path, "wb");
    if (file == NULL || fwrite(data, 1, len, file) != len || fclose(file) != 0) {
        fprintf(stderr, "fuzz_seeds: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* Fails the build when a decoder refuses its own encoder's output. */
static void require(int rc, const char *target, const char *name)
{
    if (rc != 0) {
        fprintf(stderr, "fuzz_seeds: %s seed %s is refused: %s\n", target, name, spindle_errmsg());
        exit(1);
    }
}

/* fuzz_ctl_record: the true proof, then a hello and a frame header sealed
 * as a dialer's records 0 and 1 under the fixed test key. */
static void keyed_seeds(const uint8_t hello[CTL_HELLO_SIZE], const uint8_t frame[CTL_FRAME_SIZE])
{
    require(ctl_crypto_init(), "record", "init");
    uint8_t key[CTL_KEY_BYTES], nonce_d[CTL_NONCE_BYTES], nonce_a[CTL_NONCE_BYTES];
    uint8_t stream[CTL_PROOF_BYTES + 2 * CTL_SEAL_HEADER + CTL_HELLO_SIZE + CTL_FRAME_SIZE +
                   2 * CTL_SEAL_TAG];
    fuzz_ctl_test_key(key);
    fuzz_ctl_nonces(nonce_d, nonce_a);
    ctl_auth_proof(key, CTL_ROLE_DIALER, nonce_d, nonce_a, stream);
    write_seed("fuzz_ctl_record", "proof", stream, CTL_PROOF_BYTES);
    struct ctl_sess sealer, opener;
    fuzz_ctl_sessions(&sealer, &opener);
    uint8_t *record = stream + CTL_PROOF_BYTES;
    ctl_sess_seal(&sealer, hello, CTL_HELLO_SIZE, record);
    ctl_sess_seal(&sealer, frame, CTL_FRAME_SIZE,
                  record + CTL_SEAL_HEADER + CTL_HELLO_SIZE + CTL_SEAL_TAG);
    uint8_t plain[CTL_HELLO_SIZE];
    require(ctl_sess_open(&opener, record, record + CTL_SEAL_HEADER, CTL_HELLO_SIZE + CTL_SEAL_TAG,
                          plain),
            "record", "hello");
    write_seed("fuzz_ctl_record", "hello-frame", stream, sizeof stream);
    ctl_sess_clear(&sealer);
    ctl_sess_clear(&opener);
}

static void control_seeds(void)
{
    uint8_t hello_bytes[CTL_HELLO_SIZE], frame_bytes[CTL_FRAME_SIZE];
    struct ctl_hello hello = {2, 3, ctl_group_hash("orders"), {1, 1}, 0}, hello_out;
    ctl_wire_encode_hello(&hello, hello_bytes);
    require(ctl_wire_decode_hello(hello_bytes, sizeof hello_bytes, &hello_out), "hello", "member");
    write_seed("fuzz_ctl_hello", "member", hello_bytes, sizeof hello_bytes);
    hello = (struct ctl_hello){CTL_JOIN_FROM, 0, 0, {1, 1}, 0};
    ctl_wire_encode_hello(&hello, hello_bytes);
    write_seed("fuzz_ctl_hello", "joiner", hello_bytes, sizeof hello_bytes);

    struct ctl_frame frame = {0x20000011u, 4, 1234, 0xdeadbeefu}, frame_out;
    ctl_wire_encode_frame(&frame, frame_bytes);
    require(ctl_wire_decode_frame(frame_bytes, sizeof frame_bytes, &frame_out), "frame", "blob");
    write_seed("fuzz_ctl_frame", "blob", frame_bytes, sizeof frame_bytes);
    frame = (struct ctl_frame){1, 0, CTL_BLOB_MAX, 0};
    ctl_wire_encode_frame(&frame, frame_bytes);
    write_seed("fuzz_ctl_frame", "largest", frame_bytes, sizeof frame_bytes);
    keyed_seeds(hello_bytes, frame_bytes);
}

static void view_seeds(void)
{
    static struct view_start_desc desc;
    size_t len = sample_desc(buf, sizeof buf);
    require(view_wire_decode_desc(buf, len, &desc), "desc", "sample");
    write_seed("fuzz_view_desc", "sample", buf, len);

    uint64_t view_id;
    len = sample_ready(buf, sizeof buf);
    require(view_wire_decode_ready(buf, len, &view_id), "ready", "sample");
    write_seed("fuzz_view_ready", "sample", buf, len);

    static uint64_t counts[SAMPLE_BLOB_SUBGROUPS * SST_MAX_ROWS];
    struct view_blob blob = {.counts = counts};
    len = sample_blob(buf, sizeof buf);
    require(view_wire_decode_blob(buf, len, SAMPLE_BLOB_SUBGROUPS, &blob), "blob", "sample");
    write_seed("fuzz_view_blob", "two-subgroups", buf, len);
    blob.num_subgroups = 1; /* the same blob of a one-subgroup group, admitting member 3 */
    blob.joiner = 3;
    len = view_wire_encode_blob(&blob, buf, sizeof buf);
    require(view_wire_decode_blob(buf, len, 1, &blob), "blob", "joiner");
    write_seed("fuzz_view_blob", "one-subgroup-joiner", buf, len);

    struct view_commit commit;
    len = sample_commit(buf, sizeof buf);
    require(view_wire_decode_commit(buf, len, &commit), "commit", "sample");
    write_seed("fuzz_view_commit", "sample", buf, len);

    struct view_suspect suspect;
    len = sample_suspect(buf, sizeof buf);
    require(view_wire_decode_suspect(buf, len, &suspect), "suspect", "sample");
    write_seed("fuzz_view_suspect", "sample", buf, len);

    static struct view_join_request request;
    len = sample_join_request(buf, sizeof buf);
    require(view_wire_decode_join_request(buf, len, &request), "join request", "sample");
    write_seed("fuzz_view_join_request", "sample", buf, len);
    len = sample_restart_join_request(buf, sizeof buf);
    require(view_wire_decode_join_request(buf, len, &request), "join request", "restart");
    write_seed("fuzz_view_join_request", "restart", buf, len);

    static struct view_join_offer offer;
    static struct smc_layout layouts[VIEW_JOIN_MAX_SUBGROUPS];
    static const char *const kinds[] = {"admit", "redirect", "refuse"};
    for (uint32_t kind = VIEW_OFFER_ADMIT; kind <= VIEW_OFFER_REFUSE; kind++) {
        len = sample_join_offer(kind, buf, sizeof buf);
        offer.layouts = layouts;
        require(view_wire_decode_join_offer(buf, len, &offer), "join offer", kinds[kind]);
        write_seed("fuzz_view_join_offer", kinds[kind], buf, len);
    }

    struct view_join_desc join_desc;
    len = sample_join_desc(buf, sizeof buf);
    require(view_wire_decode_join_desc(buf, len, &join_desc), "join desc", "sample");
    write_seed("fuzz_view_join_desc", "sample", buf, len);

    static struct view_join_announce announce;
    len = sample_join_announce(buf, sizeof buf);
    require(view_wire_decode_join_announce(buf, len, &announce), "join announce", "sample");
    write_seed("fuzz_view_join_announce", "sample", buf, len);

    static struct view_join_view join_view;
    for (int dropped = 0; dropped < 2; dropped++) {
        len = sample_join_view(dropped, buf, sizeof buf);
        require(view_wire_decode_join_view(buf, len, &join_view), "join view", "sample");
        write_seed("fuzz_view_join_view", dropped ? "dropped" : "admitted", buf, len);
    }

    static struct view_join_skips join_skips;
    len = sample_join_skips(buf, sizeof buf);
    require(view_wire_decode_join_skips(buf, len, &join_skips), "join skips", "sample");
    write_seed("fuzz_view_join_skips", "sample", buf, len);
    static const uint8_t piece[] = "a piece of state";
    struct view_join_chunk chunk = {7, 3u << 20, sizeof piece, true, 0, piece};
    struct view_join_chunk chunk_back;
    len = view_wire_encode_join_chunk(&chunk, buf, sizeof buf);
    require(view_wire_decode_join_chunk(buf, len, &chunk_back), "state chunk", "last");
    write_seed("fuzz_view_join_state", "chunk", buf, len);
    struct view_join_state_ack ack = {7, 3u << 20, 0}, ack_back;
    len = view_wire_encode_join_state_ack(&ack, buf, sizeof buf);
    require(view_wire_decode_join_state_ack(buf, len, &ack_back), "state ack", "taken");
    write_seed("fuzz_view_join_state", "ack", buf, len);
    struct view_join_log_ends ends = {.join_view = 9, .next_view = 5, .count = 2};
    ends.ends[0] = (struct view_join_log_end){0, 4, 120};
    ends.ends[1] = (struct view_join_log_end){3, 2, 7};
    len = view_wire_encode_join_log_ends(&ends, buf, sizeof buf);
    struct view_join_log_ends ends_back;
    require(view_wire_decode_join_log_ends(buf, len, &ends_back), "log ends", "count");
    write_seed("fuzz_view_join_state", "log-ends", buf, len);
    static struct view_restart_status restart = {
        .id = 2, .vote = 1, .num_members = 3, .latest_view = 9, .messages = 120};
    snprintf(restart.identity.name, sizeof restart.identity.name, "member-2");
    restart.identity.incarnation = 5;
    restart.members[0] = 0;
    restart.members[1] = 1;
    restart.members[2] = 2;
    restart.ends = ends;
    restart.ends.join_view = 10;
    static struct view_restart_status restart_back;
    len = view_wire_encode_restart(&restart, buf, sizeof buf);
    require(view_wire_decode_restart(buf, len, &restart_back), "restart status", "voting");
    write_seed("fuzz_view_restart", "voting", buf, len);
    restart.flags = VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS;
    len = view_wire_encode_restart(&restart, buf, sizeof buf);
    require(view_wire_decode_restart(buf, len, &restart_back), "restart status", "running");
    write_seed("fuzz_view_restart", "running", buf, len);
    restart.num_sources = 1;
    restart.sources[0] = (struct view_restart_source){3, 1, 9, 17};
    len = view_wire_encode_restart(&restart, buf, sizeof buf);
    require(view_wire_decode_restart(buf, len, &restart_back), "restart status", "sources");
    write_seed("fuzz_view_restart", "sources", buf, len);
    struct view_restart_fetch fetch = {2, 3, 9, 6, 8, 40, 4096}, fetch_back;
    len = view_wire_encode_restart_fetch(&fetch, buf, sizeof buf);
    require(view_wire_decode_restart_fetch(buf, len, &fetch_back), "restart fetch", "fetch");
    write_seed("fuzz_view_restart", "fetch", buf, len);
    /* A whole stream in one slice (its checksum right), and a middle slice. */
    static const uint8_t stream[48] = "SPNDLCUP a catch-up stream's first bytes";
    struct view_restart_slice slice = {sizeof stream,
                                       0,
                                       sizeof stream,
                                       VIEW_RESTART_SLICE_LAST,
                                       sp_crc32c(0, stream, sizeof stream),
                                       stream};
    struct view_restart_slice slice_back;
    len = view_wire_encode_restart_slice(&slice, buf, sizeof buf);
    require(view_wire_decode_restart_slice(buf, len, &slice_back), "restart slice", "whole");
    write_seed("fuzz_view_restart", "slice_whole", buf, len);
    slice = (struct view_restart_slice){1u << 20, 4096, 16, 0, 0x5eed, stream};
    len = view_wire_encode_restart_slice(&slice, buf, sizeof buf);
    require(view_wire_decode_restart_slice(buf, len, &slice_back), "restart slice", "middle");
    write_seed("fuzz_view_restart", "slice_middle", buf, len);
}

static void shm_seeds(void)
{
    struct tp_desc desc;
    struct shm_wire wire = {SHM_MAGIC, SHM_VERSION, SHM_KIND_ADDRESS, 4242, 7, 16, 0x1234567890ull};
    shm_desc_encode(&wire, &desc);
    require(shm_desc_decode(&desc, SHM_KIND_ADDRESS, &wire), "shm", "address");
    write_seed("fuzz_shm_desc", "address", desc.bytes, desc.len);
    wire = (struct shm_wire){SHM_MAGIC, SHM_VERSION, SHM_KIND_REGION, 4242, 9, 1u << 20, 0};
    shm_desc_encode(&wire, &desc);
    require(shm_desc_decode(&desc, SHM_KIND_REGION, &wire), "shm", "region");
    write_seed("fuzz_shm_desc", "region", desc.bytes, desc.len);
}

#ifdef SPINDLE_HAVE_FABRIC
static void fabric_record_seed(const char *name, uint64_t slot, uint64_t applied,
                               uint64_t region_length, uint64_t start, uint32_t length,
                               uint32_t flags)
{
    uint8_t input[FUZZ_REC_PREFIX + FAB_REC_HDR];
    fuzz_put_le(input, slot, 2);
    fuzz_put_le(input + 2, applied, 8);
    fuzz_put_le(input + 10, region_length, 8);
    /* As fab_post_writes builds it. */
    uint64_t size =
        (FAB_REC_HDR + (uint64_t)length + FAB_REC_ALIGN - 1) / FAB_REC_ALIGN * FAB_REC_ALIGN;
    struct fab_rec_hdr hdr = {.magic = FAB_REC_MAGIC,
                              .length = length,
                              .start = start,
                              .end = start + size,
                              .region = 1,
                              .offset = region_length - length,
                              .flags = flags};
    memcpy(input + FUZZ_REC_PREFIX, &hdr, sizeof hdr);
    static uint8_t ring[FAB_RING_SIZE];
    memcpy(ring + slot * FAB_REC_ALIGN, &hdr, sizeof hdr);
    struct fab_rec_hdr back;
    require(fab_rec_read(ring, slot * FAB_REC_ALIGN, applied, &back), "fab record", name);
    struct fab_region region = {.id = 1, .length = region_length};
    require(fab_rec_fits(&back, &region), "fab record", name);
    memset(ring + slot * FAB_REC_ALIGN, 0, sizeof hdr);
    write_seed("fuzz_fab_record", name, input, sizeof input);
}

static void fabric_seeds(void)
{
    struct tp_desc desc;
    char host[FAB_HOST_MAX];
    uint16_t port;
    uint64_t nonce, region, length;
    uint32_t id;
    if (fab_addr_encode("127.0.0.1", 7010, 0x5eed5eedull, 2, &desc) != 0)
        require(-1, "fab addr", "loopback");
    require(fab_addr_decode(&desc, host, sizeof host, &port, &nonce, &id), "fab addr", "loopback");
    write_seed("fuzz_fab_addr", "loopback", desc.bytes, desc.len);
    if (fab_addr_encode("member-3.cluster.example", 7013, 1, 3, &desc) != 0)
        require(-1, "fab addr", "name");
    write_seed("fuzz_fab_addr", "name", desc.bytes, desc.len);

    fab_region_encode(3, 1u << 20, &desc);
    require(fab_region_decode(&desc, &region, &length), "fab region", "sample");
    write_seed("fuzz_fab_region", "sample", desc.bytes, desc.len);

    uint8_t msg[FAB_MSG_WIRE];
    static const uint32_t kinds[] = {FAB_MSG_CREDIT, FAB_MSG_DOORBELL, FAB_MSG_BYE};
    static const char *const kind_names[] = {"credit", "doorbell", "bye"};
    for (int k = 0; k < 3; k++) {
        struct fab_msg m = {FAB_MSG_MAGIC, kinds[k], kinds[k] == FAB_MSG_CREDIT ? 4096 : 0};
        fab_msg_encode(&m, msg);
        require(fab_msg_decode(msg, sizeof msg, &m), "fab msg", kind_names[k]);
        write_seed("fuzz_fab_msg", kind_names[k], msg, sizeof msg);
    }
    uint8_t req_wire[FAB_REQ_WIRE], fab_key[FAB_MAC_BYTES];
    struct fab_req_data req;
    fuzz_fab_test_key(fab_key);
    fuzz_fab_test_request(req_wire);
    require(fab_req_decode(req_wire, sizeof req_wire, &req), "fab req", "sample");
    write_seed("fuzz_fab_req", "sample", req_wire, sizeof req_wire);
    uint8_t acc_wire[FAB_ACC_WIRE];
    struct fab_acc_data acc = {FAB_ACC_MAGIC, 3, 0x7f0000000000ull, 0x42, FAB_RING_SIZE, {0}};
    fab_acc_encode(&acc, acc_wire);
    fab_acc_seal(fab_key, req_wire, acc_wire);
    require(fab_acc_decode(acc_wire, sizeof acc_wire, &acc), "fab acc", "sample");
    write_seed("fuzz_fab_acc", "sample", acc_wire, sizeof acc_wire);

    fabric_record_seed("first", 0, 0, 4096, 0, 100, 0);
    fabric_record_seed("middle", 5, 5 * FAB_REC_ALIGN, 4096, 5 * FAB_REC_ALIGN, 8, 0);
    /* The writer skipped the ring's tail: the next record starts a lap. */
    fabric_record_seed("lap", 0, FAB_RING_SIZE - 2 * FAB_REC_ALIGN, 64, FAB_RING_SIZE, 64, 0);
    /* Not the last record of its write (fab_post_run): another follows. */
    fabric_record_seed("more", 2, 2 * FAB_REC_ALIGN, 4096, 2 * FAB_REC_ALIGN, 1032, FAB_REC_MORE);
}
#endif

#ifdef SPINDLE_HAVE_VERBS
static void verbs_seeds(void)
{
    struct tp_desc desc;
    struct vb_addr addr = {.port = 7020, .id = 1, .nonce = 77, .port_num = 1, .lid = 5};
    snprintf(addr.host, sizeof addr.host, "10.0.0.2");
    for (int i = 0; i < 16; i++)
        addr.gid[i] = (uint8_t)(0xfe + i);
    if (vb_addr_encode(&addr, &desc) != 0)
        require(-1, "vb addr", "rc");
    require(vb_addr_decode(&desc, &addr), "vb addr", "rc");
    write_seed("fuzz_vb_addr", "rc", desc.bytes, desc.len);
    addr.has_dct = 1;
    addr.dctn = 0x1234;
    addr.dc_key = 0x5350494e444c45ull; /* any nonzero key */
    if (vb_addr_encode(&addr, &desc) != 0)
        require(-1, "vb addr", "dct");
    write_seed("fuzz_vb_addr", "dct", desc.bytes, desc.len);

    struct vb_region region = {0x7f0000001000ull, 1u << 20, 0xabcd};
    vb_region_encode(&region, &desc);
    require(vb_region_decode(&desc, &region), "vb region", "sample");
    write_seed("fuzz_vb_region", "sample", desc.bytes, desc.len);

    uint8_t cm[VB_CM_WIRE];
    uint32_t cm_id;
    uint64_t cm_nonce;
    vb_cm_encode(4, 0xfeedull, cm);
    require(vb_cm_decode(cm, sizeof cm, &cm_id, &cm_nonce), "vb cm", "sample");
    write_seed("fuzz_vb_cm", "sample", cm, sizeof cm);
}
#endif

/* Small files that reach every section kind, the list syntax, comments and
 * a few refusals; the example file is copied beside them. */
static void config_seeds(const char *example)
{
    static const char *const texts[][2] = {
        {"minimal", "[member.4]\n[subgroup.0]\nmembers = 4\n"},
        {"every-key", "[group]\nname = g\ntransport = shm\nprovider = sockets\ndevice = mlx5_0\n"
                      "failure_timeout_ms = 100\nlog_level = debug\n[member.0]\nhost = h0\n"
                      "port = 0\n[member.1]\nport = 65535\n[subgroup.1]\nmembers = 1 0\n"
                      "senders = 1\nwindow_size = 256\nmax_payload = 1048568\n"
                      "mode = unordered\n[bench]\nmessages = 1\nmessage_size = 1\n"
                      "duration_ms = 0\n"},
        {"refused", "[group]\ntransport = carrier-pigeon\n"},
        {"duplicate", "[member.0]\nport = 1\nport = 2\n"},
        {"undefined-member", "[member.0]\n[subgroup.0]\nmembers = 0, 1\n"},
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        write_seed("fuzz_config", texts[i][0], texts[i][1], strlen(texts[i][1]));
    FILE *file = fopen(example, "rb");
    if (file == NULL) {
        fprintf(stderr, "fuzz_seeds: cannot open %s: %s\n", example, strerror(errno));
        exit(1);
    }
    size_t len = fread(buf, 1, sizeof buf, file);
    fclose(file);
    write_seed("fuzz_config", "cluster.ini", buf, len);
}

/* The launcher formats: the first byte picks the parser (fuzz_launch.c). */
static void launch_seeds(void)
{
    static const char *const texts[][2] = {
        {"hostlist", "\0node[01-04,07],gpu[1-2]-ib,login"},
        {"hostlist-groups", "\0a[1-2]b[08-10].example.org"},
        {"tasks", "\0012(x3),1"},
        {"hostfile", "\002# the cluster\nalpha slots=2\nbeta # spare\n"},
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        write_seed("fuzz_launch", texts[i][0], texts[i][1], 1 + strlen(texts[i][1] + 1));
}

/* A message record, a view record and a segment header, as a log holds
 * them. */
/* A catch-up stream (log/log_catchup.h): its first byte the fuzz target's
 * piece size, then a header with flags, one snapshot (snap, with a state)
 * and the view record of record's view: with the reset flag, a joiner's
 * log starting over; without, a restart fetch's answer or a restarted
 * group's joiner sent a snapshot its log is kept beside. */
static void catchup_seed(const struct log_snapshot *snapshot, const struct log_record *record,
                         uint16_t flags, const char *name)
{
    static uint8_t stream[8192];
    size_t len = 0;
    stream[len++] = 7;
    log_catchup_header_encode(flags, 1, stream + len);
    len += LOG_CATCHUP_HEADER_SIZE;
    struct log_snapshot snap = *snapshot;
    static const char state[] = "state of subgroup 2";
    snap.state_length = sizeof state;
    snap.state_crc = sp_crc32c(0, state, sizeof state);
    size_t head = log_snapshot_encode(&snap, NULL, 0);
    log_catchup_snapshot_prefix_encode(head + sizeof state, stream + len);
    len += LOG_CATCHUP_SNAPSHOT_PREFIX;
    len += log_snapshot_encode(&snap, stream + len, sizeof stream - len);
    memcpy(stream + len, state, sizeof state);
    len += sizeof state;
    len += log_record_encode(record, stream + len, sizeof stream - len);
    write_seed("fuzz_log_catchup", name, stream, len);
}

static void log_seeds(void)
{
    static const uint8_t payload[] = "a logged message";
    struct log_record record;
    memset(&record, 0, sizeof record);
    record.type = LOG_REC_MESSAGE;
    record.position = 41;
    record.message = (struct log_message){.subgroup = 2,
                                          .sender_id = 5,
                                          .sender_index = 9,
                                          .seq = 30,
                                          .view_id = 3,
                                          .length = sizeof payload,
                                          .payload = payload};
    size_t len = log_record_encode(&record, buf, sizeof buf);
    struct log_record decoded;
    size_t used;
    require(log_record_decode(buf, len, &decoded, &used) == 1 ? 0 : -1, "fuzz_log_record",
            "message");
    write_seed("fuzz_log_record", "message", buf, len);
    memset(&record, 0, sizeof record);
    record.type = LOG_REC_VIEW;
    record.position = 40;
    record.view.view_id = 3;
    record.view.member_count = 3;
    record.view.members[0] = 2;
    record.view.members[1] = 0;
    record.view.members[2] = 5;
    record.view.subgroup_count = 2;
    record.view.delivered_through[0] = 17;
    record.view.delivered_through[1] = 4;
    len = log_record_encode(&record, buf, sizeof buf);
    require(log_record_decode(buf, len, &decoded, &used) == 1 ? 0 : -1, "fuzz_log_record", "view");
    write_seed("fuzz_log_record", "view", buf, len);
    log_segment_header_encode(1000, buf);
    uint64_t first;
    require(log_segment_header_decode(buf, LOG_SEGMENT_HEADER_SIZE, &first), "fuzz_log_record",
            "segment-header");
    write_seed("fuzz_log_record", "segment-header", buf, LOG_SEGMENT_HEADER_SIZE);
    /* A snapshot's header and view record, then a few bytes of state. */
    struct log_snapshot snap = {.subgroup = 2,
                                .view_id = 3,
                                .seq = 30,
                                .position = 41,
                                .state_length = 4,
                                .state_crc = 0x1234abcd};
    snap.view = record.view;
    len = log_snapshot_encode(&snap, buf, sizeof buf);
    memcpy(buf + len, "abcd", 4);
    struct log_snapshot decoded_snap;
    require(log_snapshot_decode(buf, len + 4, &decoded_snap, &used) == 1 ? 0 : -1,
            "fuzz_log_snapshot", "snapshot");
    write_seed("fuzz_log_snapshot", "snapshot", buf, len + 4);
    catchup_seed(&snap, &record, LOG_CATCHUP_RESET, "reset-snapshot-view");
    catchup_seed(&snap, &record, 0, "snapshot-view");
}

/* Every command of the administration endpoint, as a client sends it. */
static void admin_seeds(void)
{
    static const char *const lines[][2] = {
        {"stats", "stats"}, {"stats-json", "stats json"}, {"stats-text", "stats text"},
        {"leave", "leave"}, {"remove", "remove 12"},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        struct admin_request request;
        require(admin_request_parse(lines[i][1], strlen(lines[i][1]), &request),
                "fuzz_admin_request", lines[i][0]);
        write_seed("fuzz_admin_request", lines[i][0], lines[i][1], strlen(lines[i][1]));
    }
}

/* Point-to-point slots: the expected message number, then a slot of each
 * kind as a sender writes it. */
static void p2p_seeds(void)
{
    static const struct smc_p2p_slot kinds[] = {
        {SMC_P2P_MESSAGE, 8, 0}, {SMC_P2P_QUERY, 16, 7}, {SMC_P2P_REPLY, 0, 7}};
    static const char *const names[] = {"message", "query", "reply"};
    for (size_t i = 0; i < 3; i++) {
        uint64_t input[1 + (SMC_P2P_HEADER_SIZE + 16) / 8] = {41};
        smc_p2p_slot_encode((uint8_t *)&input[1], 41, &kinds[i]);
        struct smc_p2p_slot back;
        require(smc_p2p_slot_decode((const uint8_t *)&input[1], sizeof input - 8, 41, 4096, &back),
                "fuzz_p2p_slot", names[i]);
        write_seed("fuzz_p2p_slot", names[i], input, sizeof input);
    }
}

/* Multicast ring slots: a header as smc_send.c writes it (the message
 * expected, a later one, an older one, one across the 2^39 wrap) and a
 * slot never written, each with the position expected, a max_payload of
 * 1000 and its slot size. */
static void ring_seeds(void)
{
    const uint64_t lap = 1ull << SMC_POSITION_BITS;
    static const char *const names[] = {"message", "later", "older", "wrap", "unwritten"};
    const uint64_t words[][2] = {{smc_header(41, 1000), 41},
                                 {smc_header(45, 8), 41},
                                 {smc_header(40, 8), 41},
                                 {smc_header(lap + 2, 0), lap - 1},
                                 {0, 41}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        uint8_t input[24];
        uint32_t max_payload = 1000, slot_size = SMC_HEADER_SIZE + 1000;
        memcpy(input, &words[i][0], 8);
        memcpy(input + 8, &words[i][1], 8);
        memcpy(input + 16, &max_payload, 4);
        memcpy(input + 20, &slot_size, 4);
        struct smc_slot_header back;
        require(smc_slot_header_decode(words[i][0], words[i][1], max_payload, slot_size, &back),
                "fuzz_ring_slot", names[i]);
        write_seed("fuzz_ring_slot", names[i], input, sizeof input);
    }
}

/* spindle-kv: client requests (array, pipelined, inline), operations as
 * replicas multicast them (a write with expiry, in a session, a tick) and
 * a state as a joiner receives it. */
static void kv_seeds(void)
{
    static const char *const requests[][2] = {
        {"set", "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n"},
        {"pipeline", "*2\r\n$4\r\nINCR\r\n$1\r\nc\r\n*1\r\n$4\r\nPING\r\n"},
        {"inline", "GET key\r\n"},
    };
    static const struct kv_resp_limits limits = {
        .max_args = 64, .max_bulk = 512, .max_inline = 256};
    struct kv_argv argv = {0};
    char error[256];
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++) {
        const char *text = requests[i][1];
        require(kv_resp_parse(text, strlen(text), &limits, &argv, error, sizeof error) > 0 ? 0 : -1,
                "fuzz_kv_resp", requests[i][0]);
        write_seed("fuzz_kv_resp", requests[i][0], text, strlen(text));
    }
    kv_argv_free(&argv);
    static const struct kv_arg set[] = {{"SET", 3}, {"k", 1}, {"v", 1}, {"PX", 2}, {"100", 3}};
    static const struct kv_arg incr[] = {{"INCR", 4}, {"n", 1}};
    static const struct kv_arg mset[] = {{"MSET", 4}, {"a", 1}, {"1", 1}, {"b", 1}, {"2", 1}};
    /* A transaction watching k at version 1 and n absent: SET then INCR. */
    static const struct kv_arg exec[] = {{"2", 1}, {"k", 1}, {"1", 1},    {"n", 1},
                                         {"0", 1}, {"3", 1}, {"SET", 3},  {"k", 1},
                                         {"w", 1}, {"2", 1}, {"INCR", 4}, {"n", 1}};
    struct kv_buf op = {0};
    struct kv_op decoded = {0};
    struct kv_store store;
    kv_store_init(&store);
    const struct {
        const char *name;
        uint8_t kind;
        uint64_t session;
        const struct kv_arg *args;
        size_t count;
    } ops[] = {
        {"set-px", KV_OP_COMMAND, 0, set, 5},    {"session-incr", KV_OP_COMMAND, 7, incr, 2},
        {"mset", KV_OP_COMMAND, 0, mset, 5},     {"tick", KV_OP_TICK, 0, NULL, 0},
        {"exec-watch", KV_OP_EXEC, 9, exec, 12},
    };
    struct kv_buf reply = {0};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        op.len = 0;
        kv_op_encode(&op, ops[i].kind, i + 1, 1000 + i, ops[i].session, ops[i].session ? 1 : 0,
                     ops[i].args, ops[i].count);
        require(kv_op_decode(op.data, op.len, &decoded, error, sizeof error), "fuzz_kv_op",
                ops[i].name);
        write_seed("fuzz_kv_op", ops[i].name, op.data, op.len);
        if (ops[i].kind == KV_OP_COMMAND || ops[i].kind == KV_OP_EXEC)
            kv_store_apply(&store, op.data, op.len, &decoded, &reply);
    }
    op.len = 0;
    kv_snapshot_encode(&store, &op);
    struct kv_store back;
    kv_store_init(&back);
    require(kv_snapshot_decode(&back, op.data, op.len, error, sizeof error), "fuzz_kv_snapshot",
            "state");
    write_seed("fuzz_kv_snapshot", "state", op.data, op.len);
    kv_store_free(&back);
    kv_store_free(&store);
    kv_argv_free(&decoded.argv);
    kv_buf_free(&op);
    kv_buf_free(&reply);
}

/* spindle-kv's state transfer: a query, a reply's chunk (after the offset
 * asked for), a state's header and a member name, each after the byte
 * that picks its decoder in fuzz_kv_transfer. */
static void kv_transfer_seeds(void)
{
    struct kv_buf seed = {0};
    char error[256];
    const uint8_t pick[4] = {0, 1, 2, 3};
    kv_buf_append(&seed, &pick[0], 1);
    kv_query_encode(&seed, &(struct kv_query){0x0006000000000001ull, 4072});
    struct kv_query query;
    require(kv_query_decode(seed.data + 1, seed.len - 1, &query, error, sizeof error),
            "fuzz_kv_transfer", "query");
    write_seed("fuzz_kv_transfer", "query", seed.data, seed.len);
    seed.len = 0;
    uint64_t offset = 4;
    kv_buf_append(&seed, &pick[1], 1);
    kv_buf_append(&seed, &offset, sizeof offset);
    kv_reply_encode(&seed, &(struct kv_reply){KV_REPLY_CHUNK, 10, 4, "456789", 6});
    struct kv_reply reply;
    require(kv_reply_decode(seed.data + 9, seed.len - 9, offset, &reply, error, sizeof error),
            "fuzz_kv_transfer", "reply");
    write_seed("fuzz_kv_transfer", "reply", seed.data, seed.len);
    seed.len = 0;
    kv_buf_append(&seed, &pick[2], 1);
    kv_state_header_encode(&seed, 1);
    write_seed("fuzz_kv_transfer", "state-header", seed.data, seed.len);
    seed.len = 0;
    kv_buf_append(&seed, &pick[3], 1);
    static const char name[] = "shard1@127.0.0.1:6403";
    kv_buf_append(&seed, name, sizeof name - 1);
    write_seed("fuzz_kv_transfer", "member-name", seed.data, seed.len);
    kv_buf_free(&seed);
}

/* spindle_dds's history queries: a query, a reply with a chunk of a
 * state, and one of each other status; each checked by its decoder. */
static void dds_history_query_seeds(const uint8_t *state, size_t state_len)
{
    uint8_t message[SPINDLE_P2P_MAX_PAYLOAD];
    struct dds_history_query query = {.topic = 3, .view_id = 5, .offset = 0};
    struct dds_history_query query_back;
    dds_history_query_encode(message, &query);
    require(dds_history_query_decode(message, DDS_HQUERY_SIZE, 4, &query_back),
            "fuzz_dds_history_query", "query");
    write_seed("fuzz_dds_history_query", "query", message, DDS_HQUERY_SIZE);
    static const uint32_t statuses[] = {DDS_HREPLY_OK, DDS_HREPLY_OTHER_VIEW,
                                        DDS_HREPLY_INCOMPLETE};
    static const char *const names[] = {"reply-ok", "reply-other-view", "reply-incomplete"};
    for (size_t i = 0; i < 3; i++) {
        struct dds_history_reply reply = {.status = statuses[i], .topic = 3, .view_id = 5};
        if (statuses[i] == DDS_HREPLY_OK) {
            reply.total = state_len;
            reply.chunk = state;
            reply.chunk_length = (uint32_t)state_len;
        }
        struct dds_history_reply reply_back;
        size_t length = dds_history_reply_encode(message, &reply);
        require(dds_history_reply_decode(message, length, 4, &reply_back), "fuzz_dds_history_query",
                names[i]);
        write_seed("fuzz_dds_history_query", names[i], message, length);
    }
}

/* spindle_dds: a sample header, a history state of two topics, topic
 * configurations (the sensor example's among them). */
static void dds_seeds(const char *example)
{
    uint8_t sample[SPINDLE_DDS_SAMPLE_HEADER + 5] = {0};
    struct spindle_dds_sample_info info = {
        .topic = 2, .writer = 1, .seq = 7, .source_timestamp_ns = 123456789, .length = 5};
    dds_sample_header_encode(sample, &info);
    write_seed("fuzz_dds_sample", "sample", sample, sizeof sample);
    struct dds_fifo a, b;
    if (dds_fifo_init(&a, 4) != 0 || dds_fifo_init(&b, 4) != 0)
        exit(1);
    for (uint64_t seq = 1; seq <= 3; seq++) {
        info.topic = 0;
        info.seq = seq;
        dds_sample_header_encode(sample, &info);
        if (dds_fifo_push(&a, sample, sizeof sample, false) != 0)
            exit(1);
    }
    info.topic = 3;
    dds_sample_header_encode(sample, &info);
    if (dds_fifo_push(&b, sample, sizeof sample, false) != 0)
        exit(1);
    struct dds_fifo *fifos[4] = {&a, NULL, NULL, &b};
    uint8_t *state;
    size_t state_len;
    if (dds_history_encode(fifos, 4, &state, &state_len) != 0)
        exit(1);
    write_seed("fuzz_dds_history", "two-topics", state, state_len);
    dds_history_query_seeds(state, state_len);
    free(state);
    dds_fifo_free(&a);
    dds_fifo_free(&b);
    static const char *const texts[][2] = {
        {"minimal", "[participant.0]\nport = 1\n[topic.0]\npublishers = 0\n"},
        {"every-key", "[dds]\ngroup = g\nfounders = 0\nlog_dir = /tmp/l\nkey_file = /k\n"
                      "failure_timeout_ms = 10\n[participant.0]\nname = a\nhost = h\nport = 9\n"
                      "[participant.1]\nport = 10\n[topic.0]\nname = t\nqos = logged\n"
                      "publishers = 0\nsubscribers = 0, 1\nmax_sample_size = 10240\n"
                      "history_depth = 4\nwindow = 16\n"},
        {"refused", "[topic.0]\nqos = durable\n"},
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        write_seed("fuzz_dds_config", texts[i][0], texts[i][1], strlen(texts[i][1]));
    FILE *file = fopen(example, "rb");
    if (file == NULL) {
        fprintf(stderr, "fuzz_seeds: cannot open %s: %s\n", example, strerror(errno));
        exit(1);
    }
    size_t len = fread(buf, 1, sizeof buf, file);
    fclose(file);
    write_seed("fuzz_dds_config", "sensors.ini", buf, len);
}

/* spindle_dds's external client protocol: one frame of each type,
 * without its length field, each checked by the decoder. */
/* fuzz_dds_client_sealed: every frame sealed in turn (a stream the target
 * opens whole, checked here on a copy: frames open in place), the first
 * frame sent twice, the first two swapped. */
static void dds_client_sealed_seeds(const struct dds_client_frame *frames, size_t count)
{
    static uint8_t stream[4096], pair[512];
    struct dds_client_seal client, member;
    fuzz_dds_seals(&client, &member);
    size_t at = 0, first = 0, second = 0;
    for (size_t i = 0; i < count; i++) {
        size_t n = dds_client_frame_seal(&client, stream + at, sizeof stream - at, &frames[i]);
        uint8_t *body;
        size_t body_size;
        if (n > 0 && n <= sizeof pair)
            memcpy(pair, stream + at, n);
        if (n == 0 || n > sizeof pair ||
            dds_client_frame_open(&member, pair + 4, n - 4, &body, &body_size) != 0) {
            fprintf(stderr, "fuzz_seeds: sealed client frame %zu: %s\n", i, spindle_dds_errmsg());
            exit(1);
        }
        first = i == 0 ? n : first;
        second = i == 1 ? n : second;
        at += n;
    }
    write_seed("fuzz_dds_client_sealed", "stream", stream, at);
    memcpy(pair, stream, first);
    memcpy(pair + first, stream, first);
    write_seed("fuzz_dds_client_sealed", "replayed", pair, 2 * first);
    memcpy(pair, stream + first, second);
    memcpy(pair + second, stream, first);
    write_seed("fuzz_dds_client_sealed", "swapped", pair, first + second);
}

static void dds_client_seeds(void)
{
    static const uint8_t nonce[DDS_CLIENT_NONCE] = {1, 2, 3};
    static const uint8_t proof[DDS_CLIENT_PROOF] = {4, 5, 6};
    static const uint8_t bytes[] = "reading";
    static const char text[] = "SUBSCRIBE: topic \"x\" is not in the configuration";
    struct dds_client_frame frames[] = {
        {.type = DDS_CLIENT_WELCOME, .flags = 1, .nonce = nonce},
        {.type = DDS_CLIENT_HELLO, .nonce = nonce, .proof = proof},
        {.type = DDS_CLIENT_READY, .id = 2, .proof = proof},
        {.type = DDS_CLIENT_SUBSCRIBE, .flags = DDS_CLIENT_FLAG_HISTORY, .name = "temperature"},
        {.type = DDS_CLIENT_SUBSCRIBED, .topic = 3, .qos = 2, .name = "temperature"},
        {.type = DDS_CLIENT_PUBLISH, .name = "alarms", .data = bytes, .length = sizeof bytes},
        {.type = DDS_CLIENT_PUBLISHED, .topic = 1, .id = 4, .seq = 9},
        {.type = DDS_CLIENT_SAMPLE,
         .topic = 3,
         .flags = DDS_CLIENT_FLAG_HISTORY,
         .id = 1,
         .seq = 12,
         .time_ns = 1234567890,
         .data = bytes,
         .length = sizeof bytes},
        {.type = DDS_CLIENT_ERROR,
         .code = SPINDLE_ENOENT,
         .data = (const uint8_t *)text,
         .length = sizeof text - 1},
    };
    static const char *const names[] = {"welcome", "hello",     "ready",  "subscribe", "subscribed",
                                        "publish", "published", "sample", "error"};
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++) {
        size_t n = dds_client_frame_encode(buf, sizeof buf, &frames[i]);
        struct dds_client_frame decoded;
        if (n == 0 || dds_client_frame_decode(buf + 4, n - 4, &decoded) != 0) {
            fprintf(stderr, "fuzz_seeds: client frame %s: %s\n", names[i], spindle_dds_errmsg());
            exit(1);
        }
        write_seed("fuzz_dds_client_frame", names[i], buf + 4, n - 4);
    }
    dds_client_sealed_seeds(frames, sizeof frames / sizeof frames[0]);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: fuzz_seeds OUT_DIR EXAMPLE_INI DDS_EXAMPLE_INI\n");
        return 2;
    }
    out_dir = argv[1];
    make_dir(out_dir);
    control_seeds();
    view_seeds();
    shm_seeds();
#ifdef SPINDLE_HAVE_FABRIC
    fabric_seeds();
#endif
#ifdef SPINDLE_HAVE_VERBS
    verbs_seeds();
#endif
    config_seeds(argv[2]);
    launch_seeds();
    log_seeds();
    admin_seeds();
    p2p_seeds();
    ring_seeds();
    kv_seeds();
    kv_transfer_seeds();
    dds_seeds(argv[3]);
    dds_client_seeds();
    return 0;
}
