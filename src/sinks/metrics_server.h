// The HTTP endpoint Prometheus scrapes: GET /metrics renders a MetricsRegistry, in OpenMetrics
// when the scraper asks for it (Accept: application/openmetrics-text), else in Prometheus's
// text format. Served by cpp-httplib on its own threads.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "sinks/metrics.h"

namespace httplib {
class Server;
}

namespace fay::sinks {

class MetricsServer {
 public:
  // Listens on ADDR:PORT (port 0: any free one) and only there.
  static Expected<std::unique_ptr<MetricsServer>> Start(const std::string& listen,
                                                        const MetricsRegistry* registry);
  ~MetricsServer();
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace fay::sinks
