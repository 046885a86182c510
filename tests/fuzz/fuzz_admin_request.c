/*
 * libFuzzer target: admin_request_parse (src/group/admin_request.c), the
 * request line a client sends a member's administration endpoint. The
 * input is the line as the endpoint hands it over (its terminator cut). An
 * accepted request must name a known command and, for remove, a member id
 * below SPINDLE_MAX_MEMBERS; it must format to a canonical line that parses
 * to the same request. A refusal must be SPINDLE_EINVAL with a message
 * starting "admin request".
 */
#include "fuzz_common.h"
#include "group/admin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct admin_request request, again;
    memset(&request, 0, sizeof request);
    int rc = admin_request_parse((const char *)data, size, &request);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EINVAL);
        FUZZ_CHECK(strncmp(spindle_errmsg(), "admin request", 13) == 0);
        return 0;
    }
    FUZZ_CHECK(size < ADMIN_REQUEST_MAX);
    FUZZ_CHECK(request.command == ADMIN_STATS || request.command == ADMIN_STATS_TEXT ||
               request.command == ADMIN_LEAVE || request.command == ADMIN_REMOVE);
    FUZZ_CHECK(request.command == ADMIN_REMOVE ? request.member < SPINDLE_MAX_MEMBERS
                                               : request.member == 0);
    char line[ADMIN_REQUEST_MAX];
    int length = admin_request_format(&request, line, sizeof line);
    FUZZ_CHECK(length > 0 && (size_t)length <= size);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(admin_request_parse(line, (size_t)length, &again) == 0);
    FUZZ_CHECK(memcmp(&request, &again, sizeof request) == 0);
    return 0;
}
