// `autopilot ibbench`: the verbs transport on real RDMA NICs, for users with hardware. Per NIC,
// our plugin's two-process driver (the same stream as netbench and the tests: 4 MiB messages, 8
// in flight, like NCCL's pipelined steps) against perftest's ib_write_bw on the same NIC, in the
// same run; then every NIC at once (our striping, by measured bandwidth) against the sum of the
// per-NIC ib_write_bw figures. Both processes run on this host: each NIC talks to itself (or to
// the NIC given with --peer-hca), so no second machine is needed. For NCCL itself (our plugin vs
// NCCL's internal IB transport) use bench/nccl-tests --modes stock,net --transport ib.
//
// Under emulation (Soft-RoCE in qemu: test/verbs/rxe-vm.sh) it runs too, which is how CI checks
// that it works; those figures mean nothing.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cli_args.h"
#include "bench/commands.h"
#include "bench/net/pair.h"
#include "net_plugin/core/rail_selection.h"
#include "net_plugin/transport/ibverbs/port_attributes.h"

namespace autopilot::bench {
namespace {

struct Port {
  std::string device;
  int port = 1;
  bool roce = false;
  int gidIndex = -1;
  std::string name() const { return device + ":" + std::to_string(port); }
};

struct Row {
  std::string name;
  double oursGbps = 0, perftestGbps = 0;
  std::string error;
};

struct Options {
  std::vector<std::string> hca, peerHca;
  double seconds = 5;
  size_t messageBytes = 4 << 20;
  int depth = 8;
  bool perftest = true;
  std::string json;
};

std::string readLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// Active ports from sysfs (no verbs calls in this process: its children load the plugin).
std::vector<Port> activePorts() {
  std::vector<Port> out;
  const std::string root = "/sys/class/infiniband";
  DIR* d = opendir(root.c_str());
  if (d == nullptr) return out;
  std::vector<std::string> devices;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') devices.push_back(e->d_name);
  }
  closedir(d);
  std::sort(devices.begin(), devices.end());
  for (const std::string& dev : devices) {
    for (int p = 1; p <= 8; ++p) {
      std::string base = root + "/" + dev + "/ports/" + std::to_string(p);
      std::string state = readLine(base + "/state");
      if (state.empty()) break;
      if (state.find("ACTIVE") == std::string::npos) continue;
      Port port{dev, p, readLine(base + "/link_layer") == "Ethernet", -1};
      if (port.roce) {
        std::vector<net::ib::GidEntry> table;
        for (int g = 0; g < 256; ++g) {
          std::string text = readLine(base + "/gids/" + std::to_string(g));
          if (text.empty()) break;
          net::ib::GidEntry e;
          e.index = g;
          unsigned v[8];
          if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3],
                          &v[4], &v[5], &v[6], &v[7]) != 8) {
            continue;
          }
          for (int k = 0; k < 8; ++k) {
            e.raw[2 * k] = uint8_t(v[k] >> 8);
            e.raw[2 * k + 1] = uint8_t(v[k]);
          }
          std::string type = readLine(base + "/gid_attrs/types/" + std::to_string(g));
          e.type = type.find("v2") != std::string::npos ? net::ib::GidType::kRoceV2
                   : type.empty()                       ? net::ib::GidType::kUnknown
                                                        : net::ib::GidType::kRoceV1;
          table.push_back(e);
        }
        port.gidIndex = net::ib::chooseGidIndex(table, -1);
      }
      out.push_back(port);
    }
  }
  return out;
}

const Port* findPort(const std::vector<Port>& ports, const std::string& name) {
  for (const Port& p : ports) {
    if (p.name() == name || p.device == name) return &p;
  }
  return nullptr;
}

std::string exactList(const std::vector<const Port*>& ports) {
  std::string s = "=";
  for (size_t i = 0; i < ports.size(); ++i) s += (i ? "," : "") + ports[i]->name();
  return s;
}

double ours(const Options& opt, const std::vector<const Port*>& senders,
            const std::vector<const Port*>& receivers, std::string* error) {
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_TRANSPORT", "ib"}, {"NCCL_AUTOPILOT_NET_ADDRS", "127.0.0.1"}};
  o.senderEnv = {{"NCCL_AUTOPILOT_IB_HCA", exactList(senders)}};
  o.receiverEnv = {{"NCCL_AUTOPILOT_IB_HCA", exactList(receivers)}};
  o.timeoutMs = int(opt.seconds * 1000) + 120000;
  StreamRun run =
      runStream(o, opt.messageBytes, opt.depth, Verify::kSampled,
                [&](const std::function<void()>&) { usleep(useconds_t(opt.seconds * 1e6)); });
  if (!run.ok || run.result.corrupt != 0 || run.result.seconds <= 0) {
    *error = run.ok ? "data corrupted" : "transfer failed";
    return 0;
  }
  return double(run.result.bytes) * 8 / run.result.seconds / 1e9;
}

