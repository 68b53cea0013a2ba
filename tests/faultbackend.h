/*
 * tests/faultbackend.h — a backend that wraps a real one, counts its operations and makes one
 * of them (or every one from some point on) fail. Test-only code.
 *
 *   rix_test_fault f;  rix_test_fault_init(&f);  caller-owned control block
 *   rix_test_fault_backend(&b, inner, &f);        b owns inner; f must outlive b
 *   rix_test_fault_arm(&f, &(rix_test_fault_plan){ RIX_TEST_FAULT_WRITE, 3, RIX_TEST_FAULT_ONCE,
 *                                                  RIX_TEST_FAULT_ENOSPC });
 *   ... the 3rd write from now is refused with RIX_ENOSPC ...
 *   rix_test_fault_injected(&f)                  how many operations were made to fail
 *
 * What is counted. Every call through the wrapper is one operation of its kind, counted from
 * the last arm: list, stat, read, remove, and write (rix_backend_write and _write_file both).
 * A write also counts as a sync (its durability step), and a write_file that hands over a file
 * by path (the local backend renames it into place) also as a rename. RIX_TEST_FAULT_ANY
 * counts every call once, whatever its kind.
 *
 * What a fault does, by the kind the plan aims at:
 *   list, stat, read, remove, write, rename, any:  the operation is not done at all (a write
 *       stores nothing and takes no file), and it returns the plan's error;
 *   sync:  the write is done, the file is complete in the inner backend (a write_file's file may
 *       have been taken), and then the error is returned: what the local backend returns when the
 *       fsync of the folder after the rename fails. The caller is told "failed" about a file that
 *       is there.
 * The plan's effect: RIX_EIO; RIX_ENOSPC (for writes, syncs and renames; RIX_EIO for the others,
 * which never fill a disk); or a short result: a read fills only the first half of
 * its buffer (the rest is zeroed) and returns RIX_ECORRUPT, as from a file that ends early; a list
 * reports only the first half of its entries and returns RIX_EIO, as a listing cut off; other
 * operations return RIX_EIO. Every fault sets a message (rix_error_last) that says "injected".
 *
 * Copying: with f->copy set, write_file hands the inner backend the descriptor only, never the
 * path, so the file is copied and never taken, as the REST backend does (and no write renames).
 *
 * Bytes: every read's length is added up by file type (rix_test_fault_read_bytes), and each read
 * of a pack is logged (its name, offset and length) so that rix_test_fault_pack_overlaps can say
 * whether some byte of a pack was read twice since the last arm: what "each pack read once"
 * means once a pack's blobs come in several ranged reads.
 *
 * Watching: f->on_call (may be NULL) is called once per call, with its kind and file type,
 * after it is counted and before it is done (or fails), outside the mutex and on the calling
 * thread: it may block (to hold threads inside an operation) or record which thread called.
 *
 * Modes: once (only the n-th operation of the kind fails) and keep-failing (the n-th and every
 * later one). The wrapper is safe to use from several threads (a mutex guards the counters): with
 * several threads, which operation is the n-th depends on scheduling.
 */
#ifndef RIX_TEST_FAULTBACKEND_H
#define RIX_TEST_FAULTBACKEND_H

#include <pthread.h>

#include "rix/backend.h"

typedef enum rix_test_fault_op {
	RIX_TEST_FAULT_ANY = 0,
	RIX_TEST_FAULT_LIST,
	RIX_TEST_FAULT_STAT,
	RIX_TEST_FAULT_READ,
	RIX_TEST_FAULT_WRITE,
	RIX_TEST_FAULT_SYNC,
	RIX_TEST_FAULT_RENAME,
	RIX_TEST_FAULT_REMOVE,
} rix_test_fault_op;
#define RIX_TEST_FAULT_OPS 8

/* One logged read of a pack. */
struct rix_test_fault_range {
	char name[65];
	uint64_t off, len;
};

typedef enum rix_test_fault_mode {
	RIX_TEST_FAULT_ONCE = 0, /* the n-th operation only */
	RIX_TEST_FAULT_FROM = 1, /* the n-th and every later one (keep failing) */
} rix_test_fault_mode;

typedef enum rix_test_fault_effect {
	RIX_TEST_FAULT_EIO = 0,
	RIX_TEST_FAULT_ENOSPC = 1,
	RIX_TEST_FAULT_SHORT = 2,
} rix_test_fault_effect;

typedef struct rix_test_fault_plan {
	rix_test_fault_op op;
	long n; /* 1-based; 0: no fault (counting only) */
	rix_test_fault_mode mode;
	rix_test_fault_effect effect;
} rix_test_fault_plan;

/* The control block: rix_test_fault_init it; read it through the functions below. */
typedef struct rix_test_fault {
	pthread_mutex_t mu;
	rix_test_fault_plan plan;
	long count[RIX_TEST_FAULT_OPS]; /* operations since the last arm, by kind */
	long injected;                   /* faults made since the last arm */
	int copy;                        /* write_file: never give the inner backend the path */
	void (*on_call)(void *payload, rix_test_fault_op op, rix_file_type t); /* may be NULL */
	void *on_call_payload;
	uint64_t read_bytes[RIX_FILE_TYPES]; /* bytes asked for by reads since the last arm, by type */
	struct rix_test_fault_range *ranges; /* the pack reads since the last arm (malloc'ed) */
	size_t nranges, cranges;
	int ranges_lost;                     /* the log could not grow: overlaps unknown */
} rix_test_fault;

/* The wrapper over inner (owned: freed with the wrapper). f stays the caller's. 0 or RIX_ENOMEM
 * (then the caller keeps inner). */
int rix_test_fault_backend(rix_backend **out, rix_backend *inner, rix_test_fault *f);

/* No plan, counters at zero. */
void rix_test_fault_init(rix_test_fault *f);
/* Sets the plan (NULL: none) and zeroes the counters. */
void rix_test_fault_arm(rix_test_fault *f, const rix_test_fault_plan *plan);
/* Operations of kind op since the last arm; faults injected since the last arm. */
long rix_test_fault_count(rix_test_fault *f, rix_test_fault_op op);
long rix_test_fault_injected(rix_test_fault *f);
/* Bytes that reads of files of type t asked for since the last arm (faulted reads included). */
uint64_t rix_test_fault_read_bytes(rix_test_fault *f, rix_file_type t);
/* Bytes of packs read more than once since the last arm: the sum, over every two reads of one
 * pack, of the bytes both read (0: no pack byte read twice); -1 if the log ran out of memory. */
long long rix_test_fault_pack_overlaps(rix_test_fault *f);
/* Frees the mutex and the log (after the last wrapper over f is freed). */
void rix_test_fault_destroy(rix_test_fault *f);

/* "any", "list", ...; "eio", "enospc", "short"; "once", "from". */
const char *rix_test_fault_op_name(rix_test_fault_op op);
const char *rix_test_fault_effect_name(rix_test_fault_effect e);
const char *rix_test_fault_mode_name(rix_test_fault_mode m);

#endif
