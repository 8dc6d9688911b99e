// Each subcommand lives in its own cli/cmd_*.cc and registers itself on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace fay::cli {

// Registers the subcommand; the returned callback runs it and yields the process exit code.
using Runner = std::function<int()>;

Runner RegisterQuery(CLI::App& app);
Runner RegisterExplain(CLI::App& app);
Runner RegisterProbes(CLI::App& app);
Runner RegisterDoctor(CLI::App& app);
Runner RegisterInfo(CLI::App& app);
Runner RegisterDump(CLI::App& app);
Runner RegisterRecord(CLI::App& app);
Runner RegisterConvert(CLI::App& app);
Runner RegisterReplay(CLI::App& app);
Runner RegisterAgent(CLI::App& app);
Runner RegisterCluster(CLI::App& app);

}  // namespace fay::cli
