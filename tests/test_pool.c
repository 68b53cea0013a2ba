/*
 * tests/test_pool.c — the worker pool (common/pool.c): how many workers a job gets, and that a
 * job written to pull its work finishes on any number of them, the calling thread among them.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/pool.h"

static void test_size(void **state)
{
	(void)state;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned want = cpus > 0 ? (unsigned)cpus : 1;
	assert_int_equal(rix__pool_size(0, 1000), want < 256 ? want : 256);
	assert_int_equal(rix__pool_size(0, 1), 1);
	assert_int_equal(rix__pool_size(3, 2), 2);
	assert_int_equal(rix__pool_size(3, 8), 3);
	assert_int_equal(rix__pool_size(5, 0), 1);
	assert_int_equal(rix__pool_size(100000, 100000), 256);
}

struct job {
	pthread_mutex_t mu;
	unsigned next, total, sum;
	pthread_t seen[8];
	unsigned nseen;
};

static void *work(void *arg)
{
	struct job *j = arg;
	pthread_mutex_lock(&j->mu);
	if (j->nseen < 8)
		j->seen[j->nseen++] = pthread_self();
	while (j->next < j->total) {
		unsigned k = j->next++;
		pthread_mutex_unlock(&j->mu);
		usleep(100); /* long enough for the others to join in */
		pthread_mutex_lock(&j->mu);
		j->sum += k;
	}
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

static void test_run(void **state)
{
	(void)state;
	for (unsigned n = 1; n <= 4; n++) {
		struct job j = { .mu = PTHREAD_MUTEX_INITIALIZER, .total = 1000 };
		assert_int_equal(rix__pool_run(n, work, &j), n);
		assert_int_equal(j.sum, 999 * 1000 / 2);
		assert_int_equal(j.nseen, n);
		int caller = 0;
		for (unsigned i = 0; i < j.nseen; i++)
			caller |= pthread_equal(j.seen[i], pthread_self());
		assert_true(caller);
		if (n == 1)
			assert_true(pthread_equal(j.seen[0], pthread_self()));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size),
		cmocka_unit_test(test_run),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
