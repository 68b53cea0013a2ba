/*
 * rix/backend.h — where a repository's files live: one small interface over the local backend
 * (the embedded default) and the REST backend (restic's REST protocol).
 *
 * A repository is a set of named files by type (FORMAT.md, "Layout"):
 *
 *   config                    RIX_FILE_CONFIG   (name ignored: there is one)
 *   keys/<id>                 RIX_FILE_KEY
 *   locks/<id>                RIX_FILE_LOCK
 *   snapshots/<id>            RIX_FILE_SNAPSHOT
 *   index/<id>                RIX_FILE_INDEX
 *   data/<id[0..2)>/<id>      RIX_FILE_PACK
 *
 * Names are 64 lowercase hex digits (the SHA-256 of the file's bytes); backends refuse anything
 * else, so a name can never walk out of the repository.
 *
 * Writes are atomic: a reader sees no file or the whole file, never part of one, and a crash
 * at any point leaves the old state or the new file complete (local: temporary file, write,
 * fsync, rename, fsync of the directory).
 *
 * A backend is safe to use from several threads at once.
 */
#ifndef RIX_BACKEND_H
#define RIX_BACKEND_H

#include "rix/common.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rix_file_type {
	RIX_FILE_CONFIG = 0,
	RIX_FILE_KEY = 1,
	RIX_FILE_LOCK = 2,
	RIX_FILE_SNAPSHOT = 3,
	RIX_FILE_INDEX = 4,
	RIX_FILE_PACK = 5,
} rix_file_type;
#define RIX_FILE_TYPES 6

/* "config", "key", "lock", "snapshot", "index", "pack" (the folder names differ: see above). */
RIX_EXPORT const char *rix_file_type_name(rix_file_type t);

/* Called once per file by rix_backend_list: name (NUL-terminated, borrowed) and size. Nonzero stops. */
typedef int (*rix_backend_list_fn)(void *payload, const char *name, uint64_t size);

/*
 * The operations of a backend, for implementing one. Each returns 0 or a RIX_E* code with the
 * message set (rix_error_set). Names are checked by the rix_backend_* wrappers before a call.
 */
typedef struct rix_backend_ops {
	const char *kind; /* "local", ... */
	/* Every file of type t, in no particular order; fn's nonzero return is returned. */
	int (*list)(void *self, rix_file_type t, rix_backend_list_fn fn, void *payload);
	/* *size of the file; RIX_ENOTFOUND if there is none. */
	int (*stat)(void *self, rix_file_type t, const char *name, uint64_t *size);
	/* Exactly len bytes from off into buf; RIX_ENOTFOUND, RIX_ECORRUPT when the file ends first. */
	int (*read)(void *self, rix_file_type t, const char *name, uint64_t off, void *buf, size_t len);
	/* Stores data[0..n) atomically (replacing a file of that name). RIX_ENOSPC when full. */
	int (*write)(void *self, rix_file_type t, const char *name, const void *data, size_t n);
	/*
	 * Stores the size bytes of the open file fd (at path on this machine) atomically; may take
	 * the file itself (local: a rename when on the same file system), and then sets *taken.
	 */
	int (*write_file)(void *self, rix_file_type t, const char *name, int fd, const char *path, uint64_t size,
			  bool *taken);
	/* Removes the file; RIX_ENOTFOUND if there is none. */
	int (*remove)(void *self, rix_file_type t, const char *name);
	/* A directory on this machine for temporary files that write_file can take whole, or NULL. */
	const char *(*temp_dir)(void *self);
	void (*close)(void *self);
} rix_backend_ops;

typedef struct rix_backend rix_backend;

/* Wraps an implementation (ops and its state). @return 0, RIX_ENOMEM. */
RIX_EXPORT RIX_NODISCARD int rix_backend_new(rix_backend **out, const rix_backend_ops *ops, void *self);
/* Closes the implementation and frees. NULL-safe. */
RIX_EXPORT void rix_backend_free(rix_backend *b);

/*
 * The local backend over the directory path. With create, makes the directory if missing and
 * restic's folders (keys, locks, snapshots, index, data/00..ff), and refuses a directory that
 * already holds a config file; without, path must hold a config file. Both make the folder
 * .rix-tmp for temporary pack files (rix_backend_temp_dir) when they can.
 * @return 0; RIX_ENOTFOUND (no repository there); RIX_EEXISTS (create, and a config is already
 * there); RIX_EIO; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_backend_local_open(rix_backend **out, const char *path, bool create);

/*
 * The REST backend: restic's REST protocol (v2), url "rest:http(s)://host:port/path/" (the
 * "rest:" prefix is optional), as served by restic's rest-server or `rclone serve restic`.
 * create asks the server to make the repository's folders. Packs are sent from their temporary
 * file (never taken). @return 0; RIX_ENOTFOUND (no repository there); RIX_EEXISTS; RIX_EINVAL
 * (not an http(s) URL); RIX_EIO (the server cannot be reached: curl's message); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_backend_rest_open(rix_backend **out, const char *url, bool create);

/*
 * Options of the REST backend. Start from RIX_REST_OPTIONS_INIT; another version is refused
 * (RIX_EINVAL). A request that fails transiently (no connection, a connection dropped or timed
 * out, HTTP 408, 429 or 5xx but 501 and 507) is tried again after a wait that starts at
 * first_delay_ms and grows 1.5 times each try (up to 60 s), `tries` times in all, as restic's
 * retrying backend does (10 tries from 500 ms: about 37 s of waiting); then its error names the
 * operation, the URL and how many tries were made.
 */
