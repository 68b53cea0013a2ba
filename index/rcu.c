/*
 * index/rcu.c — see rcu.h.
 *
 *   slots[NSLOTS]   one cache line each; a thread claims a free slot on its first read
 *                   section and releases it when it exits (pthread key destructor)
 *     .seq          even: outside any read section; odd: inside (bumped by 1 at the outermost
 *                   lock and again at its unlock)
 *     .owned        1 while a thread holds the slot
 *   overflow        readers of threads that found no free slot count themselves here with
 *                   atomic increments (the slow, always-correct path)
 *
 * synchronize(): full barrier on all CPUs (membarrier, or a local seq_cst fence in the slow
 * mode where readers are seq_cst already); then, for each owned slot whose seq is odd, wait
 * until it changes; then wait for the overflow count to drain. A reader that re-enters after
 * the barrier reads the new pointer, so waiting for a change of seq, not for even, is enough
 * and cannot starve.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rcu.h"

#if defined(__SANITIZE_THREAD__)
#define RIX_RCU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RIX_RCU_TSAN 1
#endif
#endif

#define NSLOTS 512

struct slot {
	_Atomic uint64_t seq;
	atomic_int owned;
	char pad[64 - sizeof(uint64_t) - sizeof(atomic_int)];
};

static _Alignas(64) struct slot slots[NSLOTS];
static _Alignas(64) atomic_long overflow;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static int fast; /* 1: membarrier registered; readers use relaxed stores */

struct tls {
	struct slot *slot; /* NULL: not yet claimed, or using overflow */
	int claimed;       /* 1 once a slot (or overflow) was chosen */
};
static _Thread_local struct tls me;
_Thread_local struct rix__rcu_reader rix__rcu_me;

/* At thread exit (the key's destructor, in the exiting thread). A read section after it (in
 * another destructor) counts itself in overflow: the slot may be another thread's by then. */
static void release_slot(void *p)
{
	struct slot *s = p;
	if (rix__rcu_me.depth == 0) {
		rix__rcu_me.seq = NULL;
		me.slot = NULL;
		me.claimed = 1;
	}
	if (s != NULL)
		atomic_store_explicit(&s->owned, 0, memory_order_release);
}

static void init(void)
{
	(void)pthread_key_create(&key, release_slot);
#if !defined(RIX_RCU_TSAN)
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
		fast = 1;
#endif
}

int rix__rcu_fast(void)
{
	pthread_once(&once, init);
	return fast;
}

static void claim(void)
{
	pthread_once(&once, init);
	me.claimed = 1;
	for (int i = 0; i < NSLOTS; i++) {
		int expect = 0;
		if (atomic_load_explicit(&slots[i].owned, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&slots[i].owned, &expect, 1)) {
			me.slot = &slots[i];
			(void)pthread_setspecific(key, me.slot);
			return;
		}
	}
	me.slot = NULL; /* all taken: use the overflow counter */
}

/* The outermost lock when rix__rcu_me.seq is NULL (depth already counted). */
void rix__rcu_lock_slow(void)
{
	if (!me.claimed) {
		claim();
		if (fast && me.slot != NULL) {
			/* From now on the inline path; this first time, its store here. */
			rix__rcu_me.seq = &me.slot->seq;
			rix__rcu_seq_enter(&me.slot->seq);
			return;
		}
	}
	struct slot *s = me.slot;
	if (s == NULL) {
		atomic_fetch_add(&overflow, 1);
		return;
	}
	uint64_t v = atomic_load_explicit(&s->seq, memory_order_relaxed) + 1;
	atomic_store_explicit(&s->seq, v, memory_order_seq_cst);
}

/* The outermost unlock when rix__rcu_me.seq is NULL: the slow lock was taken. */
void rix__rcu_unlock_slow(void)
{
	struct slot *s = me.slot;
	if (s == NULL) {
		atomic_fetch_sub(&overflow, 1);
		return;
	}
	uint64_t v = atomic_load_explicit(&s->seq, memory_order_relaxed) + 1;
	atomic_store_explicit(&s->seq, v, memory_order_release);
}

void rix__rcu_synchronize(void)
{
	pthread_once(&once, init);
	if (fast) {
		if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
			atomic_thread_fence(memory_order_seq_cst);
	} else {
		atomic_thread_fence(memory_order_seq_cst);
	}
	for (int i = 0; i < NSLOTS; i++) {
		struct slot *s = &slots[i];
		if (!atomic_load_explicit(&s->owned, memory_order_acquire))
			continue;
		uint64_t v = atomic_load_explicit(&s->seq, memory_order_seq_cst);
		if ((v & 1) == 0 || s == me.slot)
			continue;
		for (int spins = 0; atomic_load_explicit(&s->seq, memory_order_acquire) == v; spins++)
			if (spins > 64)
				sched_yield();
	}
	for (int spins = 0; atomic_load_explicit(&overflow, memory_order_acquire) != 0; spins++)
		if (spins > 64)
			sched_yield();
}
