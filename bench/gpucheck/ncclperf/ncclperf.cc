// ncclperf: a small nccl-tests-like sweep for the GPU check (scripts/gpu-check.sh), without
// PyTorch's per-call overhead at small sizes. It forks --ranks processes on GPU 0, each with its
// own NCCL_HOSTID (so NCCL treats them as separate nodes and uses a network plugin), and runs
// all-reduce, all-gather, reduce-scatter and broadcast over a size sweep, checking every result.
//
// libnccl.so.2 and the CUDA runtime are opened with dlopen: no link-time dependency, so this
// builds everywhere and says "no GPU" (exit 77) where there is none. The few declarations below
// are our own, written from NCCL's and CUDA's documented C interfaces (values noted inline).
//
// Output: progress on stdout (rank 0) and, with --json FILE, rows in the GPU check's schema
// (collective, bytes, iters, time_us, algbw_gbs, busbw_gbs, wrong). Exit: 0 every result
// correct, 1 a wrong result or an NCCL/CUDA error, 2 bad arguments, 77 no GPU or no NCCL.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/cli_args.h"

namespace {

// NCCL's C interface: results and enums are ints, communicators and streams opaque pointers,
// the unique id 128 bytes. ncclFloat32 = 7, ncclFloat64 = 8, ncclSum = 0, ncclMax = 2.
struct UniqueId {
  char bytes[128];
};
using Comm = void*;
using Stream = void*;
constexpr int kFloat32 = 7, kFloat64 = 8, kSum = 0, kMax = 2;
constexpr int kMemcpyHostToDevice = 1, kMemcpyDeviceToHost = 2;

struct Api {
  int (*ncclGetVersion)(int*);
  int (*ncclGetUniqueId)(UniqueId*);
  int (*ncclCommInitRank)(Comm*, int, UniqueId, int);
  int (*ncclCommDestroy)(Comm);
  const char* (*ncclGetErrorString)(int);
  int (*ncclAllReduce)(const void*, void*, size_t, int, int, Comm, Stream);
  int (*ncclAllGather)(const void*, void*, size_t, int, Comm, Stream);
  int (*ncclReduceScatter)(const void*, void*, size_t, int, int, Comm, Stream);
  int (*ncclBroadcast)(const void*, void*, size_t, int, int, Comm, Stream);
  int (*cudaGetDeviceCount)(int*);
  int (*cudaSetDevice)(int);
  int (*cudaMalloc)(void**, size_t);
  int (*cudaFree)(void*);
  int (*cudaMemcpy)(void*, const void*, size_t, int);
  int (*cudaStreamCreate)(Stream*);
  int (*cudaStreamSynchronize)(Stream);
  const char* (*cudaGetErrorString)(int);
};

template <typename F>
bool bind(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  return *fn != nullptr;
}

// Returns "" on success, else why the libraries are unusable.
std::string loadApi(Api* api, const std::string& ncclPath, const std::string& cudartPath) {
  void* nccl = dlopen(ncclPath.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (nccl == nullptr) return std::string("cannot open ") + ncclPath + ": " + dlerror();
  void* cudart = nullptr;
  std::vector<std::string> names = {cudartPath};
  if (cudartPath.empty()) names = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  for (const auto& n : names) {
    if ((cudart = dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL)) != nullptr) break;
  }
  if (cudart == nullptr) return "cannot open the CUDA runtime (libcudart.so.13/.12)";
  bool ok = bind(nccl, "ncclGetVersion", &api->ncclGetVersion) &&
            bind(nccl, "ncclGetUniqueId", &api->ncclGetUniqueId) &&
            bind(nccl, "ncclCommInitRank", &api->ncclCommInitRank) &&
            bind(nccl, "ncclCommDestroy", &api->ncclCommDestroy) &&
            bind(nccl, "ncclGetErrorString", &api->ncclGetErrorString) &&
            bind(nccl, "ncclAllReduce", &api->ncclAllReduce) &&
            bind(nccl, "ncclAllGather", &api->ncclAllGather) &&
            bind(nccl, "ncclReduceScatter", &api->ncclReduceScatter) &&
            bind(nccl, "ncclBroadcast", &api->ncclBroadcast);
  if (!ok) return "libnccl lacks an expected function";
  ok = bind(cudart, "cudaGetDeviceCount", &api->cudaGetDeviceCount) &&
       bind(cudart, "cudaSetDevice", &api->cudaSetDevice) &&
       bind(cudart, "cudaMalloc", &api->cudaMalloc) && bind(cudart, "cudaFree", &api->cudaFree) &&
       bind(cudart, "cudaMemcpy", &api->cudaMemcpy) &&
       bind(cudart, "cudaStreamCreate", &api->cudaStreamCreate) &&
       bind(cudart, "cudaStreamSynchronize", &api->cudaStreamSynchronize) &&
       bind(cudart, "cudaGetErrorString", &api->cudaGetErrorString);
  return ok ? "" : "the CUDA runtime lacks an expected function";
}

struct Options {
  int ranks = 2;
  size_t minBytes = 8, maxBytes = size_t(256) << 20;
  int factor = 4, iters = 20, minIters = 3, warmup = 2;
  double timePerSize = 0.15;
  double budgetSeconds = 0;  // 0: no limit; else sizes starting later are skipped
  // The budget counts from the start (before fork), so it covers NCCL's init as well.
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::vector<std::string> collectives = {"all_reduce", "all_gather", "reduce_scatter",
                                          "broadcast"};
  std::string json, nccl = "libnccl.so.2", cudart;
};

// Sizes as the GPU check writes them: bytes, or K/M/G (binary) suffixed.
bool parseSize(const std::string& text, size_t* out) {
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s || *s == '-' || errno == ERANGE) return false;
  std::string unit(end);
  int shift = unit == "K" || unit == "k"   ? 10
              : unit == "M" || unit == "m" ? 20
              : unit == "G" || unit == "g" ? 30
              : unit.empty()               ? 0
                                           : -1;
  if (shift < 0 || v > (~0ull >> shift)) return false;
  *out = size_t(v << shift);
  return *out > 0;
}