typedef struct rix_rest_options {
	unsigned version;
	const char *cacert;      /* a PEM file of the CAs to trust for https (NULL: the system's); copied */
	bool insecure_tls;       /* do not verify the server's certificate (nor its name) */
	uint64_t limit_upload;   /* bytes per second, each transfer (0: no limit; all: rix_backend_limit) */
	uint64_t limit_download; /* bytes per second, each transfer (0: no limit; all: rix_backend_limit) */
	unsigned tries;          /* attempts of a request in all (0: RIX_REST_TRIES) */
	unsigned first_delay_ms; /* the first wait between attempts (0: RIX_REST_FIRST_DELAY_MS) */
} rix_rest_options;
#define RIX_REST_OPTIONS_VERSION 1u
#define RIX_REST_OPTIONS_INIT { .version = RIX_REST_OPTIONS_VERSION }
#define RIX_REST_TRIES 10
#define RIX_REST_FIRST_DELAY_MS 500

/* rix_backend_rest_open with options (NULL: the defaults). The same return codes. */
RIX_EXPORT RIX_NODISCARD int rix_backend_rest_open_opts(rix_backend **out, const char *url, bool create,
							const rix_rest_options *o);

/*
 * Wraps inner so that all the transfers through it, from every thread, stay under a rate:
 * upload and download in bytes per second (0: no limit), as restic's --limit-upload and
 * --limit-download act on any backend. Reads count as downloads, writes (write, write_file) as
 * uploads; list, stat and remove are not counted. The transfers share one clock per direction:
 * each takes the next n / rate seconds of it, waits for them to begin and returns no earlier
 * than their end, so N bytes take at least N / rate seconds (idle time gives no credit). Reads
 * are cut into pieces of a quarter second's worth (64 KiB to 16 MiB; on REST each piece is a
 * range request) so the bytes flow evenly; a write is one transfer. The kind is inner's. On
 * success *out owns inner (rix_backend_free frees both); on failure inner stays the caller's.
 * @return 0; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_backend_limit(rix_backend **out, rix_backend *inner, uint64_t upload, uint64_t download);

/*
 * The operations, through any backend. name is a file name (64 lowercase hex digits; ignored
 * for RIX_FILE_CONFIG); any other name is refused with RIX_EINVAL before the backend sees it.
 * Every string and buffer passed in is borrowed for the call. Besides the codes listed, each
 * may return RIX_EIO (the file system or the server failed: the message says how) and
 * RIX_ENOMEM.
 */
/* "local", "rest", ...: borrowed, valid while b is. */
RIX_EXPORT const char *rix_backend_kind(const rix_backend *b);
/*
 * Calls fn for every file of type t whose name is a file name (others are skipped), in no
 * particular order, with its size. @return 0; fn's nonzero value (listing stops).
 */
RIX_EXPORT RIX_NODISCARD int rix_backend_list(rix_backend *b, rix_file_type t, rix_backend_list_fn fn, void *payload);
/* *size of the file. @return 0; RIX_ENOTFOUND. */
RIX_EXPORT RIX_NODISCARD int rix_backend_stat(uint64_t *size, rix_backend *b, rix_file_type t, const char *name);
/*
 * Exactly len bytes of the file from off into the caller's buf. @return 0; RIX_ENOTFOUND;
 * RIX_ECORRUPT (the file ends first: buf's content is then unspecified).
 */
RIX_EXPORT RIX_NODISCARD int rix_backend_read(rix_backend *b, rix_file_type t, const char *name, uint64_t off, void *buf, size_t len);
/*
 * The whole file: *data (the caller's, rix_free; NULL on failure), *n bytes.
 * @return 0; RIX_ENOTFOUND; RIX_ECORRUPT (over max bytes).
 */
RIX_EXPORT RIX_NODISCARD int rix_backend_read_all(uint8_t **data, size_t *n, rix_backend *b, rix_file_type t, const char *name,
			 size_t max);
/*
 * Stores data[0..n) atomically under name (a reader sees no file or all of it; one of that name
 * is replaced). @return 0; RIX_ENOSPC (no room: nothing is left behind).
 */
RIX_EXPORT RIX_NODISCARD int rix_backend_write(rix_backend *b, rix_file_type t, const char *name, const void *data, size_t n);
/*
 * Stores the first size bytes of the open file fd (at path on this machine, or NULL) atomically
 * under name. A backend may take the file itself (local: a rename on the same file system);
 * *taken says whether it did (the caller must then not remove path). fd stays the caller's.
 * @return 0; RIX_EINVAL (the file is shorter than size); RIX_ENOSPC.
 */
RIX_EXPORT RIX_NODISCARD int rix_backend_write_file(bool *taken, rix_backend *b, rix_file_type t, const char *name, int fd,
			   const char *path, uint64_t size);
/* Removes the file. @return 0; RIX_ENOTFOUND. */
RIX_EXPORT RIX_NODISCARD int rix_backend_remove(rix_backend *b, rix_file_type t, const char *name);
/* A directory on this machine whose files write_file can take whole, or NULL: borrowed. */
RIX_EXPORT const char *rix_backend_temp_dir(rix_backend *b);

#ifdef __cplusplus
}
#endif

#endif
