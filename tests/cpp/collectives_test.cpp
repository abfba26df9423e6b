// The host plugin's collectives (host-shm) across real processes: each test
// forks one child per rank (collectives_harness.h), like torchrun
// --nproc-per-node=N, and checks every collective's results, then the
// failure modes: a rank that never joins, a rank that never arrives,
// disagreeing ranks, abort, bad arguments.
//
//   collectives_test [gtest flags] [path/to/libflagos_host.so]
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "collectives_harness.h"

namespace {

using shmtest::Failure;
using shmtest::Rank;
using Clock = std::chrono::steady_clock;

// Fails the rank with @p message (built only on failure: checks run per byte).
#define RANK_CHECK(condition, message)        \
  do {                                        \
    if (!(condition)) throw Failure(message); \
  } while (0)

std::string g_plugin_path = FLAGOS_DEFAULT_COLLECTIVES_PLUGIN;

// A failing operation reports its own status (TIMEOUT, INVALID_ARGUMENT, ...)
// at the next stream synchronize, as the ABI requires.

shmtest::Plugin& plugin() {
  return shmtest::loadPlugin(g_plugin_path);
}

flagosUniqueId newId() {
  flagosUniqueId id;
  EXPECT_EQ(FLAGOS_SUCCESS, plugin().coll().getUniqueId(&id)) << plugin().lastError();
  return id;
}

// Segments this process's ids left in /dev/shm (there should be none: the
// last rank to join unlinks the name, a rank that gives up too).
std::vector<std::string> leftoverSegments() {
  std::vector<std::string> found;
  const std::string prefix = "flagos-shm-" + std::to_string(getpid()) + "-";
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) {
      if (std::string(e->d_name).rfind(prefix, 0) == 0) found.push_back(e->d_name);
    }
    closedir(dir);
  }
  return found;
}

void expectAllOk(const std::vector<shmtest::Outcome>& outcomes) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_EQ("", outcomes[r].message) << "rank " << r;
  }
  EXPECT_EQ(std::vector<std::string>{}, leftoverSegments());
}

// Runs @p body on @p n ranks that share a fresh communicator.
void onRanks(int n, const std::function<void(Rank&)>& body, int64_t timeout_ms = 20000) {
  const flagosUniqueId id = newId();
  expectAllOk(shmtest::runRanks(n, [&](int r) {
    Rank rank(plugin(), r, n);
    rank.ok(rank.join(id, timeout_ms), "commInitRank");
    body(rank);
    rank.ok(rank.sync(), "final streamSynchronize");
    rank.ok(plugin().coll().commDestroy(rank.comm), "commDestroy");
  }));
}

// Checks an asynchronous failure reported by synchronize: the status, and
// the last error containing every one of @p needles.
void expectAsyncFailure(Rank& rank, flagosStatus_t status, flagosStatus_t expected,
                        const std::vector<std::string>& needles) {
  const bool status_ok = status == expected;
  const std::string error = rank.p.lastError();
  RANK_CHECK(status_ok, "rank " + std::to_string(rank.rank) + ": expected status " +
                            std::to_string(expected) + ", got " + std::to_string(status) + ": " +
                            error);
  for (const std::string& needle : needles) {
    RANK_CHECK(error.find(needle) != std::string::npos,
               "rank " + std::to_string(rank.rank) + ": '" + needle + "' not in: " + error);
  }
}

// --------------------------------------------------------- values ------

const flagosDtype_t kReducible[] = {
    FLAGOS_DTYPE_FLOAT32, FLAGOS_DTYPE_FLOAT64, FLAGOS_DTYPE_FLOAT16, FLAGOS_DTYPE_BFLOAT16,
    FLAGOS_DTYPE_INT32,   FLAGOS_DTYPE_INT64,   FLAGOS_DTYPE_INT8,    FLAGOS_DTYPE_UINT8};
const flagosRedOp_t kOps[] = {FLAGOS_RED_SUM, FLAGOS_RED_PROD, FLAGOS_RED_MAX, FLAGOS_RED_MIN,
                              FLAGOS_RED_AVG};

bool isFloat(flagosDtype_t d) {
  return d == FLAGOS_DTYPE_FLOAT32 || d == FLAGOS_DTYPE_FLOAT64 || d == FLAGOS_DTYPE_FLOAT16 ||
         d == FLAGOS_DTYPE_BFLOAT16;
}