// ib_write_bw between `sender` and `receiver` on this host (server on the receiver's NIC,
// client on the sender's, out-of-band over 127.0.0.1): the average Gbit/s of its report.
double perftest(const Options& opt, const Port& sender, const Port& receiver, std::string* error) {
  auto args = [&](const Port& p) {
    std::vector<std::string> a = {"ib_write_bw",
                                  "-d",
                                  p.device,
                                  "-i",
                                  std::to_string(p.port),
                                  "-s",
                                  std::to_string(opt.messageBytes),
                                  "-D",
                                  std::to_string(std::max(1, int(opt.seconds))),
                                  "--report_gbits",
                                  "-F"};
    if (p.roce && p.gidIndex >= 0) {
      a.push_back("-x");
      a.push_back(std::to_string(p.gidIndex));
    }
    return a;
  };
  std::vector<std::string> serverArgs = args(receiver);
  pid_t server = spawn([&]() -> int {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    std::vector<char*> argv;
    for (std::string& s : serverArgs) argv.push_back(s.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    return 127;
  });
  usleep(500000);  // the server listens on its TCP port
  std::string client;
  for (const std::string& a : args(sender)) client += a + " ";
  client += "127.0.0.1 2>&1";
  double gbps = 0;
  int rc = -1;
  if (FILE* p = popen(client.c_str(), "r")) {
    char line[512];
    while (std::fgets(line, sizeof(line), p)) {
      // The result row: #bytes #iterations BW-peak BW-average MsgRate.
      unsigned long long bytes = 0, iters = 0;
      double peak = 0, average = 0;
      if (std::sscanf(line, " %llu %llu %lf %lf", &bytes, &iters, &peak, &average) == 4 &&
          bytes == opt.messageBytes) {
        gbps = average;
      }
    }
    rc = pclose(p);
  }
  waitChild(server, 10000);  // the server ends with the client; killed if it does not
  if (gbps <= 0) *error = "no ib_write_bw result (exit " + std::to_string(rc) + ")";
  return gbps;
}

void printTable(const std::vector<Row>& rows) {
  std::printf("\n%-28s %14s %18s %8s\n", "NIC(s)", "ours Gbit/s", "ib_write_bw Gbit/s", "ratio");
  for (const Row& r : rows) {
    double ratio = r.perftestGbps > 0 ? r.oursGbps / r.perftestGbps : 0;
    std::printf("%-28s %14.2f %18.2f %8.2f%s%s\n", r.name.c_str(), r.oursGbps, r.perftestGbps,
                ratio, r.error.empty() ? "" : "  ", r.error.c_str());
  }
}

bool writeJson(const std::string& path, const std::vector<Row>& rows, const Options& opt) {
  std::ofstream f(path);
  if (!f) return false;
  f << "{\n  \"tool\": \"autopilot ibbench\",\n  \"message_bytes\": " << opt.messageBytes
    << ",\n  \"depth\": " << opt.depth << ",\n  \"seconds\": " << opt.seconds
    << ",\n  \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "    {\"name\": \"%s\", \"gbps\": %.4f, \"ib_write_bw_gbps\": %.4f, "
                  "\"ratio\": %.4f, \"error\": \"%s\"}%s\n",
                  r.name.c_str(), r.oursGbps, r.perftestGbps,
                  r.perftestGbps > 0 ? r.oursGbps / r.perftestGbps : 0.0, r.error.c_str(),
                  i + 1 < rows.size() ? "," : "");
    f << buf;
  }
  f << "  ]\n}\n";
  return bool(f);
}

