#include "bench/top/top_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <set>
#include <unordered_map>

#include "common/human_bytes.h"
#include "profiler_plugin/export_util.h"

namespace autopilot::top {
namespace {

constexpr const char* kPrefix = "nccl_autopilot_";

std::string labelOr(const Sample& s, const char* key, const char* fallback = "") {
  const std::string* v = s.label(key);
  return v ? *v : fallback;
}

bool is(const Sample& s, const char* suffix) {
  return s.name.size() > 15 && s.name.compare(0, 15, kPrefix) == 0 &&
         s.name.compare(15, std::string::npos, suffix) == 0;
}

// Counter increase of each series between two versions of one file (a reset counts from 0).
std::unordered_map<std::string, double> deltas(const FileVersion& prev, const FileVersion& cur) {
  std::unordered_map<std::string, double> before, out;
  for (const Sample& s : prev.data.samples) before[s.seriesKey()] = s.value;
  for (const Sample& s : cur.data.samples) {
    if (s.name.size() < 6 || s.name.compare(s.name.size() - 6, 6, "_total") != 0) continue;
    std::string key = s.seriesKey();
    auto it = before.find(key);
    double d = it == before.end() ? s.value : s.value - it->second;
    out[key] = d < 0 ? s.value : d;
  }
  return out;
}

std::string armText(const Sample& s) {
  std::string bytes = labelOr(s, "size_bucket", "0");
  return labelOr(s, "collective", "?") + " " +
         humanBytes(std::strtoull(bytes.c_str(), nullptr, 10)) + " " + labelOr(s, "algo", "?") +
         "/" + labelOr(s, "proto", "?");
}

}  // namespace

void TopModel::update(std::vector<FileVersion> files) {
  std::map<std::string, Tracked> next;
  for (FileVersion& f : files) {
    auto it = files_.find(f.path);
    Tracked t;
    if (it != files_.end()) {
      t = std::move(it->second);
      if (f.mtime != t.cur.mtime) {
        t.prev = std::move(t.cur);
        t.cur = std::move(f);
      }
    } else {
      t.cur = std::move(f);
    }
    std::string path = t.cur.path;
    next.emplace(std::move(path), std::move(t));
  }
  files_ = std::move(next);
}

Frame TopModel::frame(double now, double staleAfterS) {
  Frame f;
  f.now = now;
  std::set<std::string> hosts;
  struct CommAcc {
    std::set<std::string> ranks;
    int nRanks = 0;
    int ranksWithRates = 0;
    double dCount = 0, dBytes = 0, dTime = 0, rateSum = 0, bytesRateSum = 0;
    double collectives = 0, shifts = 0;
    std::map<std::string, double> armInterval, armTotal;
    std::map<std::pair<std::string, std::string>, std::pair<double, double>> rankTimes;
    // The arrival exchange's verdicts, from the lowest-numbered reporter that wrote them.
    int reporter = -1;
    struct Arrival {
      double named = 0, lagS = 0, lateRatio = 0, sinceS = 0;
    };
    std::map<std::string, Arrival> arrivals;  // by rank
  };
  std::map<std::string, CommAcc> comms;
  std::map<std::string, std::pair<double, int>> late;  // this frame's late ranks
  struct RailAcc {
    RailRow row;
    int n = 0;
  };
  std::map<std::pair<std::string, std::string>, RailAcc> rails;

  for (const auto& [path, t] : files_) {
    const FileVersion& cur = t.cur;
    ++f.processes;
    if (now - cur.mtime > staleAfterS) ++f.staleFiles;
    if (cur.data.badLines > 0) {
      if (f.badLines == 0) f.firstBad = path + ": " + cur.data.firstError;
      f.badLines += cur.data.badLines;
    }
    std::string host = "-";
    for (const Sample& s : cur.data.samples) {
      if (is(s, "process_info")) host = labelOr(s, "hostname", "-");
    }
    hosts.insert(host);
    std::unordered_map<std::string, double> d;
    double dt = 0;
    if (t.prev && cur.mtime > t.prev->mtime) {
      d = deltas(*t.prev, cur);
      dt = cur.mtime - t.prev->mtime;
    }
    auto delta = [&](const Sample& s) -> std::optional<double> {
      if (dt <= 0) return std::nullopt;
      auto it = d.find(s.seriesKey());
      return it == d.end() ? std::nullopt : std::optional<double>(it->second);
    };
    // Per communicator and rank of this file: the interval's sums.
    std::map<std::pair<std::string, std::string>, std::pair<double, double>> perRank;
    for (const Sample& s : cur.data.samples) {
      if (s.name.compare(0, 26, "nccl_autopilot_collective_") == 0) {
        std::string comm = labelOr(s, "comm", "?");
        CommAcc& c = comms[comm];
        std::string rank = labelOr(s, "rank", "?");
        c.ranks.insert(host + "/" + rank);
        c.nRanks = std::max(c.nRanks, std::atoi(labelOr(s, "n_ranks", "0").c_str()));
        auto dv = delta(s);
        if (is(s, "collective_count_total")) {
          c.collectives += s.value;
          c.armTotal[armText(s)] += s.value;
          if (dv) {
            c.dCount += *dv;
            c.armInterval[armText(s)] += *dv;
            perRank[{comm, rank}].first += *dv;
            c.rankTimes[{host, rank}].first += *dv;
          }
        } else if (is(s, "collective_bytes_total")) {
          if (dv) {
            c.dBytes += *dv;
            perRank[{comm, rank}].second += *dv;
          }
        } else if (is(s, "collective_exec_time_seconds_total")) {
          if (dv) {
            c.dTime += *dv;
            c.rankTimes[{host, rank}].second += *dv;
          }
        } else if (is(s, "collective_latency_shifts_total")) {
          c.shifts += s.value;
        }
      } else if (s.name.compare(0, 20, "nccl_autopilot_rail_") == 0) {
        RailAcc& r = rails[{host, labelOr(s, "rail", "?")}];
        r.row.host = host;
        r.row.rail = labelOr(s, "rail", "?");
        r.row.transport = labelOr(s, "transport", "?");
        if (is(s, "rail_state")) {
          if (s.value == 1) ++r.row.states[labelOr(s, "state", "?")];
        } else if (is(s, "rail_share_ratio")) {
          r.row.share += s.value;
          ++r.n;
        } else if (is(s, "rail_throughput_bytes_per_second")) {
          r.row.throughput += s.value;
        } else if (is(s, "rail_bandwidth_bytes_per_second")) {
          r.row.bandwidth += s.value;
        } else if (is(s, "rail_failovers_total")) {
          r.row.failovers += s.value;
        } else if (is(s, "rail_recoveries_total")) {
          r.row.recoveries += s.value;
        } else if (is(s, "rail_retransmitted_bytes_total")) {
          r.row.resentBytes += s.value;
        } else if (is(s, "rail_probe_copy_bytes_total")) {
          r.row.probeCopyBytes += s.value;
        }
      } else if (is(s, "straggler") || is(s, "arrival_lag_seconds") ||
                 is(s, "arrival_late_ratio") || is(s, "straggler_since_seconds")) {
        CommAcc& c = comms[labelOr(s, "comm", "?")];
        int reporter = std::atoi(labelOr(s, "reporter", "-1").c_str());
        if (reporter < 0) continue;
        if (c.reporter < 0 || reporter < c.reporter) {
          c.reporter = reporter;
          c.arrivals.clear();
        }
        if (reporter != c.reporter) continue;
        CommAcc::Arrival& a = c.arrivals[labelOr(s, "rank", "?")];
        if (is(s, "straggler")) a.named = s.value;
        if (is(s, "arrival_lag_seconds")) a.lagS = s.value;
        if (is(s, "arrival_late_ratio")) a.lateRatio = s.value;
        if (is(s, "straggler_since_seconds")) a.sinceS = s.value;
      } else if (is(s, "arrival_records_dropped_total")) {
        if (s.value > 0) f.losses["arrival records " + labelOr(s, "reason", "?")] += s.value;
      } else if (is(s, "plugin_events_total")) {
        std::string key = labelOr(s, "source", "?") + "/" + labelOr(s, "kind", "?");
        f.events[key] += s.value;
        if (auto dv = delta(s)) f.eventsDelta[key] += *dv;
      } else if (is(s, "profiler_events_dropped_total")) {
        if (s.value > 0) f.losses["profiler " + labelOr(s, "reason", "?")] += s.value;
      } else if (is(s, "export_records_dropped_total")) {
        if (s.value > 0) f.losses[labelOr(s, "export", "?") + " records"] += s.value;
      } else if (is(s, "export_write_errors_total")) {
        if (s.value > 0) f.losses[labelOr(s, "export", "?") + " write errors"] += s.value;
      } else if (is(s, "journal_events_overwritten_total")) {
        if (s.value > 0) f.losses["journal events overwritten"] += s.value;
      }
    }
    if (dt > 0) {
      for (const auto& [key, sums] : perRank) {
        CommAcc& c = comms[key.first];
        ++c.ranksWithRates;
        c.rateSum += sums.first / dt;
        c.bytesRateSum += sums.second / dt;
      }
    }
  }
  f.hosts.assign(hosts.begin(), hosts.end());
  for (auto& [name, c] : comms) {
    CommRow row;
    row.comm = name;
    row.ranksSeen = int(c.ranks.size());
    row.nRanks = c.nRanks;
    row.collectives = c.collectives;
    row.shifts = c.shifts;
    row.hasRates = c.ranksWithRates > 0;
    if (row.hasRates) {
      row.collPerSec = c.rateSum / c.ranksWithRates;
      row.bytesPerSec = c.bytesRateSum / c.ranksWithRates;
      row.meanTimeS = c.dCount > 0 ? c.dTime / c.dCount : 0;
    }
    const auto& arms = row.hasRates && c.dCount > 0 ? c.armInterval : c.armTotal;
    double total = 0, best = -1;
    for (const auto& [arm, n] : arms) {
      total += n;
      if (n > best) {
        best = n;
        row.busiestArm = arm;
      }
    }
    row.busiestShare = total > 0 ? best / total : 0;
    f.comms.push_back(row);

    if (c.reporter >= 0) {
      // The ranks exchanged their arrival times: rank 0's verdict replaces the estimate from
      // durations (it already waits for late windows in a row, and its clocks are aligned).
      for (const auto& [rank, a] : c.arrivals) {
        if (a.named < 1) continue;
        std::string host = "?";
        for (const auto& [who, ct] : c.rankTimes) {
          if (who.second == rank) host = who.first;
        }
        Straggler st{name, host, rank, a.lagS, 0, 0, a.sinceS > 0 ? a.sinceS : now};
        st.fromArrivals = true;
        st.lateRatio = a.lateRatio;
        f.stragglers.push_back(st);
      }
      continue;
    }
    std::vector<std::pair<std::pair<std::string, std::string>, double>> means;
    for (const auto& [who, ct] : c.rankTimes) {
      if (ct.first >= kMinCollectives) means.push_back({who, ct.second / ct.first});
    }
    if (means.size() < 2) continue;
    std::vector<double> sorted;
    for (const auto& m : means) sorted.push_back(m.second);
    std::sort(sorted.begin(), sorted.end());
    size_t mid = sorted.size() / 2;
    double median = sorted.size() % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
    for (const auto& [who, own] : means) {
      double lag = median - own;
      if (lag < kMinLagS || lag < kMinLagShare * median) continue;
      Straggler st{name, who.first, who.second, lag, own, median, now};
      std::string key = name + "\x1f" + who.first + "\x1f" + who.second;
      auto it = lateSince_.find(key);
      int frames = 1;
      if (it != lateSince_.end()) {
        st.sinceS = it->second.first;
        frames = it->second.second + 1;
      }
      late[key] = {st.sinceS, frames};
      // One late interval can be a rank held up once (a failover on its rails); a straggler is
      // late interval after interval.
      if (frames >= kMinLateFrames) f.stragglers.push_back(st);
    }
  }
  // A streak ends with the first frame in which the rank is not late.
  lateSince_ = std::move(late);
  for (auto& [key, r] : rails) {
    if (r.n > 0) {
      r.row.share /= r.n;
      r.row.bandwidth /= r.n;
    }
    f.rails.push_back(r.row);
  }
  return f;
}

std::string renderText(const Frame& f, const std::string& source) {
  std::string out;
  char line[512];
  std::time_t now = std::time_t(f.now);
  std::tm tm{};
  localtime_r(&now, &tm);
  char clock[16];
  std::strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
  std::string hosts;
  for (const std::string& h : f.hosts) hosts += (hosts.empty() ? "" : ", ") + h;
  std::snprintf(line, sizeof(line), "autopilot top  %s  %d process%s on %zu host%s (%s), from %s\n",
                clock, f.processes, f.processes == 1 ? "" : "es", f.hosts.size(),
                f.hosts.size() == 1 ? "" : "s", hosts.c_str(), source.c_str());
  out += line;
  if (f.staleFiles > 0) {
    std::snprintf(line, sizeof(line),
                  "  %d file(s) not rewritten lately: their processes may be stuck or gone\n",
                  f.staleFiles);
    out += line;
  }
  if (f.badLines > 0) {
    std::snprintf(line, sizeof(line), "  %zu malformed line(s) skipped; first: %s\n", f.badLines,
                  f.firstBad.c_str());
    out += line;
  }
  out += "\n";
  std::snprintf(line, sizeof(line), "%-22s %7s %9s %10s %9s  %-40s %7s\n", "COMMUNICATOR", "RANKS",
                "COLL/S", "DATA MB/S", "MEAN MS", "BUSIEST ARM (SHARE)", "SHIFTS");
  out += line;
  if (f.comms.empty()) out += "  (no communicator reported yet)\n";
  for (const CommRow& c : f.comms) {
    char ranks[24], rate[24], data[24], mean[24], arm[80];
    std::snprintf(ranks, sizeof(ranks), "%d/%d", c.ranksSeen, c.nRanks);
    if (c.hasRates) {
      std::snprintf(rate, sizeof(rate), "%.1f", c.collPerSec);
      std::snprintf(data, sizeof(data), "%.2f", c.bytesPerSec / 1e6);
      std::snprintf(mean, sizeof(mean), "%.3f", c.meanTimeS * 1e3);
    } else {
      std::snprintf(rate, sizeof(rate), "-");
      std::snprintf(data, sizeof(data), "-");
      std::snprintf(mean, sizeof(mean), "-");
    }
    std::snprintf(arm, sizeof(arm), "%.33s (%.0f%%)", c.busiestArm.c_str(), c.busiestShare * 100);
    std::snprintf(line, sizeof(line), "%-22.22s %7s %9s %10s %9s  %-40s %7.0f\n", c.comm.c_str(),
                  ranks, rate, data, mean, arm, c.shifts);
    out += line;
  }
  out += "\n";
  std::snprintf(line, sizeof(line), "%-12s %-18s %-20s %6s %9s %9s %9s %9s %10s %10s\n", "HOST",
                "RAIL", "STATE (PROCESSES)", "SHARE", "NOW MB/S", "BW MB/S", "FAILOVERS",
                "REJOINED", "RE-SENT", "PROBED");
  out += line;
  if (f.rails.empty()) out += "  (no rail reported yet)\n";
  for (const RailRow& r : f.rails) {
    std::string states;
    for (const auto& [state, n] : r.states) {
      states += (states.empty() ? "" : " ") + state + " " + std::to_string(n);
    }
    std::snprintf(line, sizeof(line),
                  "%-12.12s %-18.18s %-20.20s %6.2f %9.2f %9.2f %9.0f %9.0f %10s %10s\n",
                  r.host.c_str(), r.rail.c_str(), states.empty() ? "-" : states.c_str(), r.share,
                  r.throughput / 1e6, r.bandwidth / 1e6, r.failovers, r.recoveries,
                  humanBytes(uint64_t(r.resentBytes)).c_str(),
                  humanBytes(uint64_t(r.probeCopyBytes)).c_str());
    out += line;
  }
  out += "\nstragglers:";
  if (f.stragglers.empty()) out += " none";
  for (const Straggler& st : f.stragglers) {
    if (st.fromArrivals) {
      std::snprintf(line, sizeof(line),
                    "\n  %s rank %s on %s: late by %.1f ms at arrival, in %.0f%% of the last "
                    "window's collectives, for %.0f s (arrival exchange)",
                    st.comm.c_str(), st.rank.c_str(), st.host.c_str(), st.lagS * 1e3,
                    st.lateRatio * 100, f.now - st.sinceS);
      out += line;
      continue;
    }
    std::snprintf(line, sizeof(line),
                  "\n  %s rank %s on %s: late by %.1f ms (its time in a collective %.1f ms, the "
                  "median %.1f ms), late in every frame for %.0f s",
                  st.comm.c_str(), st.rank.c_str(), st.host.c_str(), st.lagS * 1e3, st.ownS * 1e3,
                  st.medianS * 1e3, f.now - st.sinceS);
    out += line;
  }
  out += "\nevents:";
  bool any = false;
  for (const auto& [kind, n] : f.events) {
    if (n <= 0) continue;
    any = true;
    auto it = f.eventsDelta.find(kind);
    std::snprintf(line, sizeof(line), " %s %.0f", kind.c_str(), n);
    out += line;
    if (it != f.eventsDelta.end() && it->second > 0) {
      std::snprintf(line, sizeof(line), " (+%.0f)", it->second);
      out += line;
    }
    out += ",";
  }
  if (any) {
    out.pop_back();
  } else {
    out += " none";
  }
  out += "\nlost:";
  if (f.losses.empty()) out += " nothing";
  for (const auto& [what, n] : f.losses) {
    std::snprintf(line, sizeof(line), " %s %.0f;", what.c_str(), n);
    out += line;
  }
  if (!f.losses.empty()) out.pop_back();
  out += "\n";
  return out;
}

std::string renderJson(const Frame& f) {
  auto str = [](const std::string& s) {
    std::string o = "\"";
    profiler::appendJsonEscaped(&o, s.c_str());
    return o + "\"";
  };
  auto num = [](double v) {
    char b[40];
    std::snprintf(b, sizeof(b), "%.6g", std::isfinite(v) ? v : 0.0);
    return std::string(b);
  };
  // Byte totals exactly: %g would round a counter past a million (3145728 -> 3.14573e+06).
  auto bytes = [](double v) {
    char b[40];
    std::snprintf(b, sizeof(b), "%.0f", std::isfinite(v) && v > 0 ? v : 0.0);
    return std::string(b);
  };
  char when[32];
  std::snprintf(when, sizeof(when), "%.3f", f.now);
  std::string o = std::string("{\"time\":") + when +
                  ",\"processes\":" + std::to_string(f.processes) + ",\"hosts\":[";
  for (size_t i = 0; i < f.hosts.size(); ++i) o += (i ? "," : "") + str(f.hosts[i]);
  o += "],\"stale_files\":" + std::to_string(f.staleFiles) +
       ",\"bad_lines\":" + std::to_string(f.badLines) + ",\"comms\":[";
  for (size_t i = 0; i < f.comms.size(); ++i) {
    const CommRow& c = f.comms[i];
    o += std::string(i ? "," : "") + "{\"comm\":" + str(c.comm) +
         ",\"ranks\":" + std::to_string(c.ranksSeen) + ",\"n_ranks\":" + std::to_string(c.nRanks) +
         ",\"has_rates\":" + (c.hasRates ? "true" : "false") +
         ",\"collectives_per_s\":" + num(c.collPerSec) + ",\"bytes_per_s\":" + num(c.bytesPerSec) +
         ",\"mean_time_s\":" + num(c.meanTimeS) + ",\"collectives\":" + num(c.collectives) +
         ",\"shifts\":" + num(c.shifts) + ",\"busiest_arm\":" + str(c.busiestArm) +
         ",\"busiest_share\":" + num(c.busiestShare) + "}";
  }
  o += "],\"rails\":[";
  for (size_t i = 0; i < f.rails.size(); ++i) {
    const RailRow& r = f.rails[i];
    o += std::string(i ? "," : "") + "{\"host\":" + str(r.host) + ",\"rail\":" + str(r.rail) +
         ",\"transport\":" + str(r.transport) + ",\"states\":{";
    bool first = true;
    for (const auto& [state, n] : r.states) {
      o += (first ? "" : ",") + str(state) + ":" + std::to_string(n);
      first = false;
    }
    o += "},\"share\":" + num(r.share) + ",\"throughput_bytes_per_s\":" + num(r.throughput) +
         ",\"bandwidth_bytes_per_s\":" + num(r.bandwidth) + ",\"failovers\":" + num(r.failovers) +
         ",\"recoveries\":" + num(r.recoveries) + ",\"resent_bytes\":" + bytes(r.resentBytes) +
         ",\"probe_copy_bytes\":" + bytes(r.probeCopyBytes) + "}";
  }
  auto map = [&](const std::map<std::string, double>& m) {
    std::string s = "{";
    bool first = true;
    for (const auto& [k, v] : m) {
      s += (first ? "" : ",") + str(k) + ":" + num(v);
      first = false;
    }
    return s + "}";
  };
  o += "],\"stragglers\":[";
  for (size_t i = 0; i < f.stragglers.size(); ++i) {
    const Straggler& st = f.stragglers[i];
    o += std::string(i ? "," : "") + "{\"comm\":" + str(st.comm) + ",\"host\":" + str(st.host) +
         ",\"rank\":" + str(st.rank) + ",\"lag_s\":" + num(st.lagS) + ",\"own_s\":" + num(st.ownS) +
         ",\"median_s\":" + num(st.medianS) + ",\"for_s\":" + num(f.now - st.sinceS) +
         ",\"source\":" + str(st.fromArrivals ? "arrivals" : "durations") +
         ",\"late_ratio\":" + num(st.lateRatio) + "}";
  }
  o += "],\"events\":" + map(f.events) + ",\"events_delta\":" + map(f.eventsDelta) +
       ",\"lost\":" + map(f.losses) + "}";
  return o;
}

}  // namespace autopilot::top