// Small integers: exact in every dtype, sums and products of four fit int8.
double input(flagosRedOp_t op, flagosDtype_t dtype, int rank, uint64_t i) {
  const bool is_unsigned = dtype == FLAGOS_DTYPE_UINT8;
  switch (op) {
    case FLAGOS_RED_PROD: {
      const uint64_t k = (i + rank) % 3;
      return k == 0 ? 2 : (k == 1 && !is_unsigned ? -1 : 1);
    }
    case FLAGOS_RED_MAX:
    case FLAGOS_RED_MIN:
      return static_cast<double>((i * 13 + rank * 7) % 23) - (is_unsigned ? 0 : 11);
    default:
      return static_cast<double>((i * 7 + rank * 3) % 11) - (is_unsigned ? 0 : 5);
  }
}

double expected(flagosRedOp_t op, flagosDtype_t dtype, int nranks, uint64_t i) {
  double acc = input(op, dtype, 0, i);
  for (int r = 1; r < nranks; ++r) {
    const double v = input(op, dtype, r, i);
    switch (op) {
      case FLAGOS_RED_PROD:
        acc *= v;
        break;
      case FLAGOS_RED_MAX:
        acc = std::max(acc, v);
        break;
      case FLAGOS_RED_MIN:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
    }
  }
  if (op == FLAGOS_RED_AVG) {
    acc = isFloat(dtype) ? acc / nranks : std::trunc(acc / nranks);  // ints: toward zero
  }
  return acc;
}

double tolerance(flagosRedOp_t op, flagosDtype_t dtype) {
  if (op != FLAGOS_RED_AVG) return 0;  // small integers: exact
  switch (dtype) {
    case FLAGOS_DTYPE_FLOAT16:
      return 1e-2;
    case FLAGOS_DTYPE_BFLOAT16:
      return 5e-2;
    case FLAGOS_DTYPE_FLOAT32:
      return 1e-5;
    default:
      return 1e-12;
  }
}

std::string label(const char* what, flagosDtype_t dtype, flagosRedOp_t op, uint64_t count) {
  return std::string(what) + " dtype " + std::to_string(dtype) + " op " + std::to_string(op) +
         " count " + std::to_string(count);
}

void checkReduced(const std::string& what, flagosRedOp_t op, flagosDtype_t dtype, int nranks,
                  const char* got, uint64_t count, uint64_t first = 0) {
  for (uint64_t i = 0; i < count; ++i) {
    const double want = expected(op, dtype, nranks, first + i);
    const double have = shmtest::loadAs(dtype, got, i);
    if (std::fabs(have - want) > tolerance(op, dtype)) {
      throw Failure(what + ": element " + std::to_string(i) + " is " + std::to_string(have) +
                    ", expected " + std::to_string(want));
    }
  }
}

// Elements per rank above one 1 MiB staging chunk for every element size:
// several pipelined steps, and not a multiple of anything.
uint64_t bigCount(flagosDtype_t dtype) {
  return (2u << 20) / FLAGOS_DTYPE_SIZE(dtype) + 3;
}

