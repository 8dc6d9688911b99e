// In-probe partial aggregation: find or insert the key in the per-CPU hash (double-buffered with
// `every`), then update each aggregate's state in place. The byte layouts are query/agg_layout.h.
#include <fmt/format.h>

#include <cerrno>
#include <optional>

#include "bpf/codegen/gen_context.h"
#include "query/agg_layout.h"

namespace fay::bpf {
namespace {

void LoadConst(Emitter& e, Reg dst, int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX)
    e.MovImm(dst, static_cast<int32_t>(v));
  else
    e.LdImm64(dst, static_cast<uint64_t>(v));
}

// R0 = pointer to the value for the key at R9+0 in `map`, inserting zeroed states if absent.
// Jumps to `have` with it. An insert the kernel refuses is counted under its cause and ends the
// event, unless `fallback` is given: then it jumps there (the cache keeps the key instead).
void GenFindOrInsert(Gen& g, int map, Label have, std::optional<Label> fallback = std::nullopt) {
  Emitter& e = g.e;
  Label again = e.NewLabel(), refused = e.NewLabel(), busy = e.NewLabel();  // busy: no fallback
  e.LdMap(R1, map);
  e.Mov(R2, R9);
  e.Call(BPF_FUNC_map_lookup_elem);
  e.JmpIfImm(BPF_JNE, R0, 0, have);
  e.Comment("new key: copy the zeroed template in");
  e.StoreImm(4, R10, kFpKey, 0);
  GenLookupFpKey(g, g.map(kMapZero));
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Mov(R3, R0);
  e.LdMap(R1, map);
  e.Mov(R2, R9);
  e.MovImm(R4, BPF_NOEXIST);
  e.Call(BPF_FUNC_map_update_elem);
  e.JmpIfImm(BPF_JEQ, R0, 0, again);
  e.JmpIfImm(BPF_JEQ, R0, -EEXIST, again);
  e.JmpIfImm(BPF_JNE, R0, -E2BIG, refused);
  GenBumpStat(g, kStatMapFull);
  e.Jmp(g.exit_label);
  e.Bind(refused);
  // Not a full map: -ENOMEM when a probe in a context that cannot refill the map's free list
  // (the scheduler's tracepoints) inserts several new keys in a row, -EBUSY when it nests on
  // a CPU inside another probe's update. The key may still fit in the cache.
  if (fallback) {
    e.Jmp(*fallback);
  } else {
    e.JmpIfImm(BPF_JEQ, R0, -EBUSY, busy);
    GenBumpStat(g, kStatMapErrors);
    e.Jmp(g.exit_label);
    e.Bind(busy);
    GenBumpStat(g, kStatMapBusy);
    e.Jmp(g.exit_label);
  }
  e.Bind(again);
  e.LdMap(R1, map);
  e.Mov(R2, R9);
  e.Call(BPF_FUNC_map_lookup_elem);
  e.JmpIfImm(BPF_JNE, R0, 0, have);
  // Inserted, yet gone: user space cleared the window in between. Counted, not silent.
  GenBumpStat(g, kStatMapErrors);
  e.Jmp(g.exit_label);
}

// *(u64 *)(R8 + off + R3 * 8) += 1 when R3 <= max_index.
void GenBumpBucket(Gen& g, int off, int max_index) {
  Emitter& e = g.e;
  Label skip = e.NewLabel();
  e.JmpIfImm(BPF_JGT, R3, max_index, skip);
  e.AluImm(BPF_LSH, R3, 3);
  e.Mov(R1, R8);
  e.Alu(BPF_ADD, R1, R3);
  e.Load(8, R2, R1, static_cast<int16_t>(off));
  e.AluImm(BPF_ADD, R2, 1);
  e.Store(8, R1, static_cast<int16_t>(off), R2);
  e.Bind(skip);
}

void GenMix64(Emitter& e, Reg x) {
  e.Mov(R2, x);
  e.AluImm(BPF_RSH, R2, 30);
  e.Alu(BPF_XOR, x, R2);
  e.LdImm64(R2, 0xbf58476d1ce4e5b9ULL);
  e.Alu(BPF_MUL, x, R2);
  e.Mov(R2, x);
  e.AluImm(BPF_RSH, R2, 27);
  e.Alu(BPF_XOR, x, R2);
  e.LdImm64(R2, 0x94d049bb133111ebULL);
  e.Alu(BPF_MUL, x, R2);
  e.Mov(R2, x);
  e.AluImm(BPF_RSH, R2, 31);
  e.Alu(BPF_XOR, x, R2);
}

void GenDistinct(Gen& g, const AggItem& item, int off) {
  Emitter& e = g.e;
  if (item.arg->type.kind == TypeKind::kString) {
    int cap = std::min(item.arg->type.str_len > 0 ? item.arg->type.str_len : 64, kStrBufSize);
    int words = (cap + 7) / 8;
    int buf = g.AllocStr();
    for (int w = 0; w < words; ++w) e.StoreImm(8, R9, static_cast<int16_t>(buf + 8 * w), 0);
    GenStringExpr(g, *item.arg, buf, cap);
    e.MovImm(R7, 0);
    for (int w = 0; w < words; ++w) {
      e.Load(8, R1, R9, static_cast<int16_t>(buf + 8 * w));
      e.Alu(BPF_XOR, R7, R1);
      GenMix64(e, R7);
    }
    g.FreeStr();
  } else {
    GenIntExpr(g, *item.arg);
    GenMix64(e, R7);
  }
  // R3 = register index (top bits), R4 = rank of the rest.
  e.Mov(R3, R7);
  e.AluImm(BPF_RSH, R3, 64 - kHllBits);
  e.Mov(R1, R7);
  e.AluImm(BPF_LSH, R1, kHllBits);
  Label nonzero = e.NewLabel(), have_rank = e.NewLabel(), skip = e.NewLabel();
  e.JmpIfImm(BPF_JNE, R1, 0, nonzero);
  e.MovImm(R4, 64 - kHllBits + 1);
  e.Jmp(have_rank);
  e.Bind(nonzero);
  GenLog2(g, R1, R4);
  e.AluImm(BPF_NEG, R4, 0);
  e.AluImm(BPF_ADD, R4, 64);  // 1 + leading zeros = 64 - floor(log2)
  e.Bind(have_rank);
  e.JmpIfImm(BPF_JGT, R3, kHllRegs - 1, skip);
  e.Mov(R1, R8);
  e.Alu(BPF_ADD, R1, R3);
  e.Load(1, R2, R1, static_cast<int16_t>(off));
  e.JmpIf(BPF_JLE, R4, R2, skip);
  e.Store(1, R1, static_cast<int16_t>(off), R4);
  e.Bind(skip);
}

void GenUpdate(Gen& g, const AggSlot& slot) {
  Emitter& e = g.e;
  const AggItem& item = *slot.item;
  int16_t off = static_cast<int16_t>(slot.offset);
  e.Comment(fmt::format("update {}", item.name));
  switch (item.func) {
    case AggFunc::kCount:
      e.Load(8, R1, R8, off);
      e.AluImm(BPF_ADD, R1, 1);
      e.Store(8, R8, off, R1);
      return;
    case AggFunc::kSum:
      GenIntExpr(g, *item.arg);
      e.Load(8, R1, R8, off);
      e.Alu(BPF_ADD, R1, R7);
      e.Store(8, R8, off, R1);
      return;
    case AggFunc::kAvg:
      GenIntExpr(g, *item.arg);
      e.Load(8, R1, R8, off);
      e.Alu(BPF_ADD, R1, R7);
      e.Store(8, R8, off, R1);
      e.Load(8, R1, R8, static_cast<int16_t>(off + 8));
      e.AluImm(BPF_ADD, R1, 1);
      e.Store(8, R8, static_cast<int16_t>(off + 8), R1);
      return;
    case AggFunc::kMin:
    case AggFunc::kMax: {
      GenIntExpr(g, *item.arg);
      Label set = e.NewLabel(), skip = e.NewLabel();
      e.Load(8, R1, R8, off);
      e.JmpIfImm(BPF_JEQ, R1, 0, set);
      e.Load(8, R2, R8, static_cast<int16_t>(off + 8));
      e.JmpIf(item.func == AggFunc::kMin ? BPF_JSGE : BPF_JSLE, R7, R2, skip);
      e.Bind(set);
      e.StoreImm(8, R8, off, 1);
      e.Store(8, R8, static_cast<int16_t>(off + 8), R7);
      e.Bind(skip);
      return;
    }
    case AggFunc::kHist: {
      GenIntExpr(g, *item.arg);
      Label bump = e.NewLabel(), pos = e.NewLabel();
      e.MovImm(R3, 0);
      e.JmpIfImm(BPF_JSLT, R7, 0, bump);
      e.MovImm(R3, 1);
      e.JmpIfImm(BPF_JEQ, R7, 0, bump);
      e.Bind(pos);
      e.Mov(R4, R7);
      GenLog2(g, R4, R3);
      e.AluImm(BPF_ADD, R3, 2);
      e.Bind(bump);
      GenBumpBucket(g, off, kHistSlots - 1);
      return;
    }
    case AggFunc::kLhist: {
      GenIntExpr(g, *item.arg);
      int nb = static_cast<int>((item.hi - item.lo) / item.step);
      Label bump = e.NewLabel();
      e.MovImm(R3, 0);
      LoadConst(e, R1, item.lo);
      e.JmpIf(BPF_JSLT, R7, R1, bump);
      e.MovImm(R3, nb + 1);
      LoadConst(e, R1, item.hi);
      e.JmpIf(BPF_JSGE, R7, R1, bump);
      e.Mov(R3, R7);
      LoadConst(e, R1, item.lo);
      e.Alu(BPF_SUB, R3, R1);
      LoadConst(e, R1, item.step);
      e.Alu(BPF_DIV, R3, R1);
      e.AluImm(BPF_ADD, R3, 1);
      e.Bind(bump);
      GenBumpBucket(g, off, nb + 1);
      return;
    }
    case AggFunc::kQuantile: {
      GenIntExpr(g, *item.arg);
      Label bump = e.NewLabel(), small = e.NewLabel();
      e.MovImm(R3, 0);
      e.JmpIfImm(BPF_JSLT, R7, 0, bump);
      e.Mov(R3, R7);
      e.JmpIfImm(BPF_JSLT, R7, kQuantSub, bump);
      e.Bind(small);
      e.Mov(R4, R7);
      GenLog2(g, R4, R3);  // R3 = k >= kQuantSubBits
      e.AluImm(BPF_SUB, R3, kQuantSubBits);
      e.Mov(R1, R7);
      e.Alu(BPF_RSH, R1, R3);
      e.AluImm(BPF_AND, R1, kQuantSub - 1);
      e.AluImm(BPF_LSH, R3, kQuantSubBits);
      e.AluImm(BPF_ADD, R3, kQuantSub);
      e.Alu(BPF_ADD, R3, R1);
      e.Bind(bump);
      GenBumpBucket(g, off, kQuantSlots - 1);
      return;
    }
    case AggFunc::kDistinct:
      GenDistinct(g, item, off);
      return;
  }
}

// Tries the direct-mapped per-CPU cache for the key at R9+0. On a hit jumps to `have` with
// R0 = the states; on a collision falls through to the hash map. A free slot is claimed only
// after the key has a place in the hash map, so the cache never holds more keys than
// --max-keys allows and a full map is counted exactly as without the cache. When the hash map
// refuses the key for another reason than being full (no memory, nested), the slot is claimed
// anyway: user space merges cache-only keys like the others, and nothing is lost.
void GenCacheProbe(Gen& g, int map, int hash_map, Label have) {
  Emitter& e = g.e;
  const int words = g.agg().key_size / 8;
  Label miss = e.NewLabel(), claim = e.NewLabel(), hit = e.NewLabel(), inserted = e.NewLabel();
  e.Comment("aggregation cache: slot = hash(key)");
  e.MovImm(R1, 0);
  for (int w = 0; w < words; ++w) {
    e.Load(8, R2, R9, static_cast<int16_t>(8 * w));
    e.Alu(BPF_XOR, R1, R2);
    e.LdImm64(R2, 0x9e3779b97f4a7c15ULL);
    e.Alu(BPF_MUL, R1, R2);
  }
  e.AluImm(BPF_RSH, R1, 64 - kCacheBits);
  e.Store(4, R10, kFpKey, R1);
  GenLookupFpKey(g, map);
  e.JmpIfImm(BPF_JEQ, R0, 0, miss);
  e.Load(8, R1, R0, 0);
  e.JmpIfImm(BPF_JEQ, R1, 0, claim);
  for (int w = 0; w < words; ++w) {
    e.Load(8, R1, R0, static_cast<int16_t>(8 + 8 * w));
    e.Load(8, R2, R9, static_cast<int16_t>(8 * w));
    e.JmpIf(BPF_JNE, R1, R2, miss);
  }
  e.Jmp(hit);
  e.Bind(claim);
  e.Mov(R8, R0);
  GenFindOrInsert(g, hash_map, inserted, inserted);
  e.Bind(inserted);
  e.StoreImm(8, R8, 0, 1);
  for (int w = 0; w < words; ++w) {
    e.Load(8, R2, R9, static_cast<int16_t>(8 * w));
    e.Store(8, R8, static_cast<int16_t>(8 + 8 * w), R2);
  }
  e.Mov(R0, R8);
  e.Bind(hit);
  e.AluImm(BPF_ADD, R0, 8 + g.agg().key_size);
  e.Jmp(have);
  e.Bind(miss);
}

}  // namespace

