/*
 * rix/common.h — what every public header needs: the export and result-check attributes, and
 * the switch for the advanced API.
 *
 * librix.so exports exactly the functions the public headers declare (built with hidden
 * visibility; RIX_EXPORT marks each declaration). tests/check_exports.sh holds the library to it.
 *
 * The advanced API: declarations between `#ifdef RIX_ADVANCED` and its `#endif` in these headers
 * (the packer manager, the pack writer's file handles, the index's tuning knobs and test hooks)
 * are exported too, but they are not part of the stable API: they may change between minor
 * versions. A program that wants them defines RIX_ADVANCED before including any rix header, as
 * zstd's ZSTD_STATIC_LINKING_ONLY. The rix command uses the stable API only; benchmarks and
 * tests use both.
 */
#ifndef RIX_COMMON_H
#define RIX_COMMON_H

#include <stdbool.h> /* flags are bool everywhere */

#if defined(__GNUC__) || defined(__clang__)
#define RIX_EXPORT __attribute__((visibility("default")))
/* The result says whether it worked (or is all the call is for): ignoring it is a bug. */
#define RIX_NODISCARD __attribute__((warn_unused_result))
#else
#define RIX_EXPORT
#define RIX_NODISCARD
#endif

#endif
