// The TLS material of a cluster peer, apart from gRPC's headers (the CLI includes it).
#pragma once

#include <string>

namespace fay::cluster {

struct TlsFiles {
  std::string cert, key, ca;  // PEM files
  bool insecure = false;
};

}  // namespace fay::cluster
