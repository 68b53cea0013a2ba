/*
 * tests/testutil.h — helpers shared by the cmocka tests.
 */
#ifndef RIX_TESTUTIL_H
#define RIX_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include "rix/types.h"

/* SplitMix64: deterministic pseudo-random numbers. */
uint64_t rix_test_next(uint64_t *state);
void rix_test_fill_random(void *buf, size_t n, uint64_t *state);
void rix_test_random_id(rix_id *id, uint64_t *state);

/*
 * A failing, counting allocator installed with rix_allocator_set. fail_at = N makes the N-th
 * allocation (1-based, counted from install) return NULL, and only that one; 0 never fails.
 * live() = allocations not yet freed (through rix_free) since install.
 */
void rix_test_failalloc_install(long fail_at);
long rix_test_failalloc_count(void);
long rix_test_failalloc_live(void);
void rix_test_failalloc_remove(void);

/*
 * Files. rix_test_read_file: the whole file, NUL-terminated (*len excludes the NUL), malloc'd;
 * NULL if unreadable. rix_test_must_read: the same, failing the cmocka test if unreadable.
 * rix_test_data_dir: the fixture directory ($RIX_TEST_DATA, set by CTest, or tests/data).
 * rix_test_data_file: <data dir>/<rel>, read whole, failing the test if unreadable.
 */
void *rix_test_read_file(const char *path, size_t *len);
void *rix_test_must_read(const char *path, size_t *len);
const char *rix_test_data_dir(void);
void *rix_test_data_file(const char *rel, size_t *len);

#endif
