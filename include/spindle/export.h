/* Symbol visibility for the public API: everything else is hidden. */
#ifndef SPINDLE_EXPORT_H
#define SPINDLE_EXPORT_H

#if defined(SPINDLE_BUILDING) && defined(__GNUC__)
#define SPINDLE_API __attribute__((visibility("default")))
#else
#define SPINDLE_API
#endif

#endif
