// Test double for ncclperf only (CTest gpucheck_ncclperf): the handful of NCCL and CUDA
// runtime functions ncclperf opens, on host memory, with collectives computed from files the
// ranks exchange in a shared directory. It exercises ncclperf's own logic (fork, unique id,
// value checks, iteration agreement, budget, JSON) where no GPU exists; it says nothing about
// NCCL. FAKE_NCCL_DIR: where communicators live; FAKE_NCCL_CORRUPT=AllGather (or another
// name): the last rank gets one wrong element from that collective.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct FakeComm {
  std::string dir;
  int rank = 0, n = 0;
  long seq = 0;
};

std::vector<char> readAll(const std::string& path) {
  for (int i = 0; i < 30000; ++i) {  // 30 s
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f != nullptr) {
      std::vector<char> data;
      char buf[65536];
      size_t got;
      while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + got);
      std::fclose(f);
      return data;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::fprintf(stderr, "fake_nccl: %s never appeared\n", path.c_str());
  std::exit(3);
}

// Publishes this rank's contribution and returns every rank's, in rank order.
std::vector<std::vector<char>> exchange(FakeComm* c, const void* data, size_t bytes) {
  std::string base = c->dir + "/" + std::to_string(c->seq++) + ".";
  std::string tmp = base + std::to_string(c->rank) + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) std::exit(3);
  if (bytes > 0) std::fwrite(data, 1, bytes, f);
  std::fclose(f);
  std::rename(tmp.c_str(), (base + std::to_string(c->rank)).c_str());
  std::vector<std::vector<char>> all;
  for (int r = 0; r < c->n; ++r) all.push_back(readAll(base + std::to_string(r)));
  return all;
}

template <typename T>
void reduce(const std::vector<std::vector<char>>& all, size_t offset, size_t count, int op,
            void* out) {
  T* o = static_cast<T*>(out);
  for (size_t i = 0; i < count; ++i) {
    T acc = reinterpret_cast<const T*>(all[0].data())[offset + i];
    for (size_t r = 1; r < all.size(); ++r) {
      T v = reinterpret_cast<const T*>(all[r].data())[offset + i];
      acc = op == 2 ? (v > acc ? v : acc) : acc + v;  // 2: max, else sum
    }
    o[i] = acc;
  }
}

size_t elemSize(int type) { return type == 8 ? 8 : 4; }

void reduceTyped(int type, const std::vector<std::vector<char>>& all, size_t offset, size_t count,
                 int op, void* out) {
  if (type == 8)
    reduce<double>(all, offset, count, op, out);
  else
    reduce<float>(all, offset, count, op, out);
}

void maybeCorrupt(FakeComm* c, const char* name, void* recv) {
  const char* which = std::getenv("FAKE_NCCL_CORRUPT");
  if (which != nullptr && std::strcmp(which, name) == 0 && c->rank == c->n - 1)
    static_cast<float*>(recv)[0] += 1.0f;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) int ncclGetVersion(int* v) {
  *v = 1;  // prints as 0.0.1: never mistaken for a real NCCL
  return 0;
}
__attribute__((visibility("default"))) int ncclGetUniqueId(char* id) {
  const char* root = std::getenv("FAKE_NCCL_DIR");
  std::string dir = std::string(root ? root : "/tmp") + "/comm-" + std::to_string(getpid());
  mkdir(dir.c_str(), 0700);
  std::memset(id, 0, 128);
  std::snprintf(id, 128, "%s", dir.c_str());
  return 0;
}
struct Id {
  char bytes[128];
};
__attribute__((visibility("default"))) int ncclCommInitRank(void** comm, int n, Id id, int rank) {
  auto* c = new FakeComm;
  c->dir = id.bytes;
  c->rank = rank;
  c->n = n;
  *comm = c;
  return 0;
}
__attribute__((visibility("default"))) int ncclCommDestroy(void* comm) {
  delete static_cast<FakeComm*>(comm);
  return 0;
}
__attribute__((visibility("default"))) const char* ncclGetErrorString(int) { return "fake error"; }
__attribute__((visibility("default"))) int ncclAllReduce(const void* s, void* r, size_t count,
                                                         int type, int op, void* comm, void*) {
  auto* c = static_cast<FakeComm*>(comm);
  auto all = exchange(c, s, count * elemSize(type));
  reduceTyped(type, all, 0, count, op, r);
  if (type == 7) maybeCorrupt(c, "AllReduce", r);
  return 0;
}
__attribute__((visibility("default"))) int ncclAllGather(const void* s, void* r, size_t count,
                                                         int type, void* comm, void*) {
  auto* c = static_cast<FakeComm*>(comm);
  size_t bytes = count * elemSize(type);
  auto all = exchange(c, s, bytes);
  for (int k = 0; k < c->n; ++k)
    std::memcpy(static_cast<char*>(r) + k * bytes, all[k].data(), bytes);
  maybeCorrupt(c, "AllGather", r);
  return 0;
}
__attribute__((visibility("default"))) int ncclReduceScatter(const void* s, void* r, size_t count,
                                                             int type, int op, void* comm, void*) {
  auto* c = static_cast<FakeComm*>(comm);
  auto all = exchange(c, s, count * c->n * elemSize(type));
  reduceTyped(type, all, count * c->rank, count, op, r);
  maybeCorrupt(c, "ReduceScatter", r);
  return 0;
}
__attribute__((visibility("default"))) int ncclBroadcast(const void* s, void* r, size_t count,
                                                         int type, int root, void* comm, void*) {
  auto* c = static_cast<FakeComm*>(comm);
  auto all = exchange(c, s, count * elemSize(type));
  std::memcpy(r, all[root].data(), count * elemSize(type));
  maybeCorrupt(c, "Broadcast", r);
  return 0;
}
__attribute__((visibility("default"))) int cudaGetDeviceCount(int* n) {
  *n = 1;
  return 0;
}
__attribute__((visibility("default"))) int cudaSetDevice(int) { return 0; }
__attribute__((visibility("default"))) int cudaMalloc(void** p, size_t n) {
  *p = std::malloc(n ? n : 1);
  return *p ? 0 : 2;
}
__attribute__((visibility("default"))) int cudaFree(void* p) {
  std::free(p);
  return 0;
}
__attribute__((visibility("default"))) int cudaMemcpy(void* d, const void* s, size_t n, int) {
  std::memcpy(d, s, n);
  return 0;
}
__attribute__((visibility("default"))) int cudaStreamCreate(void** s) {
  static int dummy;
  *s = &dummy;
  return 0;
}
__attribute__((visibility("default"))) int cudaStreamSynchronize(void*) { return 0; }
__attribute__((visibility("default"))) const char* cudaGetErrorString(int) { return "fake error"; }
}
