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
# count, how many of them write a general-purpose register (below) and the functions the
# instructions were in, then the medians (bench/RESULTS.md); gdb's own lines (where each step
# stopped) are filtered out by the grep. Pick a -benchtime with more
# calls than SKIP + COUNT; stepping (and disassembling each step) runs some 5,000 instructions a
# second.
import re
import statistics

import gdb

# Why registers written are counted: a register an instruction writes is freed only when a
# later write of the same register retires, behind the loads before it, so the registers a
# lookup writes bound how many lookups a core keeps in flight (on AMD Zen 4 more than its
# window of instructions: Limit/Gather1Work and Limit/Gather2Work in bench/RESULTS.md). Counted
# from the disassembly (AT&T, set below: the destination last), at most one a instruction: an
# instruction whose last operand is a general register other than %rsp, a pop, and those that
# write one implicitly (the one-operand multiplies and divides, %rdx:%rax counted once; cltq and
# its kin; leave; xadd, xchg, cmpxchg). Compares, bit tests, jumps, stores, pushes and
# prefetches write none; vector and mask registers are not counted.
_GPR = re.compile(r"^%(r[0-9a-z]+|e[a-z]{2}|[a-d][lhx]|[sd]il?|[sb]pl?)$")
_PREFIX = ("lock", "rep", "repz", "repnz", "repe", "repne", "notrack", "bnd", "data16")
_IMPLICIT = ("cltq", "cqto", "cltd", "cwtl", "cwtd", "leave", "rdtsc", "cpuid", "xadd", "xchg", "cmpxchg")
_NONE = ("j", "cmp", "test", "push", "call", "ret", "prefetch", "nop", "vzeroupper")


def writes_gpr(insn):
    """Whether the instruction text of `x/i` (AT&T) writes a general-purpose register."""
    m = re.match(r".*?:\s+(.*)$", insn.strip())
    if not m:
        return False
    words = re.sub(r"#.*|<.*?>", "", m.group(1)).split(None, 1)
    while len(words) == 2 and words[0] in _PREFIX:
        words = words[1].split(None, 1)
    if not words:
        return False
    op, args = words[0], (words[1].strip() if len(words) == 2 else "")
    if op.startswith(_IMPLICIT):
        return True
    if op.startswith(_NONE) or op in ("bt", "btl", "btq"):
        return False
    if op.startswith("pop"):
        return op not in ("popf", "popfq")
    if re.fullmatch(r"i?(mul|div)[bwlq]?", op) and "," not in args:
        return True
    dst = args.split(",")[-1].strip() if args else ""
    return bool(_GPR.match(dst)) and dst != "%rsp"


def count_call():
    """Steps the call the inferior stopped at the entry of; returns (count, registers written,
    {function: count})."""
    sp0 = int(gdb.parse_and_eval("$sp"))
    ret = int(gdb.parse_and_eval("*(unsigned long *)$sp"))
    n, w, where = 0, 0, {}
    while True:
        pc = int(gdb.parse_and_eval("$pc"))
        if pc == ret and int(gdb.parse_and_eval("$sp")) > sp0:
            return n, w, where
        name = gdb.newest_frame().name() or "?"
        where[name] = where.get(name, 0) + 1
        w += writes_gpr(gdb.execute("x/i $pc", to_string=True))
        gdb.execute("stepi", to_string=True)
        n += 1


class InsnCount(gdb.Command):
    """insn-count FUNCTION SKIP COUNT: instructions of COUNT calls of FUNCTION after SKIP."""

    def __init__(self):
        super().__init__("insn-count", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        func, skip, count = arg.split()
        gdb.execute("set pagination off")
        gdb.execute("set disassembly-flavor att")  # writes_gpr reads AT&T, whatever ~/.gdbinit says
        # At the entry itself (not past a prologue gdb may skip): the return address is at $sp.
        gdb.execute("break *" + func, to_string=True)
        gdb.execute("run", to_string=True)  # stopped at call 1
        if int(skip) > 0:
            gdb.execute("ignore 1 %d" % (int(skip) - 1), to_string=True)
            gdb.execute("continue", to_string=True)  # at call skip + 1
        counts, writes = [], []
        for i in range(int(count)):
            n, w, where = count_call()
            counts.append(n)
            writes.append(w)
            split = ", ".join("%s %d" % kv for kv in sorted(where.items(), key=lambda kv: -kv[1]))
            print("call %d: %d instructions, %d write a general register (%s)" % (i, n, w, split))
            if i + 1 < int(count):
                gdb.execute("continue", to_string=True)
        print("median: %g instructions a call, %g write a general register" %
              (statistics.median(counts), statistics.median(writes)))
        gdb.execute("kill", to_string=True)


InsnCount()
