/*
 * index/rcu.h — private to index/: read-copy-update for read-mostly published state.
 *
 * Readers bracket their use of published pointers with rix__rcu_read_lock/unlock, which cost
 * two plain stores to a per-thread slot (no atomic read-modify-write, no fence). A writer
 * publishes new state, then calls rix__rcu_synchronize(), which returns once every reader that
 * might still hold an old pointer has left its read section; the old state may then be freed.
 *
 * How the missing reader-side fence is made up for: the writer issues membarrier(2)
 * (MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a full memory barrier on every CPU executing
 * a thread of this process. After it, a reader that entered before the barrier is visible to
 * the writer's scan (its slot shows an odd sequence) and is waited for; one that enters after
 * it sees the new pointer. Where membarrier is unavailable (old kernel, seccomp) or under
 * ThreadSanitizer, readers use sequentially consistent stores and loads instead (correct,
 * slower).
 *
 * Read sections nest, are short, and must not call rix__rcu_synchronize (that would wait for
 * itself). Slots come from a static pool; threads beyond it share one counted slot.
 */
#ifndef RIX_INDEX_RCU_H
#define RIX_INDEX_RCU_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * The calling thread's reader state. seq: its slot's sequence when readers take the fast path
 * (membarrier in use and a slot claimed), NULL otherwise (not yet claimed, no slot free, or
 * seq_cst readers): then the out-of-line slow path does the work. depth: read sections open.
 * Initial-exec TLS: one %fs-relative access, no __tls_get_addr call in the shared library.
 */
struct rix__rcu_reader {
	_Atomic uint64_t *seq;
	int depth;
};
extern _Thread_local struct rix__rcu_reader rix__rcu_me __attribute__((tls_model("initial-exec")));

void rix__rcu_lock_slow(void);
void rix__rcu_unlock_slow(void);

/* The fast path's stores to the thread's own sequence (only it writes it: plain stores): odd on
 * entering the outermost section, even on leaving it. Always inlined: left to GCC 12, the
 * single master lookup's leaf took a register move more. */
static inline __attribute__((always_inline)) void rix__rcu_seq_enter(_Atomic uint64_t *seq)
{
	atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst); /* the section's loads stay after the store */
}

static inline __attribute__((always_inline)) void rix__rcu_seq_leave(_Atomic uint64_t *seq)
{
	atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1, memory_order_release);
}

/* Inline: a lookup's read section is a handful of instructions, not two calls (the fewer a
 * lookup executes, the more lookups' misses the core keeps in flight at once). */
static inline void rix__rcu_read_lock(void)
{
	if (rix__rcu_me.depth++ != 0)
		return;
	_Atomic uint64_t *seq = rix__rcu_me.seq;
	if (__builtin_expect(seq != NULL, 1))
		rix__rcu_seq_enter(seq);
	else
		rix__rcu_lock_slow();
}

static inline void rix__rcu_read_unlock(void)
{
	if (--rix__rcu_me.depth != 0)
		return;
	_Atomic uint64_t *seq = rix__rcu_me.seq;
	if (__builtin_expect(seq != NULL, 1))
		rix__rcu_seq_leave(seq);
	else
		rix__rcu_unlock_slow();
}

/*
 * The outermost read section of the fast path, for a leaf: a function that, calling nothing
 * before it ends the section with rix__rcu_read_unlock_leaf, keeps no value across a call in a
 * callee-saved register (a single lookup is bound by the registers it writes:
 * bench/RESULTS.md). false, and nothing taken, where rix__rcu_read_lock would call (no slot
 * claimed yet, seq_cst readers) or inside another section: the caller then takes
 * rix__rcu_read_lock out of line. A section begun here may also be ended by
 * rix__rcu_read_unlock (a callee the leaf hands it on to).
 */
static inline bool rix__rcu_read_lock_leaf(void)
{
	_Atomic uint64_t *seq = rix__rcu_me.seq;
	if (rix__rcu_me.depth != 0 || seq == NULL)
		return false;
	rix__rcu_me.depth = 1;
	rix__rcu_seq_enter(seq);
	return true;
}

/* Ends a section rix__rcu_read_lock_leaf began (its seq is set: a slot's, for good). */
static inline void rix__rcu_read_unlock_leaf(void)
{
	_Atomic uint64_t *seq = rix__rcu_me.seq;
	rix__rcu_me.depth = 0;
	rix__rcu_seq_leave(seq);
}

void rix__rcu_synchronize(void);

/* Whether the membarrier fast path is in use (for tests and benchmarks to report). */
int rix__rcu_fast(void);

#endif