int cmdIbbench(int argc, char** argv) {
  Options opt;
  std::string hca, peerHca;
  bool quick = false;
  cli::Args args(
      "autopilot ibbench",
      "Per RDMA NIC (port), then all together: the net plugin's verbs transport between two\n"
      "processes of this host against perftest's ib_write_bw on the same NIC(s).");
  args.addText("--hca", hca,
               "ports 'dev:port' or devices, comma-separated (default: every active port)")
      .typeName("LIST");
  args.addText("--peer-hca", peerHca,
               "pairs each with another port as the receiving end (default: the same port, "
               "loopback)")
      .typeName("LIST");
  cli::Opt seconds = args.addReal("--seconds", opt.seconds, cli::Interval::positive(),
                                  "per row (0.5 .. 600; values outside are clamped)");
  cli::Opt size = args.addInt("--size", opt.messageBytes, size_t(1), ~size_t(0),
                              "message bytes (decimal or 0x hex; 4096 .. 1 GiB, values "
                              "outside are clamped)",
                              cli::Radix::kAny);
  args.addFlag("--quick", quick, "1 s per row, 1 MiB messages (--seconds and --size still apply)");
  bool noPerftest = false;
  args.addFlag("--no-perftest", noPerftest, "ours only");
  args.addText("--json", opt.json, "the results as JSON").typeName("FILE");
  args.footer("Exit code 77: no RDMA port.");
  if (std::optional<int> rc = args.parse(argc, argv)) return *rc;
  if (!hca.empty()) opt.hca = net::core::splitList(hca);
  if (!peerHca.empty()) opt.peerHca = net::core::splitList(peerHca);
  opt.perftest = !noPerftest;
  if (quick) {
    if (!seconds.given()) opt.seconds = 1;
    if (!size.given()) opt.messageBytes = 1 << 20;
  }
  opt.seconds = std::clamp(opt.seconds, 0.5, 600.0);
  opt.messageBytes = std::clamp<size_t>(opt.messageBytes, 4096, size_t(1) << 30);
  std::vector<Port> ports = activePorts();
  if (ports.empty()) {
    std::printf("ibbench: skipped: no active RDMA port (/sys/class/infiniband)\n");
    return 77;
  }
  std::vector<const Port*> senders, receivers;
  if (opt.hca.empty()) {
    for (const Port& p : ports) opt.hca.push_back(p.name());
  }
  for (size_t i = 0; i < opt.hca.size(); ++i) {
    const Port* s = findPort(ports, opt.hca[i]);
    const Port* r = i < opt.peerHca.size() ? findPort(ports, opt.peerHca[i]) : s;
    if (s == nullptr || r == nullptr) {
      std::fprintf(stderr, "ibbench: no active port %s\n",
                   (s == nullptr ? opt.hca[i] : opt.peerHca[i]).c_str());
      return 2;
    }
    senders.push_back(s);
    receivers.push_back(r);
  }
  if (opt.perftest && std::system("command -v ib_write_bw > /dev/null 2>&1") != 0) {
    std::printf("ibbench: ib_write_bw not found (Debian package perftest): ours only\n");
    opt.perftest = false;
  }
  std::printf("ibbench: %zu NIC(s), %zu-byte messages, %d in flight, %.1f s each\n", senders.size(),
              opt.messageBytes, opt.depth, opt.seconds);
  std::vector<Row> rows;
  double perftestSum = 0;
  for (size_t i = 0; i < senders.size(); ++i) {
    Row row;
    row.name = senders[i]->name() +
               (receivers[i] != senders[i] ? " -> " + receivers[i]->name() : " (loopback)");
    row.oursGbps = ours(opt, {senders[i]}, {receivers[i]}, &row.error);
    if (opt.perftest) {
      std::string error;
      row.perftestGbps = perftest(opt, *senders[i], *receivers[i], &error);
      if (!error.empty()) row.error += (row.error.empty() ? "" : "; ") + error;
    }
    perftestSum += row.perftestGbps;
    rows.push_back(row);
  }
  if (senders.size() > 1) {
    Row all;
    all.name = "all " + std::to_string(senders.size()) + " NICs (striped)";
    all.oursGbps = ours(opt, senders, receivers, &all.error);
    all.perftestGbps = perftestSum;  // the sum of the NICs measured one at a time
    rows.push_back(all);
  }
  printTable(rows);
  if (!opt.json.empty() && !writeJson(opt.json, rows, opt)) {
    std::fprintf(stderr, "ibbench: cannot write %s\n", opt.json.c_str());
    return 1;
  }
  for (const Row& r : rows) {
    if (r.oursGbps <= 0) return 1;
  }
  return 0;
}

cli::CommandRegistrar reg("ibbench", cmdIbbench,
                          "RDMA NICs: the verbs transport vs ib_write_bw, per NIC and striped");

}  // namespace
}  // namespace autopilot::bench
