#include "tuner_plugin/tuning_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/safe_file.h"
#include "common/sha256.h"

namespace autopilot::tuner {
namespace {

constexpr const char* kMagic = "nccl-autopilot tuning 1";
constexpr size_t kMaxFileBytes = 16 << 20;
constexpr int kLockWaitMs = 2000;

std::string hexOf(const uint8_t* p, size_t n) {
  static const char* k = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += k[p[i] >> 4];
    s += k[p[i] & 15];
  }
  return s;
}

std::string checksum(const std::vector<std::string>& lines) {
  Sha256 h;
  for (const std::string& l : lines) {
    h.update(l.data(), l.size());
    h.update("\n", 1);
  }
  Digest d = h.finish();
  return hexOf(d.data(), d.size());
}

struct Section {
  std::string keyHex;
  std::string systemHex;  // empty in files written before sections named their system
  long nRanks = 0, nNodes = 0;
  std::vector<std::string> lines;  // "section ..." up to, not including, "end"
};

// "section KEYHEX abi A nranks R nnodes N [system S]": the fields after the key, as far as they
// parse (the checksum already vouches for the line; a field missing or malformed is left out).
void parseSectionLine(const std::string& line, Section* s) {
  std::istringstream ls(line.substr(8));
  ls >> s->keyHex;
  std::string name, value;
  while (ls >> name >> value) {
    char* end = nullptr;
    long v = std::strtol(value.c_str(), &end, 10);
    bool number = end != value.c_str() && *end == '\0' && v > 0 && v < (1L << 30);
    if (name == "nranks" && number) s->nRanks = v;
    if (name == "nnodes" && number) s->nNodes = v;
    if (name == "system") s->systemHex = value;
  }
}

// Splits a file into checksum-valid sections; invalid ones are counted and skipped.
bool readSections(const std::string& path, std::vector<Section>* sections, int* corrupt,
                  std::string* why) {
  *corrupt = 0;
  std::string text;
  if (!readRegularFile(path, kMaxFileBytes, &text, why)) return false;
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kMagic) {
    *why = path + " is not a tuning file (bad header)";
    return false;
  }
  Section current;
  bool inSection = false;
  while (std::getline(in, line)) {
    if (line.rfind("section ", 0) == 0) {
      if (inSection) ++*corrupt;  // the previous section never ended
      current = Section{};
      parseSectionLine(line, &current);
      current.lines.push_back(line);
      inSection = true;
    } else if (line.rfind("end ", 0) == 0 && inSection) {
      if (line.substr(4) == checksum(current.lines)) {
        sections->push_back(std::move(current));
      } else {
        ++*corrupt;
      }
      inSection = false;
    } else if (inSection) {
      current.lines.push_back(line);
    } else if (!line.empty()) {
      ++*corrupt;  // stray text between sections
    }
  }
  if (inSection) ++*corrupt;
  return true;
}

