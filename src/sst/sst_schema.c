/* SST schema: column layout of one row. */
#include "sst/sst.h"
#include "util/error.h"

#include <string.h>

void sst_schema_init(struct sst_schema *schema)
{
    memset(schema, 0, sizeof *schema);
    schema->row_size = SST_ROW_HEADER;
}

int sst_schema_add_counter(struct sst_schema *schema)
{
    if (schema->num_columns >= SST_MAX_COLUMNS)
        return sp_error(SPINDLE_EINVAL, "sst: schema already has the maximum %d columns",
                        SST_MAX_COLUMNS);
    /* row_size starts at SST_ROW_HEADER and grows by whole words: every
     * counter is 8-byte aligned (T1) and follows the previous column. */
    schema->columns[schema->num_columns].offset = schema->row_size;
    schema->row_size += 8;
    return (int)schema->num_columns++;
}