// ------------------------------------------------------- collectives ---

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllReduceEveryDtypeOpAndSize) {
  const int n = GetParam();
  onRanks(n, [&](Rank& rank) {
    for (flagosDtype_t dtype : kReducible) {
      const uint64_t size = FLAGOS_DTYPE_SIZE(dtype);
      for (flagosRedOp_t op : kOps) {
        for (uint64_t count :
             {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{1000}, bigCount(dtype)}) {
          // Above a chunk: every dtype, two operators (the checks are slow-ish).
          if (count > 1000 && op != FLAGOS_RED_SUM && op != FLAGOS_RED_MIN) continue;
          const bool in_place = count == 1000;
          char* send = rank.alloc(count * size);
          char* recv = in_place ? send : rank.alloc(count * size);
          for (uint64_t i = 0; i < count; ++i) {
            shmtest::storeAs(dtype, send, i, input(op, dtype, rank.rank, i));
          }
          rank.ok(plugin().coll().allReduce(send, recv, count, dtype, op, rank.comm, rank.stream),
                  "allReduce");
          rank.ok(rank.sync(), label("allReduce", dtype, op, count));
          checkReduced(label("allReduce", dtype, op, count), op, dtype, n, recv, count);
          rank.freeAll();
        }
      }
    }
  });
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  const int n = GetParam();
  onRanks(n, [&](Rank& rank) {
    for (flagosDtype_t dtype :
         {FLAGOS_DTYPE_FLOAT32, FLAGOS_DTYPE_INT8, FLAGOS_DTYPE_INT16, FLAGOS_DTYPE_COMPLEX128}) {
      const uint64_t size = FLAGOS_DTYPE_SIZE(dtype);
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, bigCount(dtype) * 2}) {
        for (int root = 0; root < n; ++root) {
          const uint64_t bytes = count * size;
          char* buffer = rank.alloc(bytes);  // in place: send == recv
          for (uint64_t i = 0; i < bytes; ++i) {
            buffer[i] = static_cast<char>(rank.rank == root ? i * 31 + root : 0x5a);
          }
          rank.ok(
              plugin().coll().broadcast(buffer, buffer, count, dtype, root, rank.comm, rank.stream),
              "broadcast");
          rank.ok(rank.sync(), "broadcast sync");
          for (uint64_t i = 0; i < bytes; ++i) {
            RANK_CHECK(buffer[i] == static_cast<char>(i * 31 + root),
                       "broadcast root " + std::to_string(root) + " byte " + std::to_string(i));
          }
          rank.freeAll();
        }
      }
    }
  });
}

TEST_P(Collectives, ReduceToEveryRoot) {
  const int n = GetParam();
  onRanks(n, [&](Rank& rank) {
    for (flagosDtype_t dtype : {FLAGOS_DTYPE_FLOAT32, FLAGOS_DTYPE_BFLOAT16, FLAGOS_DTYPE_INT32}) {
      const uint64_t size = FLAGOS_DTYPE_SIZE(dtype);
      for (flagosRedOp_t op : kOps) {
        for (uint64_t count : {uint64_t{0}, uint64_t{7}, bigCount(dtype)}) {
          for (int root = 0; root < n; ++root) {
            char* send = rank.alloc(count * size);
            char* recv = rank.alloc(count * size);
            std::memset(recv, 0x7b, count * size);
            for (uint64_t i = 0; i < count; ++i) {
              shmtest::storeAs(dtype, send, i, input(op, dtype, rank.rank, i));
            }
            rank.ok(
                plugin().coll().reduce(send, recv, count, dtype, op, root, rank.comm, rank.stream),
                "reduce");
            rank.ok(rank.sync(), "reduce sync");
            if (rank.rank == root) {
              checkReduced(label("reduce", dtype, op, count), op, dtype, n, recv, count);
            } else {
              for (uint64_t b = 0; b < count * size; ++b) {
                RANK_CHECK(recv[b] == 0x7b, "reduce wrote to a non-root recvbuf");
              }
            }
            rank.freeAll();
          }
        }
      }
    }
  });
}

TEST_P(Collectives, AllGather) {
  const int n = GetParam();
  onRanks(n, [&](Rank& rank) {
    for (flagosDtype_t dtype : {FLAGOS_DTYPE_FLOAT32, FLAGOS_DTYPE_UINT8, FLAGOS_DTYPE_INT64}) {
      const uint64_t size = FLAGOS_DTYPE_SIZE(dtype);
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, bigCount(dtype)}) {
        for (bool in_place : {false, true}) {
          const uint64_t bytes = count * size;
          char* recv = rank.alloc(n * bytes);
          char* send = in_place ? recv + rank.rank * bytes : rank.alloc(bytes);
          for (uint64_t b = 0; b < bytes; ++b) send[b] = static_cast<char>(b * 7 + rank.rank);
          rank.ok(plugin().coll().allGather(send, recv, count, dtype, rank.comm, rank.stream),
                  "allGather");
          rank.ok(rank.sync(), "allGather sync");
          for (int r = 0; r < n; ++r) {
            for (uint64_t b = 0; b < bytes; ++b) {
              RANK_CHECK(recv[r * bytes + b] == static_cast<char>(b * 7 + r),
                         "allGather block " + std::to_string(r) + " byte " + std::to_string(b));
            }
          }
          rank.freeAll();
        }
      }
    }
  });
}

