/*
 * Test helper: a loopback TCP port that nobody listens on (bind to port 0,
 * read the number the kernel chose, close). Include after <cmocka.h>.
 */
#ifndef SPINDLE_TEST_PORTS_H
#define SPINDLE_TEST_PORTS_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

static inline uint16_t test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    socklen_t len = sizeof sin;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    close(fd);
    return ntohs(sin.sin_port);
}

#endif
