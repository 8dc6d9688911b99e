#include "schema/probe.h"

namespace fay {

const Field* ProbeInfo::FindField(const std::string& field_name) const {
  for (const auto& f : fields)
    if (f.name == field_name) return &f;
  return nullptr;
}

}  // namespace fay
