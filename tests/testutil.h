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

/* Writes data[0..n) to <dir>/<name>, failing the test on error. */
void rix_test_put_file(const char *dir, const char *name, const void *data, size_t n);
/* rm -rf dir (and dir.out, the restic helpers' output file), failing the test on error. */
void rix_test_remove_tree(const char *dir);

/*
 * The real restic binary as the oracle. scripts/deps.sh installs it, so its absence fails the
 * test instead of skipping it.
 * rix_test_restic: runs `RESTIC_PASSWORD=<password> restic --no-cache -r <dir> <args>`, stdout
 * and stderr into <dir>.out; returns the exit status and, if output is not NULL, the output
 * (malloc'd, NUL-terminated).
 * rix_test_restic_cat_config_equals: `restic cat config` must succeed and print JSON equal to
 * want_json.
 */
void rix_test_need_restic(void);
int rix_test_restic(const char *dir, const char *password, const char *args, char **output);
void rix_test_restic_cat_config_equals(const char *dir, const char *password, const char *want_json,
				       size_t want_len);

#endif