bool parseNumber(const std::string& t, double* out) {
  if (t.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool parseInt(const std::string& t, long lo, long hi, long* out) {
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(t.c_str(), &end, 10);
  if (*end != '\0' || errno != 0 || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parseRecords(const Section& s, std::vector<BanditPolicy::ContextRecord>* out,
                  std::string* why) {
  BanditPolicy::ContextRecord* current = nullptr;
  std::vector<bool> seen(kNumContexts, false);
  for (size_t i = 1; i < s.lines.size(); ++i) {
    std::istringstream ls(s.lines[i]);
    std::vector<std::string> tok;
    for (std::string t; ls >> t;) tok.push_back(t);
    auto bad = [&](const char* what) {
      *why = std::string("line ") + std::to_string(i) + " of the section: " + what;
      return false;
    };
    if (tok.empty()) return bad("empty line");
    if (tok[0] == "ctx") {
      long ctx, inc;
      if (tok.size() != 4 + kNumCells || tok[2] != "incumbent" ||
          !parseInt(tok[1], 0, kNumContexts - 1, &ctx) ||
          !parseInt(tok[3], -1, kNumArms - 1, &inc)) {
        return bad("malformed ctx record");
      }
      if (seen[ctx]) return bad("duplicate context");
      seen[ctx] = true;
      out->emplace_back();
      current = &out->back();
      current->ctx = int(ctx);
      current->incumbent = int(inc);
      for (int c = 0; c < kNumCells; ++c) {
        double v;
        if (!parseNumber(tok[4 + c], &v) || (v < 0 && v != -1.0) || v > 3.6e9) {
          return bad("bad prior value");
        }
        current->prior[c] = float(v);
      }
      for (int a = kNumCells; a < kNumArms; ++a) current->prior[a] = -1.0f;  // see "halved"
    } else if (tok[0] == "arm") {
      long cell;
      double n, mean, var;
      if (current == nullptr || tok.size() != 5 || !parseInt(tok[1], 0, kNumArms - 1, &cell) ||
          !parseNumber(tok[2], &n) || !parseNumber(tok[3], &mean) || !parseNumber(tok[4], &var) ||
          n < 0 || n > BanditPolicy::kWindow || var < 0 || std::fabs(mean) > 100) {
        return bad("malformed arm record");
      }
      current->arms[cell] = BanditPolicy::ArmStats{n, mean, var};
    } else if (tok[0] == "halved") {
      // "halved CELL N": the cell's arm at fewer channels runs N of them (decision.h).
      long cell, n;
      if (current == nullptr || tok.size() != 3 || !parseInt(tok[1], 0, kNumCells - 1, &cell) ||
          !parseInt(tok[2], 1, 255, &n)) {
        return bad("malformed halved record");
      }
      current->halvedChannels[cell] = uint8_t(n);
      current->prior[halvedChannelArm(int(cell))] = current->prior[cell];
    } else if (tok[0] == "halfchunk") {
      // "halfchunk CELL": the cell at half NCCL's chunk size is an arm (decision.h).
      long cell;
      if (current == nullptr || tok.size() != 2 || !parseInt(tok[1], 0, kNumCells - 1, &cell) ||
          !cellTakesChunkSize(int(cell))) {
        return bad("malformed halfchunk record");
      }
      current->prior[halvedChunkArm(int(cell))] = current->prior[cell];
    } else {
      return bad("unknown record");
    }
  }
  return true;
}

void formatSection(const TuningKey& key, const std::vector<BanditPolicy::ContextRecord>& records,
                   std::vector<std::string>* lines) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), "section %s abi %d nranks %d nnodes %d system %s",
                key.hex().c_str(), key.abiVersion, key.nRanks, key.nNodes, key.systemHex().c_str());
  lines->push_back(buf);
  for (const auto& r : records) {
    std::string l = "ctx " + std::to_string(r.ctx) + " incumbent " + std::to_string(r.incumbent);
    for (int c = 0; c < kNumCells; ++c) {  // NCCL's table: the halved arms' come from it
      std::snprintf(buf, sizeof(buf), " %.9g", double(r.prior[c]));
      l += buf;
    }
    lines->push_back(l);
    for (int c = 0; c < kNumCells; ++c) {
      if (r.halvedChannels[c] == 0) continue;
      std::snprintf(buf, sizeof(buf), "halved %d %d", c, int(r.halvedChannels[c]));
      lines->push_back(buf);
    }
    for (int c = 0; c < kNumCells; ++c) {
      if (r.prior[halvedChunkArm(c)] < 0 || !cellTakesChunkSize(c)) continue;
      std::snprintf(buf, sizeof(buf), "halfchunk %d", c);
      lines->push_back(buf);
    }
    for (int c = 0; c < kNumArms; ++c) {
      const auto& a = r.arms[c];
      if (a.n <= 0) continue;
      std::snprintf(buf, sizeof(buf), "arm %d %.17g %.17g %.17g", c, a.n, a.mean, a.var);
      lines->push_back(buf);
    }
  }
}

}  // namespace

