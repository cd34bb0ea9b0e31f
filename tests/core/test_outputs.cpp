// Where a command writes (zt/core/outputs.hpp): every output folder follows a symlink to a
// folder as mkdir -p does, or is refused naming what is wrong; outputs that collide with
// each other or with the inputs are refused naming both keys. The expected verdicts are
// written out by hand per case (what `mkdir -p` and a careful user would say).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/outputs.hpp"

namespace fs = std::filesystem;
using zt::testing::expect_input_error;

namespace {

struct TempDir {
  fs::path path;
  std::string cwd;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "zt-outputs-XXXXXX").string();
    EXPECT_NE(::mkdtemp(t.data()), nullptr);
    path = t;
    cwd = fs::current_path().string();
    fs::current_path(path);  // the cases name relative paths, as users do
  }
  ~TempDir() {
    fs::current_path(cwd);
    fs::remove_all(path);
  }
};

void spit(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// The files a training run names: ckpt.dir `ck` owning its checkpoint names, the report
// folder ck/report owning all, log.metrics, data.path and ckpt.resume (read first).
std::vector<zt::PathUse> run(const std::string& metrics, const std::string& data = "tokens.h5",
                             const std::string& resume = "", const std::string& init_from = "") {
  return {{"ckpt.dir", "ck", true, R"(latest|zt\.lock|step-\d+\.h5(\.tmp.*)?)"},
          {"the report folder (log.report)", "ck/report", true, ".*"},
          {"log.metrics", metrics, true},
          {"data.path", data, false, "", true},
          {"ckpt.resume", resume, false, "", true},
          {"ckpt.init_from", init_from, false, fs::is_directory(init_from) ? R"(latest|step-\d+\.h5)" : "", true}};
}

}  // namespace

TEST(OutputDir, FollowsASymlinkToAFolderAsMkdirDoes) {
  TempDir d;
  fs::create_directory("real");
  fs::create_directory_symlink("real", "ck");
  EXPECT_NO_THROW(zt::require_output_dir("ck", "ckpt.dir", "h"));
  EXPECT_NO_THROW(zt::require_output_dir("ck/sub/deeper", "ckpt.dir", "h"));  // made below it
  EXPECT_NO_THROW(zt::require_output_dir("ck", "log.metrics's folder", "h", zt::OutputDir::kFolderOfAFile));
  // The publication through the link: rename, then fsync of the folder named by the link.
  EXPECT_NO_THROW(zt::write_file_safely("ck/latest", "step-1.h5\n", "checkpoint"));
  std::ifstream in("real/latest");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "step-1.h5");
}

TEST(OutputDir, RefusesWhatMkdirWouldRefuseNamingIt) {
  TempDir d;
  fs::create_symlink("nowhere", "dangling");
  spit("afile", "x");
  fs::create_symlink("afile", "tofile");
  for (const zt::OutputDir kind : {zt::OutputDir::kMayBeMade, zt::OutputDir::kFolderOfAFile}) {
    expect_input_error([&] { zt::require_output_dir("dangling", "--out", "h", kind); },
                       {"--out = 'dangling'", "symbolic link to 'nowhere', which does not exist"});
    expect_input_error([&] { zt::require_output_dir("afile", "ckpt.dir", "h", kind); },
                       {"ckpt.dir = 'afile'", "exists and is not a folder"});
    expect_input_error([&] { zt::require_output_dir("tofile", "--report", "h", kind); },
                       {"--report = 'tofile'", "exists and is not a folder"});
    expect_input_error([&] { zt::require_output_dir("afile/sub", "OUTDIR", "h", kind); },
                       {"OUTDIR = 'afile/sub'", "'afile' above it is a file"});
    expect_input_error([&] { zt::require_output_dir("", "OUTDIR", "h", kind); }, {"an empty path"});
  }
  expect_input_error([&] { zt::require_output_dir("/usr/../etc", "ckpt.dir", "h"); },
                     {"is the system folder '/etc'"});
  expect_input_error([&] { zt::require_output_dir("missing", "the folder of x", "h", zt::OutputDir::kFolderOfAFile); },
                     {"'missing'", "it does not exist"});
  EXPECT_NO_THROW(zt::require_output_dir("missing", "ckpt.dir", "h"));  // made when needed
  // The same rule reaches the folder of an output file.
  expect_input_error([&] { zt::require_output_folder("dangling/m.jsonl", "log.metrics file"); },
                     {"symbolic link to 'nowhere'"});
}

