#include "probes/btf_fields.h"

#include <bpf/btf.h>
#include <fmt/format.h>

#include <mutex>
#include <vector>

#include "common/strings.h"

namespace fay {
namespace {

constexpr const char* kTaskPrefix = "curtask.";
constexpr size_t kMaxHops = 8;  // pointers followed; each costs the probe a read

// A struct's member names for a hint: task_struct has hundreds.
std::string Listed(const std::vector<std::string>& names) {
  constexpr size_t kShown = 30;
  if (names.size() <= kShown) return Join(names);
  return Join(std::vector<std::string>(names.begin(), names.begin() + kShown)) +
         fmt::format(", and {} more", names.size() - kShown);
}

std::vector<std::string> SplitDots(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '.')
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

// vmlinux BTF, parsed once per process (tens of ms), only by queries that name a type.
const btf* Vmlinux() {
  static std::once_flag once;
  static btf* vmlinux = nullptr;
  std::call_once(once, [] { vmlinux = btf__load_vmlinux_btf(); });
  return vmlinux;
}

// The type behind typedefs and const/volatile/restrict qualifiers.
int Resolve(const btf* b, int id) {
  for (int guard = 0; guard < 32 && id > 0; ++guard) {
    const btf_type* t = btf__type_by_id(b, id);
    if (!t) return -1;
    if (!btf_is_typedef(t) && !btf_is_mod(t)) return id;
    id = static_cast<int>(t->type);
  }
  return -1;
}

std::string TypeText(const btf* b, int id) {
  const btf_type* t = btf__type_by_id(b, id);
  if (!t) return "?";
  const char* name = btf__name_by_offset(b, t->name_off);
  if (btf_is_struct(t)) return fmt::format("struct {}", name);
  if (btf_is_union(t)) return fmt::format("union {}", name && *name ? name : "(anonymous)");
  if (btf_is_ptr(t)) return TypeText(b, Resolve(b, static_cast<int>(t->type))) + " *";
  if (btf_is_array(t)) return TypeText(b, Resolve(b, static_cast<int>(btf_array(t)->type))) + "[]";
  return name && *name ? name : "?";
}

struct Found {
  int type_id = -1;
  uint32_t offset = 0;  // bytes from the containing struct
  bool bitfield = false;
};

// A member of struct/union `id` by name, looking inside anonymous structs and unions too.
bool FindMember(const btf* b, int id, const std::string& name, Found* out,
                std::vector<std::string>* names) {
  const btf_type* t = btf__type_by_id(b, id);
  const btf_member* m = btf_members(t);
  for (int i = 0; i < btf_vlen(t); ++i) {
    const char* mname = btf__name_by_offset(b, m[i].name_off);
    const uint32_t bits = btf_member_bit_offset(t, i);
    if (!mname || !*mname) {
      const int inner = Resolve(b, static_cast<int>(m[i].type));
      const btf_type* it = btf__type_by_id(b, inner);
      if (it && (btf_is_struct(it) || btf_is_union(it)) && FindMember(b, inner, name, out, names)) {
        out->offset += bits / 8;
        return true;
      }
      continue;
    }
    if (names) names->push_back(mname);
    if (name == mname) {
      out->type_id = static_cast<int>(m[i].type);
      out->offset = bits / 8;
      out->bitfield = btf_member_bitfield_size(t, i) != 0 || bits % 8 != 0;
      return true;
    }
  }
  return false;
}

// Walks `members` from struct `id`: each pointer on the way starts a new hop.
Expected<Field> Walk(const btf* b, int id, const std::vector<std::string>& members,
                     const std::string& name, Field f) {
  f.name = name;
  uint32_t offset = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    id = Resolve(b, id);
    const btf_type* t = btf__type_by_id(b, id);
    if (!t || !(btf_is_struct(t) || btf_is_union(t)))
      return Error(
          Code::kInvalidArgument,
          fmt::format("'{}' is {}, which has no members\nread it without '.{}'",
                      Join(std::vector<std::string>(members.begin(), members.begin() + i), "."),
                      TypeText(b, id), members[i]));
    Found m;
    std::vector<std::string> names;
    if (!FindMember(b, id, members[i], &m, &names)) {
      std::vector<std::string> near = Nearest(names, members[i], 3);
      return Error(Code::kInvalidArgument,
                   fmt::format("{} has no member '{}'\n{}", TypeText(b, id), members[i],
                               near.empty() ? "its members: " + Listed(names)
                                            : "did you mean: " + Join(near)));
    }
    if (m.bitfield)
      return Error(Code::kInvalidArgument,
                   fmt::format("{}.{} is a bit field, which fay cannot read yet\nread a whole "
                               "member instead",
                               TypeText(b, id), members[i]));
    offset += m.offset;
    id = Resolve(b, m.type_id);
    const btf_type* mt = btf__type_by_id(b, id);
    const bool last = i + 1 == members.size();
    if (!last && mt && btf_is_ptr(mt)) {
      // Follow the pointer: the next member is read from where it points.
      f.hops.push_back(offset);
      offset = 0;
      if (f.hops.size() > kMaxHops)
        return Error(
            Code::kInvalidArgument,
            fmt::format("'{}' follows more than {} pointers\nname a shorter path", name, kMaxHops));
      id = Resolve(b, static_cast<int>(mt->type));
      continue;
    }
    if (!last) continue;  // an embedded struct: its members are at offset
    f.hops.push_back(offset);
    if (mt && btf_is_int(mt)) {
      const uint8_t enc = btf_int_encoding(mt);
      f.leaf_size = static_cast<int>(mt->size);
      f.type = Type::Int((enc & BTF_INT_SIGNED) != 0);
      if (f.leaf_size > 8)
        return Error(Code::kInvalidArgument, fmt::format("'{}' is a {}-byte integer\nfay reads "
                                                         "up to 8 bytes",
                                                         name, f.leaf_size));
    } else if (mt && (btf_is_enum(mt) || btf_is_enum64(mt))) {
      f.leaf_size = static_cast<int>(mt->size);
      f.type = Type::Int(true);
    } else if (mt && btf_is_ptr(mt)) {
      f.leaf_size = 8;
      f.type = Type::Int(false);
    } else if (mt && btf_is_array(mt)) {
      const struct btf_array* a = btf_array(mt);
      const btf_type* et = btf__type_by_id(b, Resolve(b, static_cast<int>(a->type)));
      if (!et || !btf_is_int(et) || et->size != 1)
        return Error(Code::kInvalidArgument,
                     fmt::format("'{}' is {}: only char arrays (strings) can be read\nname one "
                                 "of its elements' members instead",
                                 name, TypeText(b, id)));
      // A flexible array (char d_name[]) has no length of its own: as str() reads.
      f.leaf_size = a->nelems == 0 ? 64 : static_cast<int>(std::min<uint32_t>(a->nelems, 256));
      f.type = Type::Str(f.leaf_size);
    } else {
      std::vector<std::string> names;
      Found ignored;
      if (mt && (btf_is_struct(mt) || btf_is_union(mt))) FindMember(b, id, "", &ignored, &names);
      return Error(Code::kInvalidArgument,
                   fmt::format("'{}' is {}, not a value\n{}", name, TypeText(b, id),
                               names.empty() ? "name an int, a pointer or a char array"
                                             : "name one of its members: " + Listed(names)));
    }
  }
  f.c_type = TypeText(b, id);
  return f;
}

}  // namespace