std::string TuningKey::hex() const {
  Sha256 h;
  int ints[6] = {abiVersion,
                 nRanks,
                 nNodes,
                 nvlDomain.nNvlDomains,
                 nvlDomain.minRanksPerNvlDomain,
                 nvlDomain.maxRanksPerNvlDomain};
  h.update(ints, sizeof(ints));
  if (haveConstants) h.update(&constants, sizeof(constants));
  Digest d = h.finish();
  return hexOf(d.data(), 16);
}

std::string TuningKey::systemHex() const {
  Sha256 h;
  const char tag[] = "system";  // never equal to a key's hash input
  h.update(tag, sizeof(tag));
  h.update(&abiVersion, sizeof(abiVersion));
  if (haveConstants) h.update(&constants, sizeof(constants));
  Digest d = h.finish();
  return hexOf(d.data(), 16);
}

bool loadTuningFile(const std::string& path, const TuningKey& key,
                    std::vector<BanditPolicy::ContextRecord>* records, std::string* why,
                    std::vector<OtherScale>* others) {
  std::vector<Section> sections;
  int corrupt = 0;
  if (!readSections(path, &sections, &corrupt, why)) return false;
  const std::string want = key.hex();
  if (others != nullptr) {
    const std::string system = key.systemHex();
    for (const Section& s : sections) {
      if (s.keyHex == want || s.systemHex != system || s.nRanks <= 0 || s.nNodes <= 0) continue;
      OtherScale o;
      o.nRanks = int(s.nRanks);
      o.nNodes = int(s.nNodes);
      std::string ignored;
      if (parseRecords(s, &o.records, &ignored)) others->push_back(std::move(o));
    }
    auto distance = [&](const OtherScale& o) {
      return std::make_pair(std::fabs(std::log(double(o.nRanks) / std::max(key.nRanks, 1))),
                            std::fabs(std::log(double(o.nNodes) / std::max(key.nNodes, 1))));
    };
    std::stable_sort(others->begin(), others->end(), [&](const OtherScale& a, const OtherScale& b) {
      return distance(a) < distance(b);
    });
  }
  for (const Section& s : sections) {
    if (s.keyHex != want) continue;
    std::vector<BanditPolicy::ContextRecord> parsed;
    if (!parseRecords(s, &parsed, why)) {
      *why = path + ": " + *why;
      return false;
    }
    *records = std::move(parsed);
    return true;
  }
  *why = path + " has no results for this system (" + std::to_string(sections.size()) +
         " other section(s)" + (corrupt ? ", " + std::to_string(corrupt) + " corrupt" : "") +
         "): other topology, NCCL version or (nRanks, nNodes)";
  return false;
}

bool saveTuningFile(const std::string& path, const TuningKey& key,
                    const std::vector<BanditPolicy::ContextRecord>& records, std::string* why) {
  // Ranks of several jobs may share one file: a lock serializes read-merge-write. It is waited
  // on at most kLockWaitMs (finalize must not hang on a stuck NFS lock): the save is skipped.
  int lockFd = lockFileWithin(path + ".lock", kLockWaitMs, why);
  if (lockFd < 0) {
    *why += "; results not saved";
    return false;
  }
  std::vector<Section> sections;
  int corrupt = 0;
  std::string ignored;
  readSections(path, &sections, &corrupt, &ignored);  // a missing or bad file is replaced
  const std::string mine = key.hex();
  std::string text = std::string(kMagic) + "\n";
  for (const Section& s : sections) {
    if (s.keyHex == mine) continue;
    for (const std::string& l : s.lines) text += l + "\n";
    text += "end " + checksum(s.lines) + "\n";
  }
  std::vector<std::string> lines;
  formatSection(key, records, &lines);
  for (const std::string& l : lines) text += l + "\n";
  text += "end " + checksum(lines) + "\n";

  bool ok = writeFileAtomically(path, text, why);
  close(lockFd);  // releases the lock
  return ok;
}

}  // namespace autopilot::tuner
