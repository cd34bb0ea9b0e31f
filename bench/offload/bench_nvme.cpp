// Throughput of the offload store's NVMe path (never a test): sequential write and read
// of one rank's file through NvmeFile (io_uring, O_DIRECT, block size and queue depth as
// fio's --bs/--iodepth), and the store's pipelined update pass (read + write of every
// sub-group, no compute). One JSON line per measurement; run_nvme.py runs fio beside it.
//   bench_nvme --dir /tmp/x --size 1G --bs 1M --qd 32 --mode write|read|pass
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include "zt/core/units.hpp"
#include "zt/offload/host_buffer.hpp"
#include "zt/offload/nvme_file.hpp"
#include "zt/offload/store.hpp"

int main(int argc, char** argv) {
  CLI::App app{"NVMe store throughput (zt offload)"};
  std::string dir = "/tmp", size_text = "1G", bs_text = "1M", mode = "write", sg_text = "48M";
  int qd = 32, buffers = 4;
  app.add_option("--dir", dir, "directory of the file");
  app.add_option("--size", size_text, "file size");
  app.add_option("--bs", bs_text, "bytes per io_uring request");
  app.add_option("--qd", qd, "requests in flight");
  app.add_option("--mode", mode, "write, read (NvmeFile) or pass (Store::update)");
  app.add_option("--subgroup", sg_text, "pass: offload.subgroup_bytes");
  app.add_option("--buffers", buffers, "pass: offload.buffers");
  CLI11_PARSE(app, argc, argv);
  const uint64_t size = zt::parse_size(size_text), bs = zt::parse_size(bs_text);
  using clock = std::chrono::steady_clock;
  double secs = 0;
  uint64_t moved = 0;
  std::string how;
  if (mode == "pass") {
    zt::offload::Options o;
    o.optimizer = zt::offload::Home::kNvme;
    o.nvme_path = dir;
    o.queue_depth = qd;
    o.block_bytes = bs;
    o.buffers = buffers;
    o.subgroup_bytes = zt::parse_size(sg_text);
    const int64_t elems = static_cast<int64_t>(size / 12);
    zt::offload::Store st(o, {elems}, {}, 0);
    // init writes the file once; then one warm-up pass and one timed pass
    std::vector<float> zero(static_cast<size_t>(elems), 0.0f);
    st.init_unit(0, zero.data());
    std::vector<float>().swap(zero);
    double sink = 0;
    auto fn = [&](const zt::offload::SubGroup& g, const zt::offload::StateView& v) {
      sink += v.m[g.count - 1];
    };
    st.update(fn);
    const auto t0 = clock::now();
    st.update(fn);
    secs = std::chrono::duration<double>(clock::now() - t0).count();
    moved = 2 * st.nvme_bytes();
    how = st.describe();
  } else {
    zt::offload::NvmeFile::Settings s;
    s.queue_depth = qd;
    s.block_bytes = bs;
    zt::offload::NvmeFile f(dir + "/zt-bench-nvme.bin", size, s);
    const size_t chunk = 64u << 20;  // submitted per ticket; NvmeFile keeps qd blocks in flight
    zt::offload::HostBuffer buf(std::min<uint64_t>(size, 4 * chunk), false);
    auto sweep = [&](bool write) {
      std::vector<zt::offload::NvmeFile::Ticket> ts;
      for (uint64_t off = 0; off < size; off += chunk) {
        const size_t len = static_cast<size_t>(std::min<uint64_t>(chunk, size - off));
        char* b = static_cast<char*>(buf.data()) + (off % buf.size());
        ts.push_back(write ? f.submit_write(off, b, len) : f.submit_read(off, b, len));
      }
      f.wait_all();
    };
    sweep(true);  // the file exists and is allocated before timing
    const auto t0 = clock::now();
    sweep(mode == "write");
    secs = std::chrono::duration<double>(clock::now() - t0).count();
    moved = size;
    how = std::string(f.direct() ? "O_DIRECT" : "buffered") + ", " + (f.uring() ? "io_uring" : "pread/pwrite");
  }
  std::printf("{\"impl\": \"zt\", \"mode\": \"%s\", \"bytes\": %llu, \"seconds\": %.6f, \"MBps\": %.1f, "
              "\"bs\": %llu, \"qd\": %d, \"how\": \"%s\"}\n",
              mode.c_str(), static_cast<unsigned long long>(moved), secs, moved / secs / 1e6,
              static_cast<unsigned long long>(bs), qd, how.c_str());
  return 0;
}
