/*
 * tests/faultbackend.c — see faultbackend.h.
 *
 * Each call: under the mutex, count it under every kind it is (any, its own, and for writes
 * sync and maybe rename), and decide whether the plan's kind has reached n; then, outside the
 * mutex, either call the inner backend or fail (before it, or after it for a sync fault).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "faultbackend.h"

typedef struct fault_backend {
	rix_backend *inner;
	rix_test_fault *f;
} fault_backend;

static const char *const op_names[RIX_TEST_FAULT_OPS] = { "any",   "list", "stat",   "read",
							  "write", "sync", "rename", "remove" };

const char *rix_test_fault_op_name(rix_test_fault_op op)
{
	return (unsigned)op < RIX_TEST_FAULT_OPS ? op_names[op] : "?";
}

const char *rix_test_fault_effect_name(rix_test_fault_effect e)
{
	return e == RIX_TEST_FAULT_EIO ? "eio" : e == RIX_TEST_FAULT_ENOSPC ? "enospc" : "short";
}

const char *rix_test_fault_mode_name(rix_test_fault_mode m)
{
	return m == RIX_TEST_FAULT_ONCE ? "once" : "from";
}

void rix_test_fault_init(rix_test_fault *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
}

void rix_test_fault_destroy(rix_test_fault *f)
{
	free(f->ranges);
	f->ranges = NULL;
	pthread_mutex_destroy(&f->mu);
}

void rix_test_fault_arm(rix_test_fault *f, const rix_test_fault_plan *plan)
{
	pthread_mutex_lock(&f->mu);
	if (plan != NULL)
		f->plan = *plan;
	else
		memset(&f->plan, 0, sizeof(f->plan));
	memset(f->count, 0, sizeof(f->count));
	memset(f->read_bytes, 0, sizeof(f->read_bytes));
	f->nranges = 0;
	f->ranges_lost = 0;
	f->injected = 0;
	pthread_mutex_unlock(&f->mu);
}

long rix_test_fault_count(rix_test_fault *f, rix_test_fault_op op)
{
	pthread_mutex_lock(&f->mu);
	long n = (unsigned)op < RIX_TEST_FAULT_OPS ? f->count[op] : 0;
	pthread_mutex_unlock(&f->mu);
	return n;
}

long rix_test_fault_injected(rix_test_fault *f)
{
	pthread_mutex_lock(&f->mu);
	long n = f->injected;
	pthread_mutex_unlock(&f->mu);
	return n;
}

uint64_t rix_test_fault_read_bytes(rix_test_fault *f, rix_file_type t)
{
	pthread_mutex_lock(&f->mu);
	uint64_t n = (unsigned)t < RIX_FILE_TYPES ? f->read_bytes[t] : 0;
	pthread_mutex_unlock(&f->mu);
	return n;
}

static int by_name_off(const void *a, const void *b)
{
	const struct rix_test_fault_range *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	if (c != 0)
		return c;
	return x->off < y->off ? -1 : x->off > y->off;
}

long long rix_test_fault_pack_overlaps(rix_test_fault *f)
{
	pthread_mutex_lock(&f->mu);
	long long twice = f->ranges_lost ? -1 : 0;
	if (twice == 0 && f->nranges > 1)
		qsort(f->ranges, f->nranges, sizeof(f->ranges[0]), by_name_off);
	/* sorted by (pack, offset): each read against the later reads of its pack that start
	 * before it ends */
	for (size_t i = 0; twice >= 0 && i < f->nranges; i++) {
		const struct rix_test_fault_range *a = &f->ranges[i];
		for (size_t j = i + 1; j < f->nranges && strcmp(f->ranges[j].name, a->name) == 0 &&
				       f->ranges[j].off < a->off + a->len; j++) {
			uint64_t end = f->ranges[j].off + f->ranges[j].len;
			twice += (long long)((end < a->off + a->len ? end : a->off + a->len) - f->ranges[j].off);
		}
	}
	pthread_mutex_unlock(&f->mu);
	return twice;
}