std::string checkSize(const std::string& text) {
  size_t bytes = 0;
  return parseSize(text, &bytes) ? "" : "'" + text + "' is not a size (N, NK, NM or NG; > 0)";
}

// The GPU check's values (bench/gpucheck/gpu_check.py, value()): small integers, exact sums.
float value(size_t k, int r) { return float(((k % 31) * 13 + size_t(r) * 7) % 31 + 1); }

double busFactor(const std::string& c, int n) {
  if (c == "all_reduce") return 2.0 * (n - 1) / n;
  if (c == "all_gather" || c == "reduce_scatter") return double(n - 1) / n;
  return 1.0;
}

class Rank {
 public:
  Rank(const Api& api, const Options& o, int rank) : api_(api), o_(o), rank_(rank) {}

  // Returns the process exit code.
  int run(const UniqueId& id) {
    if (!cuda(api_.cudaSetDevice(0), "cudaSetDevice") ||
        !cuda(api_.cudaStreamCreate(&stream_), "cudaStreamCreate") ||
        !nccl(api_.ncclCommInitRank(&comm_, o_.ranks, id, rank_), "ncclCommInitRank"))
      return 1;
    std::string rows;
    bool allRight = true;
    std::string skipped;
    // Sizes outermost: when the budget runs out, what is lost is the largest sizes of every
    // collective, not every size of the last collectives.
    for (size_t size = o_.minBytes;; size = std::min(size * o_.factor, o_.maxBytes)) {
      if (o_.budgetSeconds > 0) {  // all ranks must agree, or some would wait forever
        double late =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - o_.start).count() >
            o_.budgetSeconds;
        if (!maxOverRanks(&late)) return 1;
        if (late > 0) {
          skipped = "sizes from " + std::to_string(size) + " B: time budget spent";
          if (rank_ == 0) std::printf("progress %s\n", skipped.c_str());
          break;
        }
      }
      for (const auto& coll : o_.collectives) {
        long wrong = 0;
        double us = 0;
        int iters = 0;
        if (!sweepOne(coll, size, &wrong, &us, &iters)) return 1;
        if (iters == 0) continue;
        double algbw = double(size) / (us * 1e-6) / 1e9;
        char line[400];
        std::snprintf(line, sizeof line,
                      "%s{\"collective\": \"%s\", \"bytes\": %zu, \"iters\": %d, "
                      "\"time_us\": %.3f, \"algbw_gbs\": %.5g, \"busbw_gbs\": %.5g, "
                      "\"wrong\": %ld}",
                      rows.empty() ? "" : ",\n  ", coll.c_str(), size, iters, us, algbw,
                      algbw * busFactor(coll, o_.ranks), wrong);
        rows += line;
        if (rank_ == 0)
          std::printf("progress %-14s %10zu B %6d it %11.1f us %8.3f GB/s busbw%s\n", coll.c_str(),
                      size, iters, us, algbw * busFactor(coll, o_.ranks), wrong ? "  WRONG" : "");
        std::fflush(stdout);
        allRight = allRight && wrong == 0;
      }
      if (size >= o_.maxBytes) break;
    }
    api_.ncclCommDestroy(comm_);
    if (!o_.json.empty()) {
      std::string path = o_.json;  // %r: this rank; without it only rank 0 writes the file
      size_t at = path.find("%r");
      if (at != std::string::npos)
        path.replace(at, 2, std::to_string(rank_));
      else if (rank_ != 0)
        path += ".rank" + std::to_string(rank_);
      FILE* f = std::fopen(path.c_str(), "w");
      if (f == nullptr) return 1;
      std::fprintf(f, "{\"rank\": %d, \"skipped\": [%s], \"rows\": [\n  %s]}\n", rank_,
                   skipped.empty() ? "" : ("\"" + skipped + "\"").c_str(), rows.c_str());
      std::fclose(f);
    }
    return allRight ? 0 : 1;
  }

 private:
  bool cuda(int rc, const char* what) {
    if (rc == 0) return true;
    std::fprintf(stderr, "ncclperf rank %d: %s: %s\n", rank_, what, api_.cudaGetErrorString(rc));
    return false;
  }
  bool nccl(int rc, const char* what) {
    if (rc == 0) return true;
    std::fprintf(stderr, "ncclperf rank %d: %s: %s\n", rank_, what, api_.ncclGetErrorString(rc));
    return false;
  }

  bool launch(const std::string& c, const float* in, float* out, size_t perRank) {
    if (c == "all_reduce")
      return nccl(api_.ncclAllReduce(in, out, perRank, kFloat32, kSum, comm_, stream_),
                  "AllReduce");
    if (c == "all_gather")
      return nccl(api_.ncclAllGather(in, out, perRank, kFloat32, comm_, stream_), "AllGather");
    if (c == "reduce_scatter")
      return nccl(api_.ncclReduceScatter(in, out, perRank, kFloat32, kSum, comm_, stream_),
                  "ReduceScatter");
    return nccl(api_.ncclBroadcast(in, out, perRank, kFloat32, 0, comm_, stream_), "Broadcast");
  }

  bool maxOverRanks(double* v) {  // every rank must take the same iteration count
    double* d = nullptr;
    bool ok = cuda(api_.cudaMalloc(reinterpret_cast<void**>(&d), sizeof(double)), "cudaMalloc") &&
              cuda(api_.cudaMemcpy(d, v, sizeof(double), kMemcpyHostToDevice), "cudaMemcpy") &&
              nccl(api_.ncclAllReduce(d, d, 1, kFloat64, kMax, comm_, stream_), "AllReduce") &&
              cuda(api_.cudaStreamSynchronize(stream_), "sync") &&
              cuda(api_.cudaMemcpy(v, d, sizeof(double), kMemcpyDeviceToHost), "cudaMemcpy");
    if (d != nullptr) api_.cudaFree(d);
    return ok;
  }

  // One size of one collective: check, warm up, time. iters stays 0 when the size is too small
  // to give each rank one element (the GPU check's convention: nccl-tests' sizes).
  bool sweepOne(const std::string& c, size_t size, long* wrong, double* us, int* iters) {
    const int n = o_.ranks;
    bool gathered = c == "all_gather" || c == "reduce_scatter";
    size_t per = gathered ? size / (4 * size_t(n)) : size / 4;
    if (per == 0) return true;
    size_t inCount = c == "reduce_scatter" ? per * n : per;
    size_t outCount = c == "all_gather" ? per * n : per;
    std::vector<float> hostIn(inCount), want(outCount), got(outCount);
    for (size_t k = 0; k < inCount; ++k) {
      if (c == "all_gather")
        hostIn[k] = value(k + size_t(rank_) * per, rank_);
      else if (c == "broadcast")
        hostIn[k] = rank_ == 0 ? value(k, 0) : -1.0f;
      else
        hostIn[k] = value(k, rank_);
    }
    for (size_t k = 0; k < outCount; ++k) {
      if (c == "all_gather")
        want[k] = value(k, int(k / per));
      else if (c == "broadcast")
        want[k] = value(k, 0);
      else {
        size_t g = c == "reduce_scatter" ? size_t(rank_) * per + k : k;
        float s = 0;
        for (int r = 0; r < n; ++r) s += value(g, r);
        want[k] = s;
      }
    }
    float *in = nullptr, *out = nullptr;
    bool ok = cuda(api_.cudaMalloc(reinterpret_cast<void**>(&in), inCount * 4), "cudaMalloc") &&
              cuda(api_.cudaMalloc(reinterpret_cast<void**>(&out), outCount * 4), "cudaMalloc");
    auto check = [&]() {
      if (!cuda(api_.cudaMemcpy(in, hostIn.data(), inCount * 4, kMemcpyHostToDevice), "copy") ||
          !launch(c, in, out, per) || !cuda(api_.cudaStreamSynchronize(stream_), "sync") ||
          !cuda(api_.cudaMemcpy(got.data(), out, outCount * 4, kMemcpyDeviceToHost), "copy"))
        return false;
      for (size_t k = 0; k < outCount; ++k) *wrong += got[k] != want[k];
      return true;
    };
    using Clock = std::chrono::steady_clock;
    auto timed = [&](int count, double* seconds) {
      auto t0 = Clock::now();
      for (int i = 0; i < count; ++i)
        if (!launch(c, in, out, per)) return false;
      if (!cuda(api_.cudaStreamSynchronize(stream_), "sync")) return false;
      *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      return true;
    };
    double one = 0, total = 0;
    ok = ok && check() && timed(o_.warmup, &total) && timed(1, &one) && maxOverRanks(&one);
    if (ok) {
      *iters = int(std::min<double>(
          o_.iters, std::max<double>(o_.minIters, o_.timePerSize / std::max(one, 1e-7))));
      ok = timed(*iters, &total) && maxOverRanks(&total) && check();
      *us = total / *iters * 1e6;
    }
    if (in != nullptr) api_.cudaFree(in);
    if (out != nullptr) api_.cudaFree(out);
    return ok;
  }

  const Api& api_;
  const Options& o_;
  int rank_;
  Stream stream_ = nullptr;
  Comm comm_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  using autopilot::cli::Interval;
  autopilot::cli::Args args(
      "ncclperf",
      "One GPU, several processes, one per 'node': all-reduce, all-gather, reduce-scatter and\n"
      "broadcast over a size sweep, every result checked.");
  args.addInt("--ranks", o.ranks, 2, 8, "processes (NCCL ranks) on GPU 0");
  std::string minBytes = "8", maxBytes = "256M";
  args.addChecked("--min-bytes", minBytes, checkSize, "smallest size")
      .typeName("BYTES")
      .showDefault();
  args.addChecked("--max-bytes", maxBytes, checkSize, "largest size")
      .typeName("BYTES")
      .showDefault();
  args.addInt("--factor", o.factor, 2, 1 << 20, "size step (multiplier)");
  args.addInt("--iters", o.iters, 1, 1 << 30, "timed iterations per size, at most");
  args.addInt("--min-iters", o.minIters, 1, 1 << 30, "timed iterations per size, at least");
  args.addInt("--warmup", o.warmup, 0, 1 << 30, "untimed iterations per size");
  args.addReal("--time-per-size", o.timePerSize, Interval::positive(),
               "seconds of timed iterations aimed at per size (between --min-iters and --iters)");
  std::string collectives = "all_reduce,all_gather,reduce_scatter,broadcast";
  args.addChoiceList("--collectives", collectives,
                     {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}, "comma-separated",
                     /*requireOne=*/true)
      .showDefault();
  args.addReal("--budget-s", o.budgetSeconds, Interval::atLeast(0),
               "sizes starting later than this after the start are skipped (0: no limit)");
  args.addText("--json", o.json, "the rows; %r in FILE: each rank's, else rank 0's only")
      .typeName("FILE");
  args.addText("--nccl", o.nccl, "NCCL library").typeName("LIB").showDefault();
  args.addText("--cudart", o.cudart, "CUDA runtime library (default: libcudart.so.13, .12, .so)")
      .typeName("LIB");
  args.footer(
      "Exit: 0 every result correct, 1 a wrong result or an NCCL/CUDA error, 2 bad\n"
      "arguments, 77 no GPU or no NCCL.");
  if (std::optional<int> rc = args.parse(argc, argv)) return *rc;
  parseSize(minBytes, &o.minBytes);
  parseSize(maxBytes, &o.maxBytes);
  o.collectives.clear();
  for (size_t at = 0; at < collectives.size();) {
    size_t comma = std::min(collectives.find(',', at), collectives.size());
    if (comma > at) o.collectives.push_back(collectives.substr(at, comma - at));
    at = comma + 1;
  }
  if (o.minBytes > o.maxBytes || o.minIters > o.iters) {
    std::fprintf(stderr,
                 "ncclperf: --min-bytes above --max-bytes or --min-iters above --iters "
                 "(see --help)\n");
    return autopilot::cli::kUsageError;
  }

  // The parent only opens the libraries to report the version; CUDA is first touched in the
  // children (a CUDA context does not survive fork()).
  Api api{};
  std::string why = loadApi(&api, o.nccl, o.cudart);
  if (!why.empty()) {
    std::fprintf(stderr, "ncclperf: %s: nothing checked\n", why.c_str());
    return 77;
  }
  int version = 0;
  api.ncclGetVersion(&version);
  std::printf("ncclperf: NCCL %d.%d.%d (%s), %d ranks on GPU 0\n", version / 10000,
              (version / 100) % 100, version % 100, o.nccl.c_str(), o.ranks);
  std::fflush(stdout);

  char dir[] = "/tmp/ncclperf-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  std::string idPath = std::string(dir) + "/id";
  std::vector<pid_t> kids;
  for (int r = 0; r < o.ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid > 0) {
      kids.push_back(pid);
      continue;
    }
    setenv("NCCL_HOSTID", ("autopilot-ncclperf-node-" + std::to_string(r)).c_str(), 1);
    int count = 0;
    int rc = api.cudaGetDeviceCount(&count);
    if (rc != 0 || count < 1) {
      if (r == 0)
        std::fprintf(stderr, "ncclperf: no GPU (%s): nothing checked\n",
                     rc != 0 ? api.cudaGetErrorString(rc) : "0 devices");
      _exit(77);
    }
    UniqueId id{};
    if (r == 0) {  // publish the id atomically; the others poll for it
      if (api.ncclGetUniqueId(&id) != 0) _exit(1);
      std::string tmp = idPath + ".tmp";
      FILE* f = std::fopen(tmp.c_str(), "wb");
      if (f == nullptr || std::fwrite(&id, sizeof id, 1, f) != 1 || std::fclose(f) != 0 ||
          std::rename(tmp.c_str(), idPath.c_str()) != 0)
        _exit(1);
    } else {
      bool got = false;
      for (int i = 0; i < 6000 && !got; ++i) {  // 60 s
        FILE* f = std::fopen(idPath.c_str(), "rb");
        if (f != nullptr) {
          got = std::fread(&id, sizeof id, 1, f) == 1;
          std::fclose(f);
        }
        if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (!got) _exit(1);
    }
    Rank rank(api, o, r);
    std::fflush(stdout);
    _exit(rank.run(id));
  }
  int worst = 0;
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (rc == 77 && worst == 0)
      worst = 77;
    else if (rc != 0 && rc != 77)
      worst = 1;
  }
  unlink(idPath.c_str());
  rmdir(dir);
  return worst;
}
