/*
 * A participant's listener for external clients (docs/DDS.md "External
 * clients"): one thread polls the listening socket and every client
 * connection; it runs the handshake (the group key's proof when the group
 * has one), relays each client's publishes through the participant's
 * writer of the topic and subscribes clients to the participant's
 * received samples.
 *
 * Threads: the listener thread owns the connections' sockets and input;
 * dds_client_server_relay runs on the delivery thread with the topic's
 * lock held and only appends to the subscribed connections' output (under
 * the server's lock, then the connection's), never blocking: a client
 * whose output holds DDS_CLIENT_OUT_LIMIT bytes loses samples, counted.
 * Lock order: topic, server, connection. Connections are freed only by the
 * listener thread, under the server's lock.
 */
#ifndef SPINDLE_DDS_CLIENT_SERVER_H
#define SPINDLE_DDS_CLIENT_SERVER_H

#include "dds_impl.h"

#define DDS_CLIENT_MAX_CONNECTIONS 64u
/* Bytes of samples a connection may have waiting to be sent. */
#define DDS_CLIENT_OUT_LIMIT (8u << 20)

struct dds_client_server;

/* Binds the participant's client_bind:client_port and starts the thread.
 * 0, or SPINDLE_EADDRINUSE / SPINDLE_EIO / SPINDLE_ENOMEM naming the
 * address, or the key file's error. */
int dds_client_server_start(spindle_dds_participant_t *participant, struct dds_client_server **out);
/* Stops the thread and closes every connection. The caller has made sure
 * no relay runs any more. Safe on NULL. */
void dds_client_server_stop(struct dds_client_server *server);
/* Appends the sample (a whole ring payload, its header decoded) to every
 * connection subscribed to its topic. Topic lock held. */
void dds_client_server_relay(struct dds_client_server *server,
                             const struct spindle_dds_sample_info *info, const uint8_t *payload);

/* The listener's counters (spindle_dds_participant_client_stats). */
void dds_client_server_stats(struct dds_client_server *server,
                             struct spindle_dds_client_stats *stats);

#endif