bool IsTaskBtfName(const std::string& name) {
  return name.rfind(kTaskPrefix, 0) == 0;
}

Expected<Field> TaskBtfField(const std::string& name) {
  const btf* b = Vmlinux();
  if (!b)
    return Error(Code::kUnsupported,
                 "this kernel exposes no BTF (/sys/kernel/btf/vmlinux)\ncurtask needs "
                 "CONFIG_DEBUG_INFO_BTF");
  const int task = btf__find_by_name_kind(b, "task_struct", BTF_KIND_STRUCT);
  if (task <= 0) return Error(Code::kUnsupported, "the kernel's BTF has no struct task_struct");
  std::vector<std::string> members = SplitDots(name.substr(std::string(kTaskPrefix).size()));
  Field f;
  f.source = FieldSource::kTaskBtf;
  return Walk(b, task, members, name, f);
}

Expected<Field> StructBtfField(const Field& base, const std::string& name, FieldSource source) {
  // "struct __kernel_timespec *" -> "__kernel_timespec"
  std::string c = base.c_type;
  if (c.rfind("const ", 0) == 0) c = c.substr(6);
  if (c.rfind("struct ", 0) != 0 || c.back() != '*')
    return Error(Code::kNotFound, "not a struct pointer");
  std::string sname(Trim(c.substr(7, c.size() - 8)));
  const btf* b = Vmlinux();
  if (!b) return Error(Code::kUnsupported, "this kernel exposes no BTF (/sys/kernel/btf/vmlinux)");
  const int id = btf__find_by_name_kind(b, sname.c_str(), BTF_KIND_STRUCT);
  if (id <= 0)
    return Error(Code::kNotFound, fmt::format("the kernel's BTF has no struct {}", sname));
  std::vector<std::string> members = SplitDots(name.substr(base.name.size() + 1));
  Field f = base;
  f.source = source;
  f.hops.clear();
  return Walk(b, id, members, name, f);
}

}  // namespace fay
