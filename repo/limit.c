/*
 * repo/limit.c — a backend that wraps another and keeps all its transfers, from every thread,
 * under an upload and a download rate (restic's --limit-upload / --limit-download, which act on
 * any backend; rix/backend.h, rix_backend_limit).
 *
 * One clock per direction, shared by the transfers: `next` is when the bytes reserved so far
 * have had their time at the rate. A transfer of n bytes takes the slot [start, end):
 *
 *   start = max(now, next)      no credit for idle time: a run never goes faster than the rate
 *   end = start + n / rate;     next = end
 *
 * and waits until start, transfers, then returns no earlier than end. So transfers follow each
 * other on the clock whatever thread makes them, and N bytes take at least N / rate seconds
 * from the first transfer's start. Reads are cut into pieces of a quarter second's worth (64 KiB
 * to 16 MiB), each a slot of its own, so a pack arrives evenly rather than in one burst and a
 * long pause; a write is one transfer (a backend stores a file whole). Listing, stat and remove
 * move almost nothing and are not counted.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "rix/alloc.h"
#include "rix/backend.h"
#include "rix/error.h"

#define PIECE_MIN ((uint64_t)64 << 10)
#define PIECE_MAX ((uint64_t)16 << 20)

struct clock {
	uint64_t rate; /* bytes per second; 0: no limit */
	uint64_t next; /* ns (CLOCK_MONOTONIC): when the slots given so far end */
	pthread_mutex_t mu;
};

typedef struct limited {
	rix_backend_ops ops; /* the inner backend's kind, these functions */
	rix_backend *inner;
	struct clock up, down;
} limited;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	for (uint64_t n = now_ns(); n < t; n = now_ns()) {
		uint64_t d = t - n;
		struct timespec ts = { (time_t)(d / 1000000000u), (long)(d % 1000000000u) };
		if (nanosleep(&ts, NULL) != 0 && errno != EINTR)
			break;
	}
}

/* The slot of n bytes on c: waits for its start; its end into *end. */
static void take_slot(struct clock *c, uint64_t n, uint64_t *end)
{
	uint64_t len = (uint64_t)((double)n * 1e9 / (double)c->rate);
	pthread_mutex_lock(&c->mu);
	uint64_t now = now_ns(), start = c->next > now ? c->next : now;
	c->next = *end = start + len;
	pthread_mutex_unlock(&c->mu);
	sleep_until(start);
}

static int lim_list(void *self, rix_file_type t, rix_backend_list_fn fn, void *payload)
{
	limited *l = self;
	return rix_backend_list(l->inner, t, fn, payload);
}

static int lim_stat(void *self, rix_file_type t, const char *name, uint64_t *size)
{
	limited *l = self;
	return rix_backend_stat(size, l->inner, t, name);
}

static int lim_read(void *self, rix_file_type t, const char *name, uint64_t off, void *buf, size_t len)
{
	limited *l = self;
	if (l->down.rate == 0)
		return rix_backend_read(l->inner, t, name, off, buf, len);
	uint64_t piece = l->down.rate / 4, end = 0;
	piece = piece < PIECE_MIN ? PIECE_MIN : piece > PIECE_MAX ? PIECE_MAX : piece;
	size_t done = 0;
	do { /* a read of 0 bytes is still one (it says whether the file is there) */
		size_t n = len - done < piece ? len - done : (size_t)piece;
		take_slot(&l->down, n, &end);
		int rc = rix_backend_read(l->inner, t, name, off + done, (uint8_t *)buf + done, n);
		if (rc != 0)
			return rc;
		done += n;
	} while (done < len);
	sleep_until(end);
	return 0;
}

static int lim_write(void *self, rix_file_type t, const char *name, const void *data, size_t n)
{
	limited *l = self;
	uint64_t end = 0;
	if (l->up.rate != 0)
		take_slot(&l->up, n, &end);
	int rc = rix_backend_write(l->inner, t, name, data, n);
	sleep_until(end);
	return rc;
}

static int lim_write_file(void *self, rix_file_type t, const char *name, int fd, const char *path, uint64_t size,
			  bool *taken)
{
	limited *l = self;
	uint64_t end = 0;
	if (l->up.rate != 0)
		take_slot(&l->up, size, &end);
	int rc = rix_backend_write_file(taken, l->inner, t, name, fd, path, size);
	sleep_until(end);
	return rc;
}

static int lim_remove(void *self, rix_file_type t, const char *name)
{
	limited *l = self;
	return rix_backend_remove(l->inner, t, name);
}

static const char *lim_temp_dir(void *self)
{
	limited *l = self;
	return rix_backend_temp_dir(l->inner);
}

static void lim_close(void *self)
{
	limited *l = self;
	rix_backend_free(l->inner);
	pthread_mutex_destroy(&l->up.mu);
	pthread_mutex_destroy(&l->down.mu);
	rix_free(l);
}

int rix_backend_limit(rix_backend **out, rix_backend *inner, uint64_t upload, uint64_t download)
{
	*out = NULL;
	limited *l = rix_calloc(1, sizeof(*l));
	if (l == NULL)
		return rix_error_set(RIX_ENOMEM, "limit: out of memory");
	l->ops = (rix_backend_ops){ .kind = rix_backend_kind(inner), .list = lim_list, .stat = lim_stat,
				    .read = lim_read, .write = lim_write, .write_file = lim_write_file,
				    .remove = lim_remove, .temp_dir = lim_temp_dir, .close = lim_close };
	l->inner = inner;
	l->up.rate = upload;
	l->down.rate = download;
	pthread_mutex_init(&l->up.mu, NULL);
	pthread_mutex_init(&l->down.mu, NULL);
	int rc = rix_backend_new(out, &l->ops, l);
	if (rc != 0) {
		l->inner = NULL; /* the caller's still */
		lim_close(l);
	}
	return rc;
}
