/*
 * The environment table (src/config/config_env.c): every INI key has the
 * SPINDLE_<SECTION>_<KEY> row the loader reads, names are unique, "<N>"
 * rows match member ids and subgroup indices only, an undeclared name
 * reads as unset, and a member's name is overridden like its other keys.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <spindle/config.h>

#include "config/config_env.h"
#include "config/config_keys.h"

/* The loader's rule (config.c): "SPINDLE_" + section ('.' -> '_') + "_" +
 * key, uppercased; section "member.<N>" gives the table's pattern. */
static void override_name(const char *section, const char *key, char *out, size_t len)
{
    snprintf(out, len, "SPINDLE_%s_%s", section, key);
    for (char *p = out; *p; p++)
        if (*p == '.')
            *p = '_';
        else if (*p != '<' && *p != '>')
            *p = (char)toupper((unsigned char)*p);
}

static void test_every_ini_key_has_its_override_row(void **state)
{
    (void)state;
    static const struct {
        enum cfg_kind kind;
        const char *section;         /* as the table's ini_key names it */
        const char *pattern_section; /* as the table's name spells it */
        const char *env_section;     /* as a user spells it */
    } kinds[] = {{CFG_GROUP, "group", "group", "group"},
                 {CFG_MEMBER, "member.N", "member.<N>", "member.7"},
                 {CFG_SUBGROUP, "subgroup.N", "subgroup.<N>", "subgroup.12"},
                 {CFG_BENCH, "bench", "bench", "bench"}};
    int keys = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (const char *const *key = cfg_keys(kinds[k].kind); *key != NULL; key++, keys++) {
            char name[128], pattern[128], ini_key[128];
            override_name(kinds[k].env_section, *key, name, sizeof name);
            override_name(kinds[k].pattern_section, *key, pattern, sizeof pattern);
            snprintf(ini_key, sizeof ini_key, "[%s] %s", kinds[k].section, *key);
            const struct cfg_env_var *row = cfg_env_find(name);
            if (row == NULL)
                fail_msg("%s (%s) is not in the table", name, ini_key);
            assert_string_equal(row->name, pattern);
            assert_non_null(row->ini_key);
            assert_string_equal(row->ini_key, ini_key);
        }
    assert_int_equal(keys, 16 + 3 + 6 + 3);
}

static void test_names_are_unique_and_rows_complete(void **state)
{
    (void)state;
    size_t count = 0;
    const struct cfg_env_var *table = cfg_env_table(&count);
    assert_true(count > 30);
    for (size_t i = 0; i < count; i++) {
        assert_non_null(table[i].type);
        assert_non_null(table[i].deflt);
        assert_true(table[i].what != NULL && table[i].what[0] != '\0');
        for (size_t j = 0; j < i; j++)
            if (strcmp(table[i].name, table[j].name) == 0)
                fail_msg("%s is declared twice", table[i].name);
    }
}

static void test_pattern_rows_take_numbers_only(void **state)
{
    (void)state;
    const struct cfg_env_var *row = cfg_env_find("SPINDLE_MEMBER_12_PORT");
    assert_non_null(row);
    assert_string_equal(row->name, "SPINDLE_MEMBER_<N>_PORT");
    assert_non_null(cfg_env_find("SPINDLE_SUBGROUP_0_WINDOW_SIZE"));
    assert_null(cfg_env_find("SPINDLE_MEMBER__PORT"));
    assert_null(cfg_env_find("SPINDLE_MEMBER_x_PORT"));
    assert_null(cfg_env_find("SPINDLE_MEMBER_3_PORTS"));
    assert_null(cfg_env_find("SPINDLE_MEMBER_<N>_PORT"));
    assert_null(cfg_env_find(NULL));
}

static void test_undeclared_variable_reads_as_unset(void **state)
{
    (void)state;
    setenv("SPINDLE_NOT_DECLARED", "1", 1);
    setenv("SPINDLE_BASE_PORT", "18000", 1);
    assert_non_null(getenv("SPINDLE_NOT_DECLARED"));
    assert_null(cfg_env_get("SPINDLE_NOT_DECLARED"));
    assert_string_equal(cfg_env_get("SPINDLE_BASE_PORT"), "18000");
    unsetenv("SPINDLE_NOT_DECLARED");
    unsetenv("SPINDLE_BASE_PORT");
    assert_null(cfg_env_get("SPINDLE_BASE_PORT"));
}

static void test_member_name_is_overridden_from_the_environment(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/spindle-config-env-%d.ini", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("[member.0]\nport = 7010\nname = from-file\n", f);
    fclose(f);
    setenv("SPINDLE_MEMBER_0_NAME", "from-env", 1);
    struct spindle_config *c = NULL;
    int rc = spindle_config_load(path, &c);
    unsetenv("SPINDLE_MEMBER_0_NAME");
    unlink(path);
    assert_int_equal(rc, 0);
    assert_string_equal(spindle_config_member(c, 0)->name, "from-env");
    spindle_config_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_ini_key_has_its_override_row),
        cmocka_unit_test(test_names_are_unique_and_rows_complete),
        cmocka_unit_test(test_pattern_rows_take_numbers_only),
        cmocka_unit_test(test_undeclared_variable_reads_as_unset),
        cmocka_unit_test(test_member_name_is_overridden_from_the_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