TEST(Collisions, OutputsOfARunAgainstEachOtherAndItsInputs) {
  TempDir d;
  fs::create_directory("ck");
  spit("tokens.h5", "t");
  spit("ck/step-4.h5", "c");
  fs::create_directory("real");
  fs::create_directory_symlink("ck", "cklink");
  // Refused, naming both keys.
  const std::vector<std::pair<std::vector<zt::PathUse>, std::vector<std::string>>> refused = {
      {run("ck/latest"), {"log.metrics = 'ck/latest'", "ckpt.dir = 'ck'"}},
      {run("ck/step-9.h5"), {"log.metrics", "ckpt.dir"}},
      {run("ck/step-4.h5"), {"log.metrics", "ckpt.dir"}},
      {run("ck/zt.lock"), {"log.metrics", "ckpt.dir"}},
      {run("./ck/../ck/latest"), {"log.metrics", "ckpt.dir"}},
      {run("cklink/latest"), {"log.metrics = 'cklink/latest'", "ckpt.dir"}},  // through a link
      {run("ck/report/metrics.jsonl"), {"log.metrics", "the report folder"}},
      {run("ck/report"), {"log.metrics", "the report folder"}},
      {run("tokens.h5"), {"log.metrics = 'tokens.h5'", "data.path = 'tokens.h5'", "same file"}},
      {run("ck/step-4.h5", "tokens.h5", "ck/step-4.h5"), {"log.metrics", "ck/step-4.h5"}},
      {run("m.jsonl", "tokens.h5", "", "ck"), {"ckpt.init_from = 'ck'", "ckpt.dir = 'ck'"}},
  };
  for (const auto& [uses, needles] : refused) {
    SCOPED_TRACE(uses[2].path);
    try {
      zt::refuse_collisions(uses);
      ADD_FAILURE() << "accepted";
    } catch (const zt::InputError& e) {
      for (const std::string& n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "missing '" << n << "' in: " << e.what();
    }
  }
  // Accepted: another file beside the checkpoints, a resume of this run's own
  // checkpoint, init_from a checkpoint of another folder.
  EXPECT_NO_THROW(zt::refuse_collisions(run("ck/metrics.jsonl")));
  EXPECT_NO_THROW(zt::refuse_collisions(run("m.jsonl", "tokens.h5", "ck/step-4.h5")));
  EXPECT_NO_THROW(zt::refuse_collisions(run("m.jsonl", "tokens.h5", "", "real")));
  EXPECT_NO_THROW(zt::refuse_collisions(run("")));
}

TEST(Collisions, ConvertersInputEqualOrHoldingTheOutput) {
  TempDir d;
  fs::create_directory("hf");
  spit("hf/config.json", "{}");
  spit("in.txt", "x");
  ASSERT_EQ(::link("in.txt", "hard.txt"), 0);
  const auto convert = [](const std::string& out, const std::string& in) {
    std::error_code ec;
    zt::refuse_collisions({{"OUT", out, true}, {"IN", in, false, fs::is_directory(in, ec) ? ".*" : ""}});
  };
  expect_input_error([&] { convert("in.txt", "in.txt"); }, {"OUT = 'in.txt'", "IN = 'in.txt'"});
  expect_input_error([&] { convert("hard.txt", "in.txt"); }, {"same file"});  // a hard link
  expect_input_error([&] { convert("hf/out.h5", "hf"); }, {"OUT = 'hf/out.h5' lies in IN = 'hf'"});
  expect_input_error([&] { convert("hf/sub/out.h5", "hf"); }, {"lies in IN = 'hf'"});
  EXPECT_NO_THROW(convert("out.h5", "hf"));
  EXPECT_NO_THROW(convert("hf2/out.h5", "hf"));  // a sibling whose name starts the same
  // An export folder: the input inside it is fine where the name is not one it writes.
  const auto export_to = [](const std::string& out, const std::string& in) {
    std::error_code ec;
    zt::refuse_collisions({{"OUTDIR", out, true, R"(config\.json|model.*\.safetensors.*)"},
                           {"CKPT", in, false, fs::is_directory(in, ec) ? ".*" : ""}});
  };
  EXPECT_NO_THROW(export_to(".", "in.txt"));
  expect_input_error([&] { export_to("hf", "hf"); }, {"OUTDIR = 'hf' and CKPT = 'hf'"});
  expect_input_error([&] { export_to("hf/out", "hf"); }, {"OUTDIR = 'hf/out' lies in CKPT = 'hf'"});
  expect_input_error([&] { export_to(".", "config.json"); }, {"CKPT = 'config.json' lies in OUTDIR"});
}
