// allReduce bandwidth of the host plugin's collectives (host-shm), one
// forked process per rank, reported like nccl-tests:
//   algbw = bytes / time;  busbw = algbw * 2 (n - 1) / n
//
//   collectives_bench [nranks=2] [max bytes=268435456] [float32|bfloat16|...]
//                     [path/to/libflagos_host.so]
//
// Sizes double from 8 bytes to the maximum. Per size: warm-up, then a batch
// of allReduces queued back to back and one synchronize (as nccl-tests
// does), timed on rank 0. Built, not run by ctest.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>

#include "collectives_harness.h"

namespace {

const std::map<std::string, flagosDtype_t> kDtypes = {
    {"float32", FLAGOS_DTYPE_FLOAT32}, {"float64", FLAGOS_DTYPE_FLOAT64},
    {"float16", FLAGOS_DTYPE_FLOAT16}, {"bfloat16", FLAGOS_DTYPE_BFLOAT16},
    {"int32", FLAGOS_DTYPE_INT32},     {"int8", FLAGOS_DTYPE_INT8}};

}  // namespace

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 2;
  const uint64_t max_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : (256u << 20);
  const std::string dtype_name = argc > 3 ? argv[3] : "float32";
  const std::string path = argc > 4 ? argv[4] : FLAGOS_DEFAULT_COLLECTIVES_PLUGIN;
  if (nranks < 1 || kDtypes.count(dtype_name) == 0) {
    std::fprintf(stderr, "usage: %s [nranks] [max bytes] [dtype] [plugin]\n", argv[0]);
    return 2;
  }
  const flagosDtype_t dtype = kDtypes.at(dtype_name);
  const uint64_t size = FLAGOS_DTYPE_SIZE(dtype);
  if (std::getenv("FLAGOS_HOST_MEMORY_LIMIT") == nullptr) {
    setenv("FLAGOS_HOST_MEMORY_LIMIT", std::to_string(2 * max_bytes + (64u << 20)).c_str(), 1);
  }
  shmtest::Plugin& plugin = shmtest::loadPlugin(path);
  flagosUniqueId id;
  if (plugin.coll().getUniqueId(&id) != FLAGOS_SUCCESS) {
    std::fprintf(stderr, "getUniqueId: %s\n", plugin.lastError().c_str());
    return 1;
  }
  std::printf("# host-shm allReduce (sum), %d ranks, %s, %u cores\n", nranks, dtype_name.c_str(),
              std::thread::hardware_concurrency());
  std::printf("# %12s %12s %8s %10s %9s %9s\n", "size (B)", "count", "type", "time (us)",
              "algbw GB/s", "busbw GB/s");
  std::fflush(stdout);
  const auto outcomes = shmtest::runRanks(
      nranks,
      [&](int r) {
        shmtest::Rank rank(plugin, r, nranks);
        rank.ok(rank.join(id, 60000), "commInitRank");
        char* send = rank.alloc(max_bytes);
        char* recv = rank.alloc(max_bytes);
        std::memset(send, 0, max_bytes);
        std::memset(recv, 0, max_bytes);
        const auto& c = plugin.coll();
        for (uint64_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
          const uint64_t count = bytes / size;
          const int iters = static_cast<int>(std::clamp<uint64_t>((1ull << 30) / bytes, 5, 200));
          const auto run = [&](int n) {
            for (int i = 0; i < n; ++i) {
              rank.ok(c.allReduce(send, recv, count, dtype, FLAGOS_RED_SUM, rank.comm, rank.stream),
                      "allReduce");
            }
            rank.ok(rank.sync(), "sync");
          };
          run(3);  // warm-up; also lines the ranks up
          const auto start = std::chrono::steady_clock::now();
          run(iters);
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
              iters;
          if (r == 0) {
            const double algbw = static_cast<double>(count * size) / seconds / 1e9;
            const double busbw = algbw * 2.0 * (nranks - 1) / nranks;
            std::printf("  %12llu %12llu %8s %10.1f %9.3f %9.3f\n",
                        static_cast<unsigned long long>(count * size),
                        static_cast<unsigned long long>(count), dtype_name.c_str(), seconds * 1e6,
                        algbw, busbw);
            std::fflush(stdout);
          }
        }
        rank.ok(c.commDestroy(rank.comm), "commDestroy");
      },
      std::chrono::seconds(1800));
  int failed = 0;
  for (const auto& o : outcomes) {
    if (!o.message.empty()) {
      std::fprintf(stderr, "%s\n", o.message.c_str());
      failed = 1;
    }
  }
  return failed;
}
