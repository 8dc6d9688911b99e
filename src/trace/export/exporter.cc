#include "trace/export/exporter.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "trace/reader.h"

namespace fay::trace {

Exporter::~Exporter() = default;

namespace {

// Owns the output FILE of a single-file exporter: closes it after the exporter finished.
class FileExporter : public Exporter {
 public:
  FileExporter(FILE* f, std::string path, std::unique_ptr<Exporter> inner)
      : f_(f), path_(std::move(path)), inner_(std::move(inner)) {}
  ~FileExporter() override {
    if (f_ && f_ != stdout) fclose(f_);
  }
  Status Syscall(const SyscallEvent& ev) override { return inner_->Syscall(ev); }
  Status Process(const ProcessEvent& ev) override { return inner_->Process(ev); }
  bool WritesProcesses() const override { return inner_->WritesProcesses(); }
  Status Finish() override {
    FAY_RETURN_IF_ERROR(inner_->Finish());
    bool bad = fflush(f_) != 0 || ferror(f_);
    if (f_ != stdout && fclose(f_) != 0) bad = true;
    f_ = nullptr;
    if (bad) return Error(Code::kIo, fmt::format("writing {}: {}", path_, strerror(errno)));
    return Status::Ok();
  }

 private:
  FILE* f_;
  std::string path_;
  std::unique_ptr<Exporter> inner_;
};

}  // namespace

Expected<std::unique_ptr<Exporter>> MakeExporter(const std::string& format, const std::string& out,
                                                 const RecordingInfo& info,
                                                 const ExportOptions& options) {
  if (format == "ctf") {
    if (out == "-") return Error(Code::kInvalidArgument, "ctf writes a directory: give -o DIR");
    return MakeCtfExporter(out, info);
  }
  if (format != "chrome" && format != "jsonl" && format != "csv")
    return Error(Code::kInvalidArgument,
                 fmt::format("unknown format '{}': expected ctf, chrome, jsonl or csv", format));
  FILE* f = out == "-" ? stdout : fopen(out.c_str(), "we");
  if (!f) return Error(Code::kIo, fmt::format("cannot create {}: {}", out, strerror(errno)));
  // Large stdio buffers: the exporters write many small pieces.
  if (f != stdout) setvbuf(f, nullptr, _IOFBF, 1 << 20);
  std::unique_ptr<Exporter> inner = format == "chrome"  ? MakeChromeExporter(f, info, options)
                                    : format == "jsonl" ? MakeJsonlExporter(f, info, options)
                                                        : MakeCsvExporter(f, info, options);
  return std::unique_ptr<Exporter>(std::make_unique<FileExporter>(f, out, std::move(inner)));
}

Status ExportTrace(Reader& reader, Exporter& exporter, ExportStats* stats) {
  *stats = ExportStats{};
  Status write_error;
  Status read = reader.ForEach(
      [&](const SyscallEvent& ev) {
        if (!write_error.ok()) return;
        write_error = exporter.Syscall(ev);
        ++stats->syscalls;
      },
      [&](const ProcessEvent& ev) {
        if (!write_error.ok()) return;
        write_error = exporter.Process(ev);
        ++(exporter.WritesProcesses() ? stats->processes : stats->processes_left_out);
      });
  if (!write_error.ok()) return write_error;
  // The readable prefix is finished into a valid file before the damage is reported.
  FAY_RETURN_IF_ERROR(exporter.Finish());
  return read;
}

}  // namespace fay::trace
