/*
 * common/pool.c — worker threads for index loading, the master index's in-place build and
 * check (see pool.h).
 */
#include <pthread.h>
#include <unistd.h>

#include "pool.h"

/* More threads than this never help these jobs (and bound the stack array below). */
#define POOL_MAX 256u

unsigned rix__pool_size(unsigned want, unsigned max)
{
	if (want == 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		want = c > 0 ? (unsigned)c : 1;
	}
	if (max == 0)
		max = 1;
	if (want > max)
		want = max;
	return want < POOL_MAX ? want : POOL_MAX;
}

unsigned rix__pool_run(unsigned n, void *(*fn)(void *arg), void *arg)
{
	pthread_t th[POOL_MAX];
	unsigned started = 0;
	if (n > POOL_MAX)
		n = POOL_MAX;
	for (unsigned i = 1; i < n; i++)
		if (pthread_create(&th[started], NULL, fn, arg) == 0)
			started++;
	fn(arg);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	return started + 1;
}