void GenBumpStat(Gen& g, StatIndex which) {
  Emitter& e = g.e;
  Label skip = e.NewLabel();
  e.StoreImm(4, R10, kFpKey, 0);
  GenLookupFpKey(g, kMapStats);
  e.JmpIfImm(BPF_JEQ, R0, 0, skip);
  e.Load(8, R1, R0, static_cast<int16_t>(8 * which));
  e.AluImm(BPF_ADD, R1, 1);
  e.Store(8, R0, static_cast<int16_t>(8 * which), R1);
  e.Bind(skip);
}

void GenBuildKey(Gen& g) {
  Emitter& e = g.e;
  if (g.agg().keys.empty()) {
    e.StoreImm(8, R9, 0, 0);
    return;
  }
  for (const Slot& s : g.agg().keys) {
    e.Comment(fmt::format("key {} at +{}", s.name, s.offset));
    bool name_field =
        s.expr->kind == ExprKind::kField && (s.expr->name == "probe" || s.expr->name == "func");
    if (s.type.kind == TypeKind::kString && !name_field) {
      for (int w = 0; w < s.size / 8; ++w)
        e.StoreImm(8, R9, static_cast<int16_t>(s.offset + 8 * w), 0);
      GenStringExpr(g, *s.expr, s.offset, s.size);
    } else {
      GenIntExpr(g, *s.expr);
      e.Store(8, R9, static_cast<int16_t>(s.offset), R7);
    }
  }
}

