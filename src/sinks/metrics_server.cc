#include "sinks/metrics_server.h"

#include <httplib.h>

#include <fmt/format.h>

namespace fay::sinks {

Expected<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen,
                                                              const MetricsRegistry* registry) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return Error(Code::kInvalidArgument,
                 fmt::format("--metrics {}: expected ADDR:PORT, e.g. 127.0.0.1:9464", listen));
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    port = -1;
  }
  if (port < 0 || port > 65535)
    return Error(Code::kInvalidArgument, fmt::format("--metrics {}: bad port", listen));
  auto s = std::unique_ptr<MetricsServer>(new MetricsServer());
  s->server_ = std::make_unique<httplib::Server>();
  s->server_->Get("/metrics", [registry](const httplib::Request& req, httplib::Response& res) {
    const bool om =
        req.get_header_value("Accept").find("application/openmetrics-text") != std::string::npos;
    res.set_content(registry->Render(om),
                    om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                       : "text/plain; version=0.0.4; charset=utf-8");
  });
  s->server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("fay agent: metrics at /metrics\n", "text/plain");
  });
  if (port == 0) {
    s->port_ = s->server_->bind_to_any_port(host);
    if (s->port_ < 0)
      return Error(Code::kIo, fmt::format("--metrics {}: cannot listen there", listen));
  } else {
    if (!s->server_->bind_to_port(host, port))
      return Error(Code::kIo, fmt::format("--metrics {}: cannot listen there (in use?)", listen));
    s->port_ = port;
  }
  s->thread_ = std::thread([srv = s->server_.get()] { srv->listen_after_bind(); });
  return s;
}

MetricsServer::~MetricsServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace fay::sinks
