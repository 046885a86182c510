/*
 * spindle-stat: prints the view, members, subgroups, counters and
 * transport of the running members on this host, read from their
 * administration sockets (docs/OPERATIONS.md), as text or as JSON.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/version.h>

#include "admin_client.h"
#include "group/admin.h"

static const char usage[] =
    "usage: spindle-stat [--json] [--dir DIR] [GROUP[/ID]]\n"
    "       spindle-stat --help | --version\n"
    "  -j, --json      one JSON object per member, one a line (else readable text)\n"
    "  -d, --dir DIR   the members' socket directory (default: $XDG_RUNTIME_DIR/spindle,\n"
    "                  else /tmp/spindle-<uid>)\n"
    "  GROUP           only the members of group GROUP; GROUP/ID: member ID alone\n"
    "Exit status: 0 every member answered, 1 none found or one did not answer, 2 usage;\n"
    "sockets no process serves (a member killed) are noted on stderr.\n";

int main(int argc, char **argv)
{
    static const struct option options[] = {{"json", no_argument, NULL, 'j'},
                                            {"dir", required_argument, NULL, 'd'},
                                            {"help", no_argument, NULL, 'h'},
                                            {"version", no_argument, NULL, 'V'},
                                            {NULL, 0, NULL, 0}};
    bool json = false;
    const char *dir_option = NULL;
    int option;
    while ((option = getopt_long(argc, argv, "jd:hV", options, NULL)) != -1) {
        switch (option) {
        case 'j':
            json = true;
            break;
        case 'd':
            dir_option = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'V':
            printf("spindle-stat %s\n", SPINDLE_VERSION_STRING);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (argc - optind > 1) {
        fputs(usage, stderr);
        return 2;
    }
    char dir[256], group[128];
    uint32_t id = 0;
    bool has_id = false;
    if (admin_client_dir(dir_option, dir, sizeof dir) < 0)
        return 2;
    if (optind < argc &&
        admin_client_target(argv[optind], true, group, sizeof group, &id, &has_id) < 0)
        return 2;
    struct admin_member *members = NULL;
    int count = has_id ? admin_client_member(dir, group, id, &members)
                       : admin_client_list(dir, optind < argc ? group : NULL, false, 0, &members);
    if (count < 0)
        return 1;
    if (count == 0) {
        if (optind < argc)
            fprintf(stderr, "spindle-stat: no such member: no socket of %s in %s\n", argv[optind],
                    dir);
        else
            fprintf(stderr, "spindle-stat: no running members in %s\n", dir);
        free(members);
        return 1;
    }
    struct admin_request stats = {json ? ADMIN_STATS : ADMIN_STATS_TEXT, 0};
    char request[64];
    if (admin_request_format(&stats, request, sizeof request) < 0) {
        free(members);
        return 2;
    }
    int status = 0, answered = 0;
    for (int i = 0; i < count; i++) {
        char *answer = NULL, error[512];
        int asked = admin_client_ask(members[i].path, request, &answer, error, sizeof error);
        if (asked < 0) {
            fprintf(stderr, "spindle-stat: %s/%u: %s\n", members[i].group, members[i].id, error);
            /* Listing a directory, a socket left by a dead member is
             * noted, not a failure (SIGKILL leaves them behind). */
            if (asked != ADMIN_CLIENT_STALE || has_id)
                status = 1;
            continue;
        }
        if (answer[0] == '{' && !admin_client_ok(answer)) {
            char message[512] = "";
            admin_client_field(answer, "message", message, sizeof message);
            fprintf(stderr, "spindle-stat: %s/%u: refused: ", members[i].group, members[i].id);
            admin_client_print(stderr, message);
            fputc('\n', stderr);
            status = 1;
        } else {
            if (!json && answered > 0)
                putchar('\n');
            admin_client_print(stdout, answer);
            answered++;
        }
        free(answer);
    }
    free(members);
    return answered == 0 ? 1 : status;
}
