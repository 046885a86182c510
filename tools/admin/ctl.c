/*
 * spindle-ctl: asks a running member, through its administration socket
 * (docs/OPERATIONS.md), to leave its group, or to have another member
 * removed from it.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/version.h>

#include "admin_client.h"
#include "group/admin.h"

static const char usage[] =
    "usage: spindle-ctl [--dir DIR] leave GROUP/ID\n"
    "       spindle-ctl [--dir DIR] remove GROUP/ID MEMBER\n"
    "       spindle-ctl --help | --version\n"
    "  leave GROUP/ID          member ID of GROUP flushes its messages and leaves the group\n"
    "  remove GROUP/ID MEMBER  member ID has member MEMBER removed: the group installs a\n"
    "                          view without it (MEMBER learns SPINDLE_EREMOVED)\n"
    "  -d, --dir DIR           the members' socket directory (default: $XDG_RUNTIME_DIR/\n"
    "                          spindle, else /tmp/spindle-<uid>)\n"
    "Exit status: 0 done, 1 refused or not reached, 2 usage.\n";

int main(int argc, char **argv)
{
    static const struct option options[] = {{"dir", required_argument, NULL, 'd'},
                                            {"help", no_argument, NULL, 'h'},
                                            {"version", no_argument, NULL, 'V'},
                                            {NULL, 0, NULL, 0}};
    const char *dir_option = NULL;
    int option;
    while ((option = getopt_long(argc, argv, "+d:hV", options, NULL)) != -1) {
        switch (option) {
        case 'd':
            dir_option = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'V':
            printf("spindle-ctl %s\n", SPINDLE_VERSION_STRING);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    int left = argc - optind;
    const char *command = left > 0 ? argv[optind] : "";
    char request[64];
    if (strcmp(command, "leave") == 0 && left == 2) {
        snprintf(request, sizeof request, "leave");
    } else if (strcmp(command, "remove") == 0 && left == 3) {
        /* The member parses MEMBER itself; only its length is bounded here. */
        if (strlen(argv[optind + 2]) > 20) {
            fprintf(stderr, "spindle-ctl: '%.20s...' is not a member id\n", argv[optind + 2]);
            return 2;
        }
        snprintf(request, sizeof request, "remove %s", argv[optind + 2]);
    } else {
        fputs(usage, stderr);
        return 2;
    }
    char dir[256], group[128], name[160], path[512];
    uint32_t id = 0;
    bool has_id = false;
    if (admin_client_dir(dir_option, dir, sizeof dir) < 0 ||
        admin_client_target(argv[optind + 1], false, group, sizeof group, &id, &has_id) < 0)
        return 2;
    if (admin_socket_name(group, id, name, sizeof name) < 0) {
        fprintf(stderr, "spindle-ctl: %s\n", spindle_errmsg());
        return 2;
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *answer = NULL, error[512];
    if (admin_client_ask(path, request, &answer, error, sizeof error) < 0) {
        fprintf(stderr, "spindle-ctl: %s: %s\n", argv[optind + 1], error);
        return 1;
    }
    int status = 0;
    char text[512] = "";
    FILE *out = stdout;
    if (admin_client_ok(answer)) {
        admin_client_field(answer, "result", text, sizeof text);
        printf("%s: %s: ", argv[optind + 1], request);
    } else {
        admin_client_field(answer, "message", text, sizeof text);
        fprintf(stderr, "spindle-ctl: %s: %s: refused: ", argv[optind + 1], request);
        out = stderr;
        status = 1;
    }
    admin_client_print(out, text);
    fputc('\n', out);
    free(answer);
    return status;
}
