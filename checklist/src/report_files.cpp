// The report directory: created up front (bad path = exit 2), then report.json and
// report.md written without ever following a symlink inside it (core/files.hpp).
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "zt/check/report_writer.hpp"
#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/core/outputs.hpp"

namespace zt::check {

std::filesystem::path prepare_report_dir(const std::string& dir) {
  const std::string hint = "give --report a directory you can write to; it is created if missing";
  if (dir.empty()) throw InputError("--report needs a directory name", hint);
  require_output_dir(dir, "--report", hint);
  const std::filesystem::path path(dir);
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec)
    throw InputError("cannot create report directory '" + dir + "': " + ec.message(), hint);
  if (!std::filesystem::is_directory(path, ec))
    throw InputError("report path '" + dir + "' exists and is not a directory", hint);
  if (::access(path.c_str(), W_OK | X_OK) != 0)
    throw InputError("report directory '" + dir + "' is not writable: " + std::strerror(errno), hint);
  // access() says yes to root on a read-only mount or an immutable folder: write a probe
  // file now, not after the whole sweep (issue 36, class 10), and refuse a folder where
  // the report's own names are taken by folders.
  std::string probe = (path / ".zt-report-probe.XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw InputError("report directory '" + dir + "' is not writable: " + std::strerror(errno), hint);
  ::close(fd);
  ::unlink(probe.c_str());
  for (const char* name : {"report.json", "report.md"})
    if (std::filesystem::is_directory(path / name, ec))
      throw InputError("report directory '" + dir + "' holds a folder named " + name +
                           ", where the report would go",
                       hint);
  return path;
}

void write_report_files(const Report& report, const std::filesystem::path& dir) {
  // The one safe writer (core/files.hpp): a symlink planted there is replaced, not followed.
  write_file_safely((dir / "report.json").string(), json_dump(report_json(report), 2) + "\n", "report");
  write_file_safely((dir / "report.md").string(), report_markdown(report), "report");
}

}  // namespace zt::check
