/* Where rings lie in a member's side region (smc.h, "Side region"). */
#include "smc/smc_impl.h"

uint64_t smc_ring_stride(const struct smc_layout *layout)
{
    /* Cache-line aligned: rings of different senders never share a line. */
    uint64_t slot = SMC_HEADER_SIZE + (((uint64_t)layout->max_payload + 7) & ~7ull);
    uint64_t ring = slot * layout->window_size;
    return (ring + SST_CACHE_LINE - 1) / SST_CACHE_LINE * SST_CACHE_LINE;
}

static bool is_member(const struct smc_layout *layout, uint32_t row)
{
    return smc_find_row(layout->members, layout->num_members, row) >= 0;
}

static bool writes_to(const struct smc_layout *layout, uint32_t writer, uint32_t row)
{
    return smc_find_row(layout->senders, layout->num_senders, writer) >= 0 &&
           is_member(layout, row);
}

uint64_t smc_ring_base(const struct smc_layout *layouts, uint32_t g, uint32_t row)
{
    uint64_t base = 0;
    for (uint32_t h = 0; h < g; h++)
        if (is_member(&layouts[h], row))
            base += layouts[h].num_senders * smc_ring_stride(&layouts[h]);
    return base;
}

static uint64_t round_up(uint64_t bytes, uint32_t align)
{
    return align == 0 ? bytes : (bytes + align - 1) / align * align;
}

/* Sliced layout: bytes between the start of writer's slice and its first
 * ring. Slices are page-aligned, so without it slot k of every sender
 * would sit at the same page offset and a receiver scanning slot k of all
 * senders would hit the same cache sets; SMC_RING_STAGGER per writer index
 * (a multiple of the cache line, wrapped within the alignment) moves each
 * sender's rings onto other sets. */
static uint64_t ring_stagger(const struct smc_side_shape *shape, uint32_t writer)
{
    return (uint64_t)writer * SMC_RING_STAGGER % shape->align;
}

/* Bytes of writer's slice of row's side region before rounding: the
 * stagger, then its ring in each subgroup (in index order) that it sends
 * in and row is a member of, then its point-to-point ring to row; 0 if
 * it writes nothing there. */
static uint64_t writer_bytes(const struct smc_side_shape *shape, uint32_t writer, uint32_t row)
{
    uint64_t bytes = shape->p2p_ring_bytes;
    for (uint32_t g = 0; g < shape->num_subgroups; g++)
        if (writes_to(&shape->layouts[g], writer, row))
            bytes += smc_ring_stride(&shape->layouts[g]);
    return bytes == 0 ? 0 : bytes + ring_stagger(shape, writer);
}

/* Sliced layout: where writer's slice of row's side region starts (the
 * slices of rows before it come first, each rounded up to the alignment).
 * With writer == num_rows, where the slices end. */
static uint64_t slice_start(const struct smc_side_shape *shape, uint32_t writer, uint32_t row)
{
    uint64_t start = 0;
    for (uint32_t w = 0; w < writer; w++)
        start += round_up(writer_bytes(shape, w, row), shape->align);
    return start;
}

uint64_t smc_side_ring(const struct smc_side_shape *shape, uint32_t g, uint32_t sender_rank,
                       uint32_t row)
{
    const struct smc_layout *layouts = shape->layouts;
    if (shape->align == 0)
        return smc_ring_base(layouts, g, row) + sender_rank * smc_ring_stride(&layouts[g]);
    uint32_t writer = layouts[g].senders[sender_rank];
    uint64_t offset = slice_start(shape, writer, row) + ring_stagger(shape, writer);
    for (uint32_t h = 0; h < g; h++)
        if (writes_to(&layouts[h], writer, row))
            offset += smc_ring_stride(&layouts[h]);
    return offset;
}

uint64_t smc_side_p2p_in(const struct smc_side_shape *shape, uint32_t writer, uint32_t row)
{
    if (shape->align == 0)
        return smc_ring_base(shape->layouts, shape->num_subgroups, row) +
               writer * shape->p2p_ring_bytes;
    return slice_start(shape, writer, row) + writer_bytes(shape, writer, row) -
           shape->p2p_ring_bytes;
}

uint64_t smc_side_p2p_out(const struct smc_side_shape *shape, uint32_t target, uint32_t row)
{
    uint64_t start = shape->align == 0 ? smc_ring_base(shape->layouts, shape->num_subgroups, row) +
                                             shape->num_rows * shape->p2p_ring_bytes
                                       : slice_start(shape, shape->num_rows, row);
    return start + target * shape->p2p_ring_bytes;
}

uint64_t smc_side_size(const struct smc_side_shape *shape, uint32_t row)
{
    return smc_side_p2p_out(shape, shape->num_rows, row);
}

void smc_side_slice(const struct smc_side_shape *shape, uint32_t writer, uint32_t row,
                    uint64_t *offset, uint64_t *length)
{
    *offset = slice_start(shape, writer, row);
    *length = round_up(writer_bytes(shape, writer, row), shape->align);
}