/* A read of len bytes at off of file name, type t: counted in bytes, and logged if a pack. */
static void log_read(rix_test_fault *f, rix_file_type t, const char *name, uint64_t off, size_t len)
{
	pthread_mutex_lock(&f->mu);
	if ((unsigned)t < RIX_FILE_TYPES)
		f->read_bytes[t] += len;
	if (t == RIX_FILE_PACK && !f->ranges_lost) {
		if (f->nranges == f->cranges) {
			size_t cap = f->cranges ? 2 * f->cranges : 64;
			/* libc's realloc, not rix_malloc: the tests' failing allocator must not see it */
			struct rix_test_fault_range *v = realloc(f->ranges, cap * sizeof(*v));
			if (v == NULL)
				f->ranges_lost = 1;
			else {
				f->ranges = v;
				f->cranges = cap;
			}
		}
		if (!f->ranges_lost) {
			struct rix_test_fault_range *r = &f->ranges[f->nranges++];
			snprintf(r->name, sizeof(r->name), "%s", name != NULL ? name : "");
			r->off = off;
			r->len = len;
		}
	}
	pthread_mutex_unlock(&f->mu);
}

#define NO_FAULT (-1)

/* Counts one call of kind op on a file of type t (writes: also sync, and rename when renames),
 * says whether it fails: NO_FAULT, or the plan's kind (sync: fail after doing it); then f->on_call. */
static int count_call(rix_test_fault *f, rix_test_fault_op op, rix_file_type t, int renames,
		      rix_test_fault_plan *plan)
{
	pthread_mutex_lock(&f->mu);
	int is[RIX_TEST_FAULT_OPS] = { 0 };
	is[RIX_TEST_FAULT_ANY] = 1;
	is[op] = 1;
	if (op == RIX_TEST_FAULT_WRITE) {
		is[RIX_TEST_FAULT_SYNC] = 1;
		is[RIX_TEST_FAULT_RENAME] = renames;
	}
	for (int k = 0; k < RIX_TEST_FAULT_OPS; k++)
		f->count[k] += is[k];
	*plan = f->plan;
	int fails = 0;
	if (plan->n > 0 && is[plan->op]) {
		long c = f->count[plan->op];
		fails = plan->mode == RIX_TEST_FAULT_ONCE ? c == plan->n : c >= plan->n;
	}
	if (fails)
		f->injected++;
	void (*on_call)(void *, rix_test_fault_op, rix_file_type) = f->on_call;
	void *payload = f->on_call_payload;
	pthread_mutex_unlock(&f->mu);
	if (on_call != NULL)
		on_call(payload, op, t);
	return fails ? (int)plan->op : NO_FAULT;
}

/* The error of a fault on an operation of kind op (the call's own kind). */
static int fault_error(const rix_test_fault_plan *plan, rix_test_fault_op op, rix_file_type t, const char *name)
{
	int spc = plan->effect == RIX_TEST_FAULT_ENOSPC && op == RIX_TEST_FAULT_WRITE;
	return rix_error_set(spc ? RIX_ENOSPC : RIX_EIO, "fault: injected %s (%s %s, %s) on %s %.16s",
			     spc ? "no space left" : "I/O error", rix_test_fault_op_name(plan->op),
			     rix_test_fault_mode_name(plan->mode), rix_test_fault_effect_name(plan->effect),
			     rix_file_type_name(t), t == RIX_FILE_CONFIG || name == NULL ? "" : name);
}

struct entry {
	char name[65];
	uint64_t size;
};

struct collected {
	struct entry *v;
	size_t n, cap;
};

static int collect(void *arg, const char *name, uint64_t size)
{
	struct collected *c = arg;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		struct entry *v = realloc(c->v, cap * sizeof(*v));
		if (v == NULL)
			return rix_error_set(RIX_ENOMEM, "fault: out of memory listing");
		c->v = v;
		c->cap = cap;
	}
	snprintf(c->v[c->n].name, sizeof(c->v[c->n].name), "%s", name);
	c->v[c->n++].size = size;
	return 0;
}

static int fb_list(void *self, rix_file_type t, rix_backend_list_fn fn, void *arg)
{
	fault_backend *fb = self;
	rix_test_fault_plan plan;
	int fault = count_call(fb->f, RIX_TEST_FAULT_LIST, t, 0, &plan);
	if (fault == NO_FAULT)
		return rix_backend_list(fb->inner, t, fn, arg);
	if (plan.effect != RIX_TEST_FAULT_SHORT)
		return fault_error(&plan, RIX_TEST_FAULT_LIST, t, NULL);
	/* A listing cut off: the first half of the entries, then the error. */
	struct collected c = { 0 };
	int rc = rix_backend_list(fb->inner, t, collect, &c);
	for (size_t i = 0; rc == 0 && i < c.n / 2; i++)
		rc = fn(arg, c.v[i].name, c.v[i].size);
	free(c.v);
	return rc != 0 ? rc : fault_error(&plan, RIX_TEST_FAULT_LIST, t, NULL);
}