TEST_P(Collectives, ReduceScatter) {
  const int n = GetParam();
  onRanks(n, [&](Rank& rank) {
    for (flagosDtype_t dtype : {FLAGOS_DTYPE_FLOAT32, FLAGOS_DTYPE_FLOAT16, FLAGOS_DTYPE_INT64}) {
      const uint64_t size = FLAGOS_DTYPE_SIZE(dtype);
      for (flagosRedOp_t op : {FLAGOS_RED_SUM, FLAGOS_RED_MAX, FLAGOS_RED_AVG}) {
        for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, bigCount(dtype) / 2}) {
          for (bool in_place : {false, true}) {
            // Element j of block b holds input(global index b * count + j).
            char* send = rank.alloc(n * count * size);
            for (uint64_t i = 0; i < n * count; ++i) {
              shmtest::storeAs(dtype, send, i, input(op, dtype, rank.rank, i));
            }
            char* recv = in_place ? send + rank.rank * count * size : rank.alloc(count * size);
            rank.ok(
                plugin().coll().reduceScatter(send, recv, count, dtype, op, rank.comm, rank.stream),
                "reduceScatter");
            rank.ok(rank.sync(), "reduceScatter sync");
            checkReduced(label("reduceScatter", dtype, op, count), op, dtype, n, recv, count,
                         rank.rank * count);
            rank.freeAll();
          }
        }
      }
    }
  });
}

TEST_P(Collectives, AllToAll) {
  const int n = GetParam();
  onRanks(n, [&](Rank& rank) {
    for (flagosDtype_t dtype : {FLAGOS_DTYPE_FLOAT32, FLAGOS_DTYPE_INT8}) {
      const uint64_t size = FLAGOS_DTYPE_SIZE(dtype);
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, bigCount(dtype) / 2}) {
        const uint64_t bytes = count * size;
        char* send = rank.alloc(n * bytes);
        char* recv = rank.alloc(n * bytes);
        // Block j goes to rank j; byte b of it encodes (sender, receiver, b).
        for (int j = 0; j < n; ++j) {
          for (uint64_t b = 0; b < bytes; ++b) {
            send[j * bytes + b] = static_cast<char>(b * 3 + rank.rank * 16 + j);
          }
        }
        rank.ok(plugin().coll().allToAll(send, recv, count, dtype, rank.comm, rank.stream),
                "allToAll");
        rank.ok(rank.sync(), "allToAll sync");
        for (int q = 0; q < n; ++q) {
          for (uint64_t b = 0; b < bytes; ++b) {
            RANK_CHECK(
                recv[q * bytes + b] == static_cast<char>(b * 3 + q * 16 + rank.rank),
                "allToAll block from rank " + std::to_string(q) + " byte " + std::to_string(b));
          }
        }
        rank.freeAll();
      }
    }
  });
}

// Each rank sends to the next and receives from the previous, in one group
// (larger than a mailbox: without the group's progress loop this deadlocks),
// two messages per pair to check their order, plus one to itself.
TEST_P(Collectives, SendRecvRingInAGroup) {
  const int n = GetParam();
  onRanks(n, [&](Rank& rank) {
    const int next = (rank.rank + 1) % n, prev = (rank.rank + n - 1) % n;
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{1000}, uint64_t{300001}}) {
      const uint64_t bytes = count * 4;
      char* out1 = rank.alloc(bytes);
      char* out2 = rank.alloc(bytes + 4);
      char* in1 = rank.alloc(bytes);
      char* in2 = rank.alloc(bytes + 4);
      char* self_out = rank.alloc(bytes);
      char* self_in = rank.alloc(bytes);
      for (uint64_t b = 0; b < bytes; ++b) {
        out1[b] = static_cast<char>(b + rank.rank);
        self_out[b] = static_cast<char>(b * 5);
      }
      for (uint64_t b = 0; b < bytes + 4; ++b) out2[b] = static_cast<char>(b * 3 + rank.rank);
      const auto& c = plugin().coll();
      rank.ok(c.groupStart(), "groupStart");
      rank.ok(c.send(out1, count, FLAGOS_DTYPE_FLOAT32, next, rank.comm, rank.stream), "send");
      rank.ok(c.recv(in1, count, FLAGOS_DTYPE_FLOAT32, prev, rank.comm, rank.stream), "recv");
      rank.ok(c.send(out2, count + 1, FLAGOS_DTYPE_FLOAT32, next, rank.comm, rank.stream), "send");
      rank.ok(c.recv(in2, count + 1, FLAGOS_DTYPE_FLOAT32, prev, rank.comm, rank.stream), "recv");
      rank.ok(c.send(self_out, count, FLAGOS_DTYPE_FLOAT32, rank.rank, rank.comm, rank.stream),
              "send to self");
      rank.ok(c.recv(self_in, count, FLAGOS_DTYPE_FLOAT32, rank.rank, rank.comm, rank.stream),
              "recv from self");
      rank.ok(c.groupEnd(), "groupEnd");
      rank.ok(rank.sync(), "send/recv sync");
      for (uint64_t b = 0; b < bytes; ++b) {
        RANK_CHECK(in1[b] == static_cast<char>(b + prev),
                   "ring message 1 byte " + std::to_string(b));
        RANK_CHECK(self_in[b] == static_cast<char>(b * 5),
                   "self message byte " + std::to_string(b));
      }
      for (uint64_t b = 0; b < bytes + 4; ++b) {
        RANK_CHECK(in2[b] == static_cast<char>(b * 3 + prev),
                   "ring message 2 byte " + std::to_string(b));
      }
      rank.freeAll();
    }
  });
}

