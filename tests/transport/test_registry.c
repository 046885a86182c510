/*
 * The backend registry (src/transport/registry.c): names are looked up and
 * the unknown ones refused with the list of built backends; a table that
 * lacks an operation or has no sane attributes is refused, naming what is
 * missing; every built backend passes and exports descriptors within the
 * size its attribute table states.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "transport/transport.h"
#include "util/error.h"

static void test_unknown_backend_lists_available(void **state)
{
    (void)state;
    assert_null(tp_backend_find("carrier-pigeon"));
    assert_non_null(strstr(spindle_errmsg(), "carrier-pigeon"));
    assert_non_null(strstr(spindle_errmsg(), "available: "));
    const struct tp_ops *ops = tp_backend_find(NULL);
    assert_non_null(ops);
#ifdef SPINDLE_HAVE_SHM
    assert_string_equal(ops->name, "shm");
#endif
    struct tp_config config = {.backend = "carrier-pigeon"};
    struct tp_endpoint *ep = NULL;
    assert_int_equal(tp_open(&config, &ep), SPINDLE_ENOTSUP);
    assert_null(ep);
}

static void test_incomplete_tables_are_refused_by_name(void **state)
{
    (void)state;
    const struct tp_ops *shm = tp_backend_find("shm");
    assert_non_null(shm);
    assert_int_equal(tp_backend_check(shm), 0);
    struct tp_ops broken = *shm;
    broken.doorbell_wait = NULL;
    assert_int_equal(tp_backend_check(&broken), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "'shm' lacks the 'doorbell_wait' operation"));
    broken = *shm;
    broken.post_writes = NULL;
    assert_int_equal(tp_backend_check(&broken), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "'post_writes'"));
    broken = *shm;
    broken.attr = NULL;
    assert_int_equal(tp_backend_check(&broken), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "no attribute table"));
    struct tp_attr bad_attr = *shm->attr;
    bad_attr.desc_len = TP_DESC_MAX + 1;
    broken = *shm;
    broken.attr = &bad_attr;
    assert_int_equal(tp_backend_check(&broken), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "193 bytes"));
    broken = *shm;
    broken.name = "";
    assert_int_equal(tp_backend_check(&broken), SPINDLE_EINVAL);
    broken = *shm;
    broken.mr_grant = NULL; /* optional */
    assert_int_equal(tp_backend_check(&broken), 0);
}

/* Opens backend (with the given provider) and checks its descriptors fit
 * the size its table states. */
static void check_descriptors(const char *backend, const char *provider)
{
    const struct tp_ops *ops = tp_backend_find(backend);
    assert_non_null(ops);
    assert_int_equal(tp_backend_check(ops), 0);
    struct tp_config config = {.backend = backend,
                               .group_name = "registry",
                               .provider = provider,
                               .host = "127.0.0.1",
                               .failure_timeout_ms = 1000};
    struct tp_endpoint *ep = NULL;
    assert_int_equal(tp_open(&config, &ep), 0);
    assert_ptr_equal(ep->ops, ops);
    assert_ptr_equal(tp_attr(ep), ops->attr);
    assert_string_equal(tp_name(ep), backend);
    struct tp_desc desc;
    assert_int_equal(tp_address(ep, &desc), 0);
    assert_true(desc.len > 0 && desc.len <= ops->attr->desc_len);
    void *addr;
    struct tp_mr *mr;
    assert_int_equal(tp_mr_alloc(ep, 4096, TP_MR_REMOTE_WRITE, &addr, &mr), 0);
    assert_ptr_equal(mr->ops, ops);
    assert_int_equal(tp_mr_export(mr, &desc), 0);
    assert_true(desc.len > 0 && desc.len <= ops->attr->desc_len);
    /* A grant inside the region is taken by every backend, enforced or not. */
    assert_int_equal(tp_mr_grant(mr, 1, 0, 64), 0);
    tp_mr_free(ep, mr);
    tp_close(ep);
}

static void test_built_backends_pass_and_keep_their_limits(void **state)
{
    (void)state;
#ifdef SPINDLE_HAVE_SHM
    check_descriptors("shm", NULL);
#endif
#ifdef SPINDLE_HAVE_FABRIC
    check_descriptors("fabric", "tcp");
#endif
#ifdef SPINDLE_HAVE_VERBS
    /* No device here: the table is checked, not opened (the conformance
     * suite opens it on a fake device). */
    const struct tp_ops *verbs = tp_backend_find("verbs");
    assert_non_null(verbs);
    assert_int_equal(tp_backend_check(verbs), 0);
    assert_true(verbs->attr->inline_max > 0 && verbs->attr->max_batch > 0);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_backend_lists_available),
        cmocka_unit_test(test_incomplete_tables_are_refused_by_name),
        cmocka_unit_test(test_built_backends_pass_and_keep_their_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