static int fb_stat(void *self, rix_file_type t, const char *name, uint64_t *size)
{
	fault_backend *fb = self;
	rix_test_fault_plan plan;
	if (count_call(fb->f, RIX_TEST_FAULT_STAT, t, 0, &plan) != NO_FAULT)
		return fault_error(&plan, RIX_TEST_FAULT_STAT, t, name);
	return rix_backend_stat(size, fb->inner, t, name);
}

static int fb_read(void *self, rix_file_type t, const char *name, uint64_t off, void *buf, size_t len)
{
	fault_backend *fb = self;
	rix_test_fault_plan plan;
	log_read(fb->f, t, name, off, len);
	if (count_call(fb->f, RIX_TEST_FAULT_READ, t, 0, &plan) == NO_FAULT)
		return rix_backend_read(fb->inner, t, name, off, buf, len);
	if (plan.effect != RIX_TEST_FAULT_SHORT)
		return fault_error(&plan, RIX_TEST_FAULT_READ, t, name);
	/* A file that ends early: half the bytes, the rest zero, and the error a backend gives. */
	size_t half = len / 2;
	memset((uint8_t *)buf + half, 0, len - half);
	int rc = half > 0 ? rix_backend_read(fb->inner, t, name, off, buf, half) : 0;
	if (rc != 0)
		return rc;
	return rix_error_set(RIX_ECORRUPT, "fault: injected short read (%s %s): %s %.16s ends after %zu of %zu bytes",
			     rix_test_fault_op_name(plan.op), rix_test_fault_mode_name(plan.mode), rix_file_type_name(t),
			     t == RIX_FILE_CONFIG ? "" : name, half, len);
}

static int fb_write(void *self, rix_file_type t, const char *name, const void *data, size_t n)
{
	fault_backend *fb = self;
	rix_test_fault_plan plan;
	int fault = count_call(fb->f, RIX_TEST_FAULT_WRITE, t, 0, &plan);
	if (fault == NO_FAULT)
		return rix_backend_write(fb->inner, t, name, data, n);
	if (fault == (int)RIX_TEST_FAULT_SYNC) {
		int rc = rix_backend_write(fb->inner, t, name, data, n);
		if (rc != 0)
			return rc;
	}
	return fault_error(&plan, RIX_TEST_FAULT_WRITE, t, name);
}

static int fb_write_file(void *self, rix_file_type t, const char *name, int fd, const char *path, uint64_t size,
			 bool *taken)
{
	fault_backend *fb = self;
	rix_test_fault_plan plan;
	if (fb->f->copy)
		path = NULL;
	int fault = count_call(fb->f, RIX_TEST_FAULT_WRITE, t, path != NULL, &plan);
	if (fault == NO_FAULT)
		return rix_backend_write_file(taken, fb->inner, t, name, fd, path, size);
	if (fault == (int)RIX_TEST_FAULT_SYNC) {
		int rc = rix_backend_write_file(taken, fb->inner, t, name, fd, path, size);
		if (rc != 0)
			return rc;
	}
	return fault_error(&plan, RIX_TEST_FAULT_WRITE, t, name);
}

static int fb_remove(void *self, rix_file_type t, const char *name)
{
	fault_backend *fb = self;
	rix_test_fault_plan plan;
	if (count_call(fb->f, RIX_TEST_FAULT_REMOVE, t, 0, &plan) != NO_FAULT)
		return fault_error(&plan, RIX_TEST_FAULT_REMOVE, t, name);
	return rix_backend_remove(fb->inner, t, name);
}

static const char *fb_temp_dir(void *self)
{
	return rix_backend_temp_dir(((fault_backend *)self)->inner);
}

static void fb_close(void *self)
{
	fault_backend *fb = self;
	rix_backend_free(fb->inner);
	rix_free(fb);
}

static const rix_backend_ops fault_ops = {
	.kind = "fault",
	.list = fb_list,
	.stat = fb_stat,
	.read = fb_read,
	.write = fb_write,
	.write_file = fb_write_file,
	.remove = fb_remove,
	.temp_dir = fb_temp_dir,
	.close = fb_close,
};

int rix_test_fault_backend(rix_backend **out, rix_backend *inner, rix_test_fault *f)
{
	*out = NULL;
	fault_backend *fb = rix_malloc(sizeof(*fb));
	if (fb == NULL)
		return rix_error_set(RIX_ENOMEM, "fault: out of memory");
	fb->inner = inner;
	fb->f = f;
	int rc = rix_backend_new(out, &fault_ops, fb);
	if (rc != 0)
		rix_free(fb);
	return rc;
}
