// Credentials and channels. Mutual TLS with the operator's CA, or plaintext only when asked for
// by name (--insecure). Keepalive pings every second on both sides: a peer that vanishes
// without closing its connection (a partition, a host that lost power) is noticed in about
// three seconds, which is the agents' lease on a query whose caller is gone.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "cluster/tls_files.h"
#include "common/status.h"

namespace fay::cluster {

// Either all three files or --insecure; the files must be readable.
Status CheckTls(const TlsFiles& tls);
Expected<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const TlsFiles& tls);
Expected<std::shared_ptr<grpc::Channel>> Connect(const std::string& address, const TlsFiles& tls);
// Keepalive and message-size settings for a server.
void ConfigureServer(grpc::ServerBuilder* b);

// A gRPC status as one phrase for the coverage line ("connection refused", "deadline").
std::string Reason(const grpc::Status& st);

}  // namespace fay::cluster
