# scripts/insn_count.py — instructions one call of a function executes, counted by stepping it
# in gdb, for machines whose virtual CPU exposes no hardware counters to `perf stat` and whose
# instruction set valgrind does not run (AVX-512: the instance of the lookups such a CPU uses).
# x86-64 only (the return address is read from the stack).
#
#   gdb -q -batch -x scripts/insn_count.py \
#       -ex 'insn-count rix_master_index_lookup 2000 8' \
#       --args build-rel/bench/rix-bench -bench '^MasterLookup/N=1M/known$' -benchtime 3000x \
#       2>&1 | grep -E '^(call|median)'
#
# runs the program to the function's 2001st call, then steps that call and the 7 after it
# instruction by instruction into every callee until each returns, and prints for each call its
# count and the functions the instructions were in, then the median (bench/RESULTS.md); gdb's
# own lines (where each step stopped) are filtered out by the grep. Pick a -benchtime with more
# calls than SKIP + COUNT; stepping runs some 10,000 instructions a second.
import statistics

import gdb


def count_call():
    """Steps the call the inferior stopped at the entry of; returns (count, {function: count})."""
    sp0 = int(gdb.parse_and_eval("$sp"))
    ret = int(gdb.parse_and_eval("*(unsigned long *)$sp"))
    n, where = 0, {}
    while True:
        pc = int(gdb.parse_and_eval("$pc"))
        if pc == ret and int(gdb.parse_and_eval("$sp")) > sp0:
            return n, where
        name = gdb.newest_frame().name() or "?"
        where[name] = where.get(name, 0) + 1
        gdb.execute("stepi", to_string=True)
        n += 1


class InsnCount(gdb.Command):
    """insn-count FUNCTION SKIP COUNT: instructions of COUNT calls of FUNCTION after SKIP."""

    def __init__(self):
        super().__init__("insn-count", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        func, skip, count = arg.split()
        gdb.execute("set pagination off")
        # At the entry itself (not past a prologue gdb may skip): the return address is at $sp.
        gdb.execute("break *" + func, to_string=True)
        gdb.execute("run", to_string=True)  # stopped at call 1
        if int(skip) > 0:
            gdb.execute("ignore 1 %d" % (int(skip) - 1), to_string=True)
            gdb.execute("continue", to_string=True)  # at call skip + 1
        counts = []
        for i in range(int(count)):
            n, where = count_call()
            counts.append(n)
            split = ", ".join("%s %d" % kv for kv in sorted(where.items(), key=lambda kv: -kv[1]))
            print("call %d: %d instructions (%s)" % (i, n, split))
            if i + 1 < int(count):
                gdb.execute("continue", to_string=True)
        print("median: %g instructions a call" % statistics.median(counts))
        gdb.execute("kill", to_string=True)


InsnCount()
