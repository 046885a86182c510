/* SST schema: column layout of one row. */
#include "sst/sst.h"
#include "util/error.h"

#include <string.h>

void sst_schema_init(struct sst_schema *schema)
{
    memset(schema, 0, sizeof *schema);
    schema->row_size = SST_ROW_HEADER;
}

static int add_column(struct sst_schema *schema, enum sst_column_kind kind, size_t size,
                      uint32_t align, int guard)
{
    if (schema->num_columns >= SST_MAX_COLUMNS)
        return sp_error(SPINDLE_EINVAL, "sst: schema already has the maximum %d columns",
                        SST_MAX_COLUMNS);
    size_t offset = (size_t)(schema->row_size + align - 1) / align * align;
    size = (size + 7) / 8 * 8;
    if (offset + size > UINT32_MAX / 2)
        return sp_error(SPINDLE_EINVAL, "sst: row would exceed %u bytes", UINT32_MAX / 2);
    struct sst_column *column = &schema->columns[schema->num_columns];
    column->kind = kind;
    column->offset = (uint32_t)offset;
    column->size = (uint32_t)size;
    column->guard = guard;
    schema->row_size = (uint32_t)(offset + size);
    return (int)schema->num_columns++;
}

int sst_schema_add_counter(struct sst_schema *schema)
{
    return add_column(schema, SST_COL_COUNTER, 8, 8, -1);
}

int sst_schema_add_bool(struct sst_schema *schema)
{
    return add_column(schema, SST_COL_BOOL, 8, 8, -1);
}

int sst_schema_add_array(struct sst_schema *schema, size_t size, int guard_column, bool cache_align)
{
    if (size == 0)
        return sp_error(SPINDLE_EINVAL, "sst: array column of 0 bytes");
    if (guard_column < 0 || (uint32_t)guard_column >= schema->num_columns ||
        schema->columns[guard_column].kind != SST_COL_COUNTER)
        return sp_error(SPINDLE_EINVAL, "sst: guard column %d of an array is not a counter",
                        guard_column);
    return add_column(schema, SST_COL_ARRAY, size, cache_align ? SST_CACHE_LINE : 8, guard_column);
}
