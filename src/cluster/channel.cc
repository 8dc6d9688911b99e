#include "cluster/channel.h"

#include <mutex>

#include <absl/synchronization/mutex.h>
#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace fay::cluster {
namespace {

// A message is at most one window's state: 64 MiB is far past --max-keys of any sane query.
constexpr int kMaxMessage = 64 << 20;

Expected<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error(Code::kInvalidArgument, fmt::format("{} {}: cannot read it", flag, path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Status CheckTls(const TlsFiles& tls) {
  bool any = !tls.cert.empty() || !tls.key.empty() || !tls.ca.empty();
  if (tls.insecure && any)
    return Error(Code::kInvalidArgument, "--insecure and the --tls-* files cannot be combined");
  if (tls.insecure) return Status::Ok();
  if (tls.cert.empty() || tls.key.empty() || tls.ca.empty())
    return Error(Code::kInvalidArgument,
                 "mutual TLS needs --tls-cert, --tls-key and --tls-ca (docs/CLUSTER.md shows the "
                 "openssl commands); plaintext only with --insecure");
  for (const auto& [flag, path] :
       {std::pair{"--tls-cert", tls.cert}, {"--tls-key", tls.key}, {"--tls-ca", tls.ca}})
    FAY_RETURN_IF_ERROR(ReadPem(flag, path).status());
  return Status::Ok();
}

Expected<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const TlsFiles& tls) {
  FAY_RETURN_IF_ERROR(CheckTls(tls));
  if (tls.insecure) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  FAY_ASSIGN_OR_RETURN(o.pem_root_certs, ReadPem("--tls-ca", tls.ca));
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  FAY_ASSIGN_OR_RETURN(pair.private_key, ReadPem("--tls-key", tls.key));
  FAY_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem("--tls-cert", tls.cert));
  o.pem_key_cert_pairs.push_back(pair);
  return grpc::SslServerCredentials(o);
}

namespace {

// Debian builds Abseil with its mutex deadlock detector on, which keeps a lock graph for every
// mutex gRPC takes: in a node merging a thousand streams that graph was a tenth of its CPU.
// fay's own locks are std::mutex; the detector is for Abseil's developers, not for a daemon.
void QuietAbseil() {
  static std::once_flag once;
  std::call_once(once, [] { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); });
}

}  // namespace

Expected<std::shared_ptr<grpc::Channel>> Connect(const std::string& address, const TlsFiles& tls) {
  FAY_RETURN_IF_ERROR(CheckTls(tls));
  QuietAbseil();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, kMaxMessage);
  // A dead host is retried once a window, not by gRPC's own backoff in between.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (tls.insecure) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions o;
    FAY_ASSIGN_OR_RETURN(o.pem_root_certs, ReadPem("--tls-ca", tls.ca));
    FAY_ASSIGN_OR_RETURN(o.pem_private_key, ReadPem("--tls-key", tls.key));
    FAY_ASSIGN_OR_RETURN(o.pem_cert_chain, ReadPem("--tls-cert", tls.cert));
    creds = grpc::SslCredentials(o);
  }
  return grpc::CreateCustomChannel(address, creds, args);
}

void ConfigureServer(grpc::ServerBuilder* b) {
  QuietAbseil();
  b->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 1000);
  b->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
  b->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  b->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  b->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  // gRPC sets SO_REUSEPORT by default: a second agent on a taken port would start and share
  // its connections with the first. It must fail instead.
  b->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b->SetMaxReceiveMessageSize(1 << 20);  // requests are query text
  b->SetMaxSendMessageSize(kMaxMessage);
}

std::string Reason(const grpc::Status& st) {
  switch (st.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      if (st.error_message().find("onnection refused") != std::string::npos)
        return "connection refused";
      if (st.error_message().find("ssl") != std::string::npos ||
          st.error_message().find("SSL") != std::string::npos ||
          st.error_message().find("handshake") != std::string::npos)
        return "TLS handshake failed: " + st.error_message();
      return "unavailable: " + st.error_message();
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "deadline";
    case grpc::StatusCode::CANCELLED:
      return "cancelled";
    default:
      return st.error_message().empty() ? fmt::format("error {}", static_cast<int>(st.error_code()))
                                        : st.error_message();
  }
}

}  // namespace fay::cluster