void GenAggregate(Gen& g) {
  Emitter& e = g.e;
  GenBuildKey(g);
  Label have = e.NewLabel();
  if (g.plan.every_ns) {
    Label use_b = e.NewLabel();
    e.Comment("every: the control word picks the live window");
    e.StoreImm(4, R10, kFpKey, 0);
    GenLookupFpKey(g, kMapControl);
    e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
    e.Load(8, R1, R0, 0);
    e.JmpIfImm(BPF_JSET, R1, 1, use_b);
    if (g.use_cache) GenCacheProbe(g, g.map(kMapCacheA), g.map(kMapAggA), have);
    GenFindOrInsert(g, g.map(kMapAggA), have);
    e.Bind(use_b);
    if (g.use_cache) GenCacheProbe(g, g.map(kMapCacheB), g.map(kMapAggB), have);
    GenFindOrInsert(g, g.map(kMapAggB), have);
  } else {
    if (g.use_cache) GenCacheProbe(g, g.map(kMapCacheA), g.map(kMapAggA), have);
    GenFindOrInsert(g, g.map(kMapAggA), have);
  }
  e.Bind(have);
  e.Mov(R8, R0);
  for (const AggSlot& s : g.agg().aggs) GenUpdate(g, s);
}

void GenSelect(Gen& g) {
  Emitter& e = g.e;
  GenBuildKey(g);
  int payload = g.plan.key_size;
  // The record: the probe's index, the event's time (what `%T` prints, not when fay reads it),
  // then the selected columns.
  e.Comment("stream the event: reserve, fill, submit");
  e.LdMap(R1, kMapRing);
  e.MovImm(R2, kSelectHeader + payload);
  e.MovImm(R3, 0);
  e.Call(BPF_FUNC_ringbuf_reserve);
  Label got = e.NewLabel();
  e.JmpIfImm(BPF_JNE, R0, 0, got);
  GenBumpStat(g, kStatDropped);
  e.Jmp(g.exit_label);
  e.Bind(got);
  e.Mov(R8, R0);
  if (g.static_probe() >= 0)
    e.MovImm(R1, g.static_probe());
  else
    e.Load(8, R1, R10, kFpProbe);
  e.Store(8, R8, 0, R1);
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Store(8, R8, 8, R0);
  for (int w = 0; w < payload / 8; ++w) {
    e.Load(8, R1, R9, static_cast<int16_t>(8 * w));
    e.Store(8, R8, static_cast<int16_t>(kSelectHeader + 8 * w), R1);
  }
  e.Mov(R1, R8);
  e.MovImm(R2, 0);
  e.Call(BPF_FUNC_ringbuf_submit);
}

}  // namespace fay::bpf
