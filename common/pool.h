/*
 * common/pool.h — the one way rix starts worker threads (private to the library).
 *
 * A job is written so that any number of workers finishes it: each pulls work from shared
 * state (a counter under a lock, an atomic) until none is left. The calling thread is worker 0,
 * so a job always makes progress even when no thread can be started.
 */
#ifndef RIX_COMMON_POOL_H
#define RIX_COMMON_POOL_H

/* Workers to use: want, or one per online CPU when want is 0; then at most max (max >= 1). */
unsigned rix__pool_size(unsigned want, unsigned max);

/*
 * Runs fn(arg) on n workers: n - 1 new threads and the calling thread, and returns when all
 * have returned. Threads that cannot be started are not (fewer workers do the job).
 * @return the number of workers that ran (1..n).
 */
unsigned rix__pool_run(unsigned n, void *(*fn)(void *arg), void *arg);

#endif
