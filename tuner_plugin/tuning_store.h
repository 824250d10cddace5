// Persistence of learned results (NCCL_AUTOPILOT_TUNING_FILE): saved by the leader at finalize,
// loaded by the leader at init; the followers never read the file, they receive the leader's
// table like any other proposal, so ranks cannot disagree because their files differ.
//
// The file holds one section per key. The key is what the tuner can know about "the same
// system" at init: the tuner ABI version NCCL picked and, for v5, the tuner constants NCCL passed
// (they are NCCL's defaults for its version, so a different NCCL version with different defaults
// gets a different key), the NVLink-domain shape, nRanks and nNodes. Within a section each
// context also keeps the cost table NCCL passed for it; the learner uses a saved context only if
// the live table is the same (tables are a function of topology and NCCL version), which catches
// what the init-time key cannot. A section is protected by a SHA-256 checksum; a corrupt
// section, or one of another key, is ignored with a warning. Writes are atomic (temporary file
// + rename) under an advisory lock, and keep the other keys' sections.
//
// Other scales. The same system at another (nRanks, nNodes) has a section of its own. Its learned
// corrections (log measured / predicted per arm, relative to NCCL's choice: what the model got
// wrong there) seed the prior of a context that has no saved state of its own. They change which
// arms look worth a probe, never a decision: NCCL's choice stays the default and a switch needs
// this scale's own samples. "The same system" is what the key holds apart from the scale: the
// ABI version and NCCL's constants (its version), the NVLink-domain shape left out since it
// follows nRanks. Sections of the same NCCL version on different machines are therefore taken
// for one system at two scales: one file per system keeps them apart.
//
// Format (text, one record per line):
//   nccl-autopilot tuning 1
//   section KEYHEX abi 5 nranks 8 nnodes 1 system SYSTEMHEX   (system: absent in older files)
//   ctx CTX incumbent CELL prior V0 ... V20
//   halved CELL N                (the cell at N channels is an arm: decision.h)
//   halfchunk CELL               (the cell at half NCCL's chunk size is an arm)
//   arm CELL N MEAN VAR          (per arm with samples, after its ctx line; CELL: the arm)
//   end SHA256HEX                (of the section's lines, from "section" on)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/abi/tuner_abi.h"
#include "tuner_plugin/bandit_policy.h"

namespace autopilot::tuner {

struct TuningKey {
  int abiVersion = 5;
  int nRanks = 0;
  int nNodes = 0;
  abi::NvlDomainInfoV5 nvlDomain{0, 0, 0};
  bool haveConstants = false;
  abi::TunerConstantsV5 constants{};
  std::string hex() const;        // stable identifier of the key
  std::string systemHex() const;  // the same without the scale (nRanks, nNodes, NVLink domains)
};

// A section of the same system at another scale.
struct OtherScale {
  int nRanks = 0;
  int nNodes = 0;
  std::vector<BanditPolicy::ContextRecord> records;
};

// Loads the section for `key`. Returns false with *why when the file is missing, unreadable,
// corrupt, or has no section for this key (the caller warns and starts fresh).
// `others` (optional) receives the valid sections of the same system at other scales, the
// nearest scale first (the ratio of nRanks, then of nNodes, on a log scale), whether or not `key`
// has one.
bool loadTuningFile(const std::string& path, const TuningKey& key,
                    std::vector<BanditPolicy::ContextRecord>* records, std::string* why,
                    std::vector<OtherScale>* others = nullptr);

// Writes (replaces) the section for `key`, keeping every other valid section.
bool saveTuningFile(const std::string& path, const TuningKey& key,
                    const std::vector<BanditPolicy::ContextRecord>& records, std::string* why);

}  // namespace autopilot::tuner
