/*
 * spindle-info: what libspindle can be told and how. -e lists every
 * environment variable the library reads (src/config/config_env.c) with
 * its values, default, the INI key it overrides and, when set in this
 * environment, its current value; -k lists the configuration file's keys
 * by section (docs/CONFIG.md), from the same table.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <spindle/version.h>

#include "config/config_env.h"
#include "config/config_keys.h"

extern char **environ;

static const char usage[] =
    "usage: spindle-info [-e] [-k]\n"
    "       spindle-info --help | --version\n"
    "  -e, --env       every environment variable libspindle reads: values, default,\n"
    "                  the configuration key it overrides, current value when set\n"
    "  -k, --keys      every configuration file key by section, with its default\n"
    "  -h, --help      this text\n"
    "  -V, --version   the library's version\n"
    "With no option, -e then -k.\n";

/* Every variable of the environment that row declares ("<N>" rows match
 * several), as "current: NAME=value" lines. */
static void print_current(const struct cfg_env_var *row)
{
    size_t len = strcspn(row->name, "<");
    for (char **env = environ; *env != NULL; env++) {
        const char *equals = strchr(*env, '=');
        if (equals == NULL || strncmp(*env, row->name, len) != 0)
            continue;
        char name[256];
        size_t name_len = (size_t)(equals - *env);
        if (name_len >= sizeof name)
            continue;
        memcpy(name, *env, name_len);
        name[name_len] = '\0';
        if (cfg_env_find(name) == row)
            printf("    current:   %s\n", *env);
    }
}

static void list_env(void)
{
    size_t count = 0;
    const struct cfg_env_var *table = cfg_env_table(&count);
    printf("# Environment variables (%zu)\n", count);
    for (size_t i = 0; i < count; i++) {
        const struct cfg_env_var *row = &table[i];
        printf("%s\n", row->name);
        printf("    values:    %s\n", row->type);
        printf("    default:   %s\n", row->deflt);
        if (row->ini_key != NULL)
            printf("    overrides: %s\n", row->ini_key);
        print_current(row);
        printf("    %s\n", row->what);
    }
}

/* One section's keys; env_section is its part of the override's name
 * ("MEMBER_0" finds the SPINDLE_MEMBER_<N>_... rows). */
static void list_section(const char *section, const char *env_section, enum cfg_kind kind)
{
    printf("[%s]\n", section);
    for (const char *const *key = cfg_keys(kind); *key != NULL; key++) {
        char name[128];
        snprintf(name, sizeof name, "SPINDLE_%s_%s", env_section, *key);
        for (char *c = name; *c != '\0'; c++)
            *c = (char)toupper((unsigned char)*c);
        const struct cfg_env_var *row = cfg_env_find(name);
        /* The table has a row for every key (tests/config/test_config_env.c);
         * a key without one is still listed. */
        printf("  %-18s values: %s; default: %s\n", *key, row != NULL ? row->type : "?",
               row != NULL ? row->deflt : "?");
        if (row != NULL)
            printf("  %-18s %s (environment: %s)\n", "", row->what, row->name);
    }
}

static void list_keys(void)
{
    printf("# Configuration file keys (spindle_config_load, docs/CONFIG.md)\n");
    list_section("group", "GROUP", CFG_GROUP);
    list_section("member.N", "MEMBER_0", CFG_MEMBER);
    list_section("subgroup.N", "SUBGROUP_0", CFG_SUBGROUP);
    list_section("bench", "BENCH", CFG_BENCH);
}

int main(int argc, char **argv)
{
    int env = 0, keys = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        if (strcmp(arg, "-V") == 0 || strcmp(arg, "--version") == 0) {
            printf("spindle-info %s (libspindle %s)\n", SPINDLE_VERSION_STRING, spindle_version());
            return 0;
        }
        if (strcmp(arg, "-e") == 0 || strcmp(arg, "--env") == 0) {
            env = 1;
        } else if (strcmp(arg, "-k") == 0 || strcmp(arg, "--keys") == 0) {
            keys = 1;
        } else if (strcmp(arg, "-ek") == 0 || strcmp(arg, "-ke") == 0) {
            env = keys = 1;
        } else {
            fprintf(stderr, "spindle-info: unknown option '%s'\n%s", arg, usage);
            return 2;
        }
    }
    if (!env && !keys)
        env = keys = 1;
    if (env)
        list_env();
    if (env && keys)
        printf("\n");
    if (keys)
        list_keys();
    return 0;
}
