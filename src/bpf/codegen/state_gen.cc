// State across probes: a state pipeline's program stores a value under its keys
// (GenRemember), and the query's programs read it back before their `where` (GenStateReads).
// Each state pipeline has a hash map of its own, kMapState0 + its index: key -> {value, time}.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "bpf/codegen/codegen.h"
#include "bpf/codegen/gen_context.h"

namespace fay::bpf {

void GenRemember(Gen& g) {
  Emitter& e = g.e;
  const Plan& plan = g.plan;
  const int map = kMapState0 + g.attach.state;
  if (plan.predicate) {
    e.Comment("where " + plan.predicate->text);
    GenIntExpr(g, *plan.predicate);
    e.JmpIfImm(BPF_JEQ, R7, 0, g.exit_label);
  }
  GenSample(g);
  GenBuildKey(g);
  e.Comment(fmt::format("remember {} as {}", plan.remember_value->text, plan.remember_name));
  const auto value_off = static_cast<int16_t>(plan.key_size);
  const int time_at = plan.value_size - 8;  // past the value: 8 bytes, or a string's
  if (plan.remember_value->type.kind == TypeKind::kString) {
    for (int w = 0; w < time_at / 8; ++w)
      e.StoreImm(8, R9, static_cast<int16_t>(value_off + 8 * w), 0);
    GenStringExpr(g, *plan.remember_value, value_off, time_at);
  } else {
    GenIntExpr(g, *plan.remember_value);
    e.Store(8, R9, value_off, R7);
  }
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Store(8, R9, static_cast<int16_t>(value_off + time_at), R0);
  e.LdMap(R1, map);
  e.Mov(R2, R9);
  e.Mov(R3, R9);
  e.AluImm(BPF_ADD, R3, value_off);
  e.MovImm(R4, BPF_ANY);
  e.Call(BPF_FUNC_map_update_elem);
  // Only a full hash map refuses; the LRU map of a `for` pipeline evicts its oldest instead.
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  GenBumpStat(g, kStatStateFull);
}

// A string key's width as it was remembered: its type's (str(p, 20): 20, with the NUL), not
// the slot's, which is rounded up to 8.
int StateKeyWidth(const Slot& slot) {
  return slot.type.str_len > 0 ? std::min(slot.size, slot.type.str_len) : slot.size;
}

void GenStateReads(Gen& g) {
  Emitter& e = g.e;
  const auto& reads = g.plan.state_reads;
  if (reads.empty()) return;
  // Every read's value, held on the stack to the end of the program; a string's in scratch.
  int str_at = g.state_str_base;
  for (const Expr* read : reads) {
    g.state_slots.push_back(g.AllocTemp());
    const bool str = read->type.kind == TypeKind::kString;
    g.state_strs.push_back(str ? str_at : -1);
    if (str) str_at += g.plan.states[static_cast<size_t>(read->state)]->value_size - 8;
  }
  // Every read's key, in the state's layout (int keys 8 bytes, string keys their width), side
  // by side at the start of scratch: the query's own key is built there only after the reads.
  std::vector<int16_t> key_at;
  int at = 0;
  for (const Expr* read : reads) {
    key_at.push_back(static_cast<int16_t>(at));
    at += (g.plan.states[static_cast<size_t>(read->state)]->key_size + 7) & ~7;
  }
  Label missing = e.NewLabel(), all_found = e.NewLabel();
  for (size_t r = 0; r < reads.size(); ++r) {
    const Expr& read = *reads[r];
    const Plan& state = *g.plan.states[static_cast<size_t>(read.state)];
    e.Comment("state read " + read.text);
    for (size_t k = 0; k < read.kids.size() && k < state.keys.size(); ++k) {
      const Slot& slot = state.keys[k];
      const int off = key_at[r] + slot.offset;
      if (slot.type.kind == TypeKind::kString) {
        // Zeroed first, then at most the remembered key's width: compared as it was stored.
        for (int w = 0; w < slot.size / 8; ++w)
          e.StoreImm(8, R9, static_cast<int16_t>(off + 8 * w), 0);
        GenStringExpr(g, *read.kids[k], off, StateKeyWidth(slot));
      } else {
        GenIntExpr(g, *read.kids[k]);
        e.Store(8, R9, static_cast<int16_t>(off), R7);
      }
    }
    e.LdMap(R1, kMapState0 + read.state);
    e.Mov(R2, R9);
    e.AluImm(BPF_ADD, R2, key_at[r]);
    e.Call(BPF_FUNC_map_lookup_elem);
    // An optional read (`until`) that finds nothing reads 0 and goes on.
    Label zero = read.optional ? e.NewLabel() : missing, next = e.NewLabel();
    e.JmpIfImm(BPF_JEQ, R0, 0, zero);
    const int time_at = state.value_size - 8;
    if (g.state_strs[r] >= 0) {
      for (int w = 0; w < time_at / 8; ++w) {
        e.Load(8, R7, R0, static_cast<int16_t>(8 * w));
        e.Store(8, R9, static_cast<int16_t>(g.state_strs[r] + 8 * w), R7);
      }
    } else {
      e.Load(8, R7, R0, 0);
      e.Store(8, R10, g.state_slots[r], R7);
    }
    if (state.remember_ttl_ns) {
      // Kept for its time: older values read as missing (the LRU map drops them in time).
      e.Load(8, R7, R0, static_cast<int16_t>(time_at));
      e.Call(BPF_FUNC_ktime_get_ns);
      e.Alu(BPF_SUB, R0, R7);
      e.LdImm64(R1, state.remember_ttl_ns);
      e.JmpIf(BPF_JGT, R0, R1, zero);
    }
    if (read.optional) {
      e.Jmp(next);
      e.Bind(zero);
      if (g.state_strs[r] >= 0)
        for (int w = 0; w < time_at / 8; ++w)
          e.StoreImm(8, R9, static_cast<int16_t>(g.state_strs[r] + 8 * w), 0);
      else
        e.StoreImm(8, R10, g.state_slots[r], 0);
    }
    e.Bind(next);
  }
  // Only a read that must find its value has somewhere to go when it does not (the verifier
  // refuses code nothing reaches).
  if (std::any_of(reads.begin(), reads.end(), [](const Expr* r) { return !r->optional; })) {
    e.Jmp(all_found);
    e.Bind(missing);
    GenBumpStat(g, kStatNoState);
    e.Jmp(g.exit_label);
  }
  e.Bind(all_found);
  // Taken only once every read found its value, so two reads of one value both see it.
  for (size_t r = 0; r < reads.size(); ++r) {
    const Expr& read = *reads[r];
    // An optional read never takes its value: it reads whether something is there.
    if (read.optional || g.plan.states[static_cast<size_t>(read.state)]->remember_ttl_ns) continue;
    e.LdMap(R1, kMapState0 + read.state);
    e.Mov(R2, R9);
    e.AluImm(BPF_ADD, R2, key_at[r]);
    e.Call(BPF_FUNC_map_delete_elem);
  }
}

}  // namespace fay::bpf
