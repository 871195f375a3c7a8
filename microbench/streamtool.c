/* streamtool: the stream probe as a valgrind tool (valgrind --tool=nrstreams, built by
 * registry/measure/streamtool.py against the installed valgrind's tool headers and libraries).
 *
 *   VALGRIND_LIB=DIR valgrind -q --tool=nrstreams --log-file=OUT [--every=K --window=W] PROG ...
 *
 * Lackey's probe prints a line per access that a reader parses back (hundreds of times slower
 * than the program); here every load and store calls sp_record of streamprobe.h directly, with
 * its key (instruction address, access slot) bound at translation time, so the per-access cost
 * is one helper call. Threads: valgrind runs one at a time; the running one is told by
 * track_start_client_code. At exit the report (streamprobe.h's format, with each stream's
 * function from the debug info) goes to the log.
 * Access slots are counted as lackey does: a store to the address the same instruction just
 * loaded, with the same size, is one access (lackey's "M").
 */
#include "pub_tool_basics.h"
#include "pub_tool_debuginfo.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"

#define SP_ZALLOC(bytes) VG_(calloc)("nrstreams", 1, (bytes))
#define SP_FREE(p) VG_(free)(p)
#define SP_PRINTF(...) VG_(printf)(__VA_ARGS__)
#define SP_SORT(base, n, size, cmp) VG_(ssort)((base), (n), (size), (cmp))
#define SP_WHERE(addr) function_of(addr)

static const HChar *function_of(Addr addr)
{
    const HChar *name;
    return VG_(get_fnname)(VG_(current_DiEpoch)(), addr, &name) ? name : "-";
}

#include "streamprobe.h"

static ThreadId running = 1;

static void started(ThreadId tid, ULong blocks_dispatched)
{
    running = tid;
}

static VG_REGPARM(2) void on_access(struct sp_key *k, Addr addr)
{
    sp_record(k, (int)running, addr, k->elem);
}

static Bool process_option(const HChar *arg)
{
    Long every, window;
    if (VG_BINT_CLO(arg, "--every", every, 1, 1LL << 40))
        sp_every = (uint64_t)every;
    else if (VG_BINT_CLO(arg, "--window", window, 1, 1LL << 40))
        sp_window = (uint64_t)window;
    else
        return False;
    return True;
}

static void print_usage(void)
{
    VG_(printf)("    --every=K --window=W   record one window of W accesses in every K [1, 1048576]\n");
}

static void print_debug_usage(void)
{
}

/* A call to on_access with this access's key before the statement that makes it (guarded
 * accesses only when their guard holds). */
static void add_access(IRSB *out, Addr iaddr, Int slot, IRExpr *addr, Int size, IRExpr *guard)
{
    struct sp_key *k = sp_lookup(((ULong)iaddr << 3) | (ULong)(slot & 7));
    if (!k->elem)
        k->elem = (unsigned)size;
    IRDirty *di = unsafeIRDirty_0_N(2, "on_access", VG_(fnptr_to_fnentry)(on_access),
                                    mkIRExprVec_2(mkIRExpr_HWord((HWord)k), addr));
    if (guard)
        di->guard = guard;
    addStmtToIRSB(out, IRStmt_Dirty(di));
}

static IRSB *instrument(VgCallbackClosure *closure, IRSB *in, const VexGuestLayout *layout,
                        const VexGuestExtents *vge, const VexArchInfo *archinfo, IRType gWordTy, IRType hWordTy)
{
    IRSB *out = deepCopyIRSBExceptStmts(in);
    Addr iaddr = 0;
    Int slot = 0;
    IRExpr *last_load = NULL;   /* this instruction's last access, when it was a plain load ... */
    Int last_size = 0;          /* ... of this size: a store to it merges (lackey's "M") */
    for (Int i = 0; i < in->stmts_used; i++) {
        IRStmt *st = in->stmts[i];
        if (!st || st->tag == Ist_NoOp)
            continue;
        switch (st->tag) {
        case Ist_IMark:
            iaddr = st->Ist.IMark.addr;
            slot = 0;
            last_load = NULL;
            break;
        case Ist_WrTmp:
            if (st->Ist.WrTmp.data->tag == Iex_Load) {
                IRExpr *load = st->Ist.WrTmp.data;
                add_access(out, iaddr, slot++, load->Iex.Load.addr, sizeofIRType(load->Iex.Load.ty), NULL);
                last_load = load->Iex.Load.addr;
                last_size = sizeofIRType(load->Iex.Load.ty);
            }
            break;
        case Ist_Store: {
            Int size = sizeofIRType(typeOfIRExpr(in->tyenv, st->Ist.Store.data));
            if (!(last_load && last_size == size && eqIRAtom(last_load, st->Ist.Store.addr)))
                add_access(out, iaddr, slot++, st->Ist.Store.addr, size, NULL);
            last_load = NULL;
            break;
        }
        case Ist_StoreG: {
            IRStoreG *sg = st->Ist.StoreG.details;
            add_access(out, iaddr, slot++, sg->addr, sizeofIRType(typeOfIRExpr(in->tyenv, sg->data)), sg->guard);
            last_load = NULL;
            break;
        }
        case Ist_LoadG: {
            IRLoadG *lg = st->Ist.LoadG.details;
            IRType type = Ity_INVALID, wide = Ity_INVALID;
            typeOfIRLoadGOp(lg->cvt, &wide, &type);
            add_access(out, iaddr, slot++, lg->addr, sizeofIRType(type), lg->guard);
            last_load = NULL;
            break;
        }
        case Ist_Dirty: {
            IRDirty *d = st->Ist.Dirty.details;
            if (d->mFx != Ifx_None)   /* a read-modify-write helper: one access, as lackey's "M" */
                add_access(out, iaddr, slot++, d->mAddr, d->mSize, NULL);
            last_load = NULL;
            break;
        }
        case Ist_CAS: {
            IRCAS *cas = st->Ist.CAS.details;
            Int size = sizeofIRType(typeOfIRExpr(in->tyenv, cas->dataLo)) * (cas->dataHi ? 2 : 1);
            add_access(out, iaddr, slot++, cas->addr, size, NULL);
            last_load = NULL;
            break;
        }
        default:
            break;
        }
        addStmtToIRSB(out, st);
    }
    return out;
}

static void post_clo_init(void)
{
}

static void fini(Int exitcode)
{
    sp_report();
}

static void pre_clo_init(void)
{
    VG_(details_name)("nrstreams");
    VG_(details_version)(NULL);
    VG_(details_description)("nodereg's memory-stream probe (Corredor 2011)");
    VG_(details_copyright_author)("nodereg");
    VG_(details_bug_reports_to)("nodereg");
    VG_(basic_tool_funcs)(post_clo_init, instrument, fini);
    VG_(needs_command_line_options)(process_option, print_usage, print_debug_usage);
    VG_(track_start_client_code)(started);
}

VG_DETERMINE_INTERFACE_VERSION(pre_clo_init)