// Asynchronous and ordered with other stream work: fill, reduce, more
// reductions back to back, one synchronize at the end.
TEST_P(Collectives, QueuedBehindOtherWorkWithOneSync) {
  const int n = GetParam();
  onRanks(n, [&](Rank& rank) {
    const uint64_t count = 100000;
    char* a = rank.alloc(count * 4);
    const int32_t one = 1;
    rank.ok(plugin().mem().memFill(a, &one, 4, count, rank.stream), "memFill");
    for (int k = 0; k < 10; ++k) {
      rank.ok(plugin().coll().allReduce(a, a, count, FLAGOS_DTYPE_INT32, FLAGOS_RED_SUM, rank.comm,
                                        rank.stream),
              "allReduce");
    }
    rank.ok(rank.sync(), "sync");
    int64_t want = 1;
    for (int k = 0; k < 10; ++k) want *= n;
    for (uint64_t i = 0; i < count; i += 997) {
      RANK_CHECK(reinterpret_cast<int32_t*>(a)[i] == want, "10 chained allReduces");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param);
                         });

TEST(CollectivesOneRank, EveryCallWorks) {
  onRanks(1, [&](Rank& rank) {
    const auto& c = plugin().coll();
    char* a = rank.alloc(64);
    char* b = rank.alloc(64);
    for (int i = 0; i < 16; ++i) reinterpret_cast<float*>(a)[i] = static_cast<float>(i);
    rank.ok(c.allReduce(a, b, 16, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_AVG, rank.comm, rank.stream),
            "allReduce");
    rank.ok(c.broadcast(a, b, 16, FLAGOS_DTYPE_FLOAT32, 0, rank.comm, rank.stream), "broadcast");
    rank.ok(c.reduce(a, b, 16, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_MAX, 0, rank.comm, rank.stream),
            "reduce");
    rank.ok(c.allGather(a, b, 16, FLAGOS_DTYPE_FLOAT32, rank.comm, rank.stream), "allGather");
    rank.ok(c.reduceScatter(a, b, 16, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, rank.comm, rank.stream),
            "reduceScatter");
    rank.ok(c.allToAll(a, b, 16, FLAGOS_DTYPE_FLOAT32, rank.comm, rank.stream), "allToAll");
    rank.ok(c.send(a, 16, FLAGOS_DTYPE_FLOAT32, 0, rank.comm, rank.stream), "send to self");
    rank.ok(c.recv(b, 16, FLAGOS_DTYPE_FLOAT32, 0, rank.comm, rank.stream), "recv from self");
    // Empty operations accept NULL buffers.
    rank.ok(c.allReduce(nullptr, nullptr, 0, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, rank.comm,
                        rank.stream),
            "empty allReduce");
    rank.ok(rank.sync(), "sync");
    RANK_CHECK(std::memcmp(a, b, 64) == 0, "one rank: results equal the input");
  });
}

TEST(CollectivesTimeout, ForeverDoesNotOverflowTheDeadlines) {
  onRanks(
      2,
      [&](Rank& rank) {
        char* a = rank.alloc(64);
        // Rank 0 waits past its spinning, into the deadline checks.
        if (rank.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        rank.ok(plugin().coll().allReduce(a, a, 16, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, rank.comm,
                                          rank.stream),
                "allReduce");
        rank.ok(rank.sync(), "sync");
      },
      INT64_MAX);
}

// ---------------------------------------------------------- failures ---

TEST(CollectivesFailure, RankThatNeverJoinsTimesOutNamingIt) {
  const flagosUniqueId id = newId();
  const auto outcomes = shmtest::runRanks(3, [&](int r) {
    if (r == 2) return;  // never joins
    Rank rank(plugin(), r, 3);
    const auto start = Clock::now();
    const flagosStatus_t status = rank.join(id, 1000);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    const std::string error = plugin().lastError();
    RANK_CHECK(status == FLAGOS_ERROR_TIMEOUT, "expected TIMEOUT, got " + std::to_string(status));
    RANK_CHECK(rank.comm == nullptr, "no communicator on failure");
    RANK_CHECK(error.find("rank 2 of 3 did not join") != std::string::npos, "message: " + error);
    RANK_CHECK(ms >= 950 && ms < 4000, "gave up after " + std::to_string(ms) + " ms");
  });
  expectAllOk(outcomes);
}

TEST(CollectivesFailure, RankThatNeverArrivesTimesOutAndAbortsTheOthers) {
  onRanks(
      3,
      [&](Rank& rank) {
        char* a = rank.alloc(4096);
        const auto& c = plugin().coll();
        if (rank.rank == 2) {  // arrives long after the others gave up
          std::this_thread::sleep_for(std::chrono::milliseconds(2500));
          const flagosStatus_t status =
              c.allReduce(a, a, 1024, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, rank.comm, rank.stream);
          RANK_CHECK(status == FLAGOS_ERROR_TIMEOUT, "late call: status " + std::to_string(status));
          const std::string error = plugin().lastError();
          RANK_CHECK(error.find("aborted because rank") != std::string::npos,
                     "late call: " + error);
          return;
        }
        const auto start = Clock::now();
        rank.ok(
            c.allReduce(a, a, 1024, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, rank.comm, rank.stream),
            "allReduce");
        const flagosStatus_t status = rank.sync();
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
        RANK_CHECK(ms < 2300, "failed after " + std::to_string(ms) + " ms");
        const std::string error = plugin().lastError();
        if (error.find("timed out after 800 ms") != std::string::npos) {
          expectAsyncFailure(rank, status, FLAGOS_ERROR_TIMEOUT,
                             {"all_reduce", "rank 2 of 3 did not arrive"});
        } else {  // the other rank timed out first and aborted the communicator
          expectAsyncFailure(rank, status, FLAGOS_ERROR_TIMEOUT, {"aborted because rank"});
        }
      },
      800);
}

TEST(CollectivesFailure, MismatchedCountsFailOnEveryRankAndTheCommStaysUsable) {
  onRanks(3, [&](Rank& rank) {
    const auto& c = plugin().coll();
    char* a = rank.alloc(64);
    const uint64_t count = rank.rank == 2 ? 5 : 4;
    rank.ok(c.allReduce(a, a, count, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, rank.comm, rank.stream),
            "allReduce");
    expectAsyncFailure(rank, rank.sync(), FLAGOS_ERROR_INVALID_ARGUMENT,
                       {"rank 0: all_reduce #0 of 4 x float32 (sum)",
                        "rank 2: all_reduce #0 of 5 x float32 (sum)"});
    // A different operator, then a different collective, are caught too.
    const flagosRedOp_t op = rank.rank == 1 ? FLAGOS_RED_MAX : FLAGOS_RED_SUM;
    rank.ok(c.allReduce(a, a, 4, FLAGOS_DTYPE_FLOAT32, op, rank.comm, rank.stream), "allReduce");
    expectAsyncFailure(rank, rank.sync(), FLAGOS_ERROR_INVALID_ARGUMENT, {"(max)"});
    if (rank.rank == 0) {
      rank.ok(c.broadcast(a, a, 4, FLAGOS_DTYPE_FLOAT32, 0, rank.comm, rank.stream), "broadcast");
    } else {
      rank.ok(c.allGather(a, a, 4, FLAGOS_DTYPE_FLOAT32, rank.comm, rank.stream), "allGather");
    }
    expectAsyncFailure(rank, rank.sync(), FLAGOS_ERROR_INVALID_ARGUMENT,
                       {"broadcast #2", "all_gather #2"});
    // Then a correct one works.
    for (int i = 0; i < 4; ++i) reinterpret_cast<float*>(a)[i] = 1;
    rank.ok(c.allReduce(a, a, 4, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, rank.comm, rank.stream),
            "allReduce");
    rank.ok(rank.sync(), "sync after the mismatches");
    RANK_CHECK(reinterpret_cast<float*>(a)[3] == 3, "allReduce after the mismatches");
  });
}

TEST(CollectivesFailure, MismatchedSendRecvCountsFailTheReceiver) {
  onRanks(2, [&](Rank& rank) {
    const auto& c = plugin().coll();
    char* a = rank.alloc(4 * 100000);
    if (rank.rank == 0) {  // larger than a mailbox: the receiver must drain it
      rank.ok(c.send(a, 100000, FLAGOS_DTYPE_FLOAT32, 1, rank.comm, rank.stream), "send");
      rank.ok(rank.sync(), "send sync");
    } else {
      rank.ok(c.recv(a, 8, FLAGOS_DTYPE_FLOAT32, 0, rank.comm, rank.stream), "recv");
      expectAsyncFailure(rank, rank.sync(), FLAGOS_ERROR_INVALID_ARGUMENT,
                         {"expected 8 x float32, but rank 0 sent 100000 x float32"});
    }
    // The mailbox is still in step.
    reinterpret_cast<int32_t*>(a)[0] = 42 + rank.rank;
    if (rank.rank == 0) {
      rank.ok(c.send(a, 1, FLAGOS_DTYPE_INT32, 1, rank.comm, rank.stream), "send");
    } else {
      rank.ok(c.recv(a, 1, FLAGOS_DTYPE_INT32, 0, rank.comm, rank.stream), "recv");
    }
    rank.ok(rank.sync(), "sync");
    RANK_CHECK(reinterpret_cast<int32_t*>(a)[0] == 42, "message after the mismatch");
  });
}

TEST(CollectivesFailure, AbortFailsPendingAndFutureOperationsAtOnce) {
  onRanks(2, [&](Rank& rank) {
    const auto& c = plugin().coll();
    char* a = rank.alloc(4096);
    if (rank.rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      rank.ok(c.commAbort(rank.comm), "commAbort");
      const flagosStatus_t status =
          c.allReduce(a, a, 16, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, rank.comm, rank.stream);
      RANK_CHECK(status == FLAGOS_ERROR_DEVICE, "after abort: status " + std::to_string(status));
      RANK_CHECK(plugin().lastError().find("commAbort on rank 1") != std::string::npos,
                 "after abort: " + plugin().lastError());
      return;
    }
    const auto start = Clock::now();
    rank.ok(c.allReduce(a, a, 16, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, rank.comm, rank.stream),
            "allReduce");
    expectAsyncFailure(rank, rank.sync(), FLAGOS_ERROR_DEVICE, {"commAbort on rank 1"});
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    RANK_CHECK(ms < 2000, "the pending allReduce failed after " + std::to_string(ms) + " ms");
  });
}

TEST(CollectivesFailure, DisagreeingJoinsAreRejected) {
  // Two processes claim rank 0.
  flagosUniqueId id = newId();
  auto outcomes = shmtest::runRanks(2, [&](int r) {
    Rank rank(plugin(), 0, 2);
    const flagosStatus_t status = rank.join(id, 300);
    const std::string error = plugin().lastError();
    RANK_CHECK(status == FLAGOS_ERROR_INVALID_ARGUMENT || status == FLAGOS_ERROR_TIMEOUT,
               "child " + std::to_string(r) + ": status " + std::to_string(status));
    if (status == FLAGOS_ERROR_INVALID_ARGUMENT) {
      RANK_CHECK(error.find("rank 0 of 2 joined twice") != std::string::npos, error);
    }
  });
  expectAllOk(outcomes);
  // Two processes disagree on nranks.
  id = newId();
  outcomes = shmtest::runRanks(2, [&](int r) {
    Rank rank(plugin(), r, 2 + r);
    const flagosStatus_t status = rank.join(id, 300);
    RANK_CHECK(status == FLAGOS_ERROR_INVALID_ARGUMENT || status == FLAGOS_ERROR_TIMEOUT,
               "child " + std::to_string(r) + ": status " + std::to_string(status));
    if (status == FLAGOS_ERROR_INVALID_ARGUMENT) {
      RANK_CHECK(plugin().lastError().find("but the communicator was created with nranks=") !=
                     std::string::npos,
                 plugin().lastError());
    }
  });
  expectAllOk(outcomes);
}

TEST(CollectivesFailure, BadArgumentsAreRejectedAtTheCall) {
  onRanks(2, [&](Rank& rank) {
    const auto& c = plugin().coll();
    const auto expect = [&](flagosStatus_t want, flagosStatus_t got, const char* what) {
      RANK_CHECK(got == want, std::string(what) + ": status " + std::to_string(got) +
                                  ", expected " + std::to_string(want));
      RANK_CHECK(!plugin().lastError().empty(), std::string(what) + ": no message");
    };
    flagosUniqueId id;
    rank.ok(c.getUniqueId(&id), "getUniqueId");
    flagosComm_t comm = nullptr;
    flagosUniqueId garbage{};
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.commInitRank(nullptr, 2, &id, 0, 0, 100), "NULL comm");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.commInitRank(&comm, 0, &id, 0, 0, 100), "nranks 0");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.commInitRank(&comm, 2, &id, 2, 0, 100), "rank 2 of 2");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.commInitRank(&comm, 2, &garbage, 0, 0, 100), "bad id");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.commInitRank(&comm, 2, &id, 0, 9, 100), "device 9");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.getUniqueId(nullptr), "NULL id");
    setenv("FLAGOS_HOST_COMM_TIMEOUT_MS", "5s", 1);  // this child only
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.commInitRank(&comm, 2, &id, 0, 0, 0), "bad timeout");
    RANK_CHECK(plugin().lastError().find("FLAGOS_HOST_COMM_TIMEOUT_MS='5s'") != std::string::npos,
               plugin().lastError());

    char* a = rank.alloc(64);
    float host[16] = {};
    const flagosComm_t k = rank.comm;
    const flagosStream_t s = rank.stream;
    expect(FLAGOS_ERROR_INVALID_ARGUMENT,
           c.allReduce(a, a, 4, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, nullptr, s), "NULL comm");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT,
           c.allReduce(a, a, 4, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, k, nullptr), "NULL stream");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.allReduce(a, a, 4, FLAGOS_DTYPE_FLOAT32, 9, k, s),
           "operator 9");
    expect(FLAGOS_ERROR_NOT_SUPPORTED,
           c.allReduce(a, a, 4, FLAGOS_DTYPE_COMPLEX64, FLAGOS_RED_SUM, k, s), "complex sum");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT,
           c.allReduce(host, a, 4, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, k, s), "host sendbuf");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.allReduce(a, a, 4, 12345, FLAGOS_RED_SUM, k, s),
           "unknown dtype");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.broadcast(a, a, 4, FLAGOS_DTYPE_FLOAT32, 2, k, s),
           "root 2 of 2");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.send(a, 4, FLAGOS_DTYPE_FLOAT32, -1, k, s), "peer -1");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.recv(a, 4, FLAGOS_DTYPE_FLOAT32, 2, k, s), "peer 2");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.groupEnd(), "groupEnd without groupStart");
    expect(FLAGOS_ERROR_INVALID_ARGUMENT, c.commDestroy(nullptr), "destroy NULL");
    // Nothing was queued: the ranks are still in step.
    rank.ok(c.allReduce(a, a, 4, FLAGOS_DTYPE_FLOAT32, FLAGOS_RED_SUM, k, s), "allReduce");
  });
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) g_plugin_path = argv[1];
  // Must not start threads in this process before forking the ranks:
  // loading the plugin and making ids does not.
  shmtest::loadPlugin(g_plugin_path);
  return RUN_ALL_TESTS();
}
