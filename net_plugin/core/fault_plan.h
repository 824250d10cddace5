// Simulated rail faults, for machines where real link faults are not possible (no root, no
// network namespaces). The plan is a small text file, one rule per line:
//
//   # comment
//   rail <name|index> down         the rail stops moving bytes (no error, no progress),
//                                   as a dead link would
//   rail <name|index> up           (the default) undoes `down`, `deaf` and `reject`
//   rail <name|index> deaf         this process reads nothing the rail delivers (its sending
//                                   side still works): a link dead in one direction, which
//                                   loses the peer's acknowledgements of data that did land
//   rail <name|index> rate <Mbit>  senders pace the rail to this rate; 0 removes the limit
//   rail <name|index> qp-reset <n> (verbs transport) the rail's queue pair fails (error state,
//                                   then destroyed) without telling the peer, as a NIC that
//                                   resets it would, whenever <n> differs from the last value
//                                   acted on
//   rail <name|index> reject       (verbs transport) every data write this process posts on
//                                   the rail names a remote key the receiver never registered,
//                                   so the receiver's NIC rejects it (remote access error), as
//                                   a responder that rejects a request would
//
// <index> is the rail's position in this process's rail list (as `autopilot info` prints it);
// <name> is a rail name. The file describes the whole current state: a rail it does not
// mention is up and unlimited. Parsing is strict: a malformed line is reported and ignored,
// the others still apply. This file holds the pure parser; fault_injector.h applies it.
#pragma once

#include <string>
#include <vector>

namespace autopilot::net::core {

struct FaultRule {
  enum class Action { kDown, kUp, kRate, kQpReset, kDeaf, kReject };
  std::string rail;  // as written: a name or a decimal index
  int index = -1;    // >= 0 when `rail` is a decimal index
  Action action = Action::kUp;
  double rateMbps = 0;    // kRate only; 0: unlimited
  int resetSequence = 0;  // kQpReset only
  int line = 0;
};

struct FaultPlan {
  std::vector<FaultRule> rules;
  std::vector<std::string> errors;  // "line N: why", one per ignored line
};

// Bounded: at most kMaxFaultLines lines and kMaxFaultLineLength characters per line are
// looked at; the rest is reported as one error.
inline constexpr size_t kMaxFaultLines = 256;
inline constexpr size_t kMaxFaultLineLength = 256;
FaultPlan parseFaultPlan(const char* text, size_t length);

}  // namespace autopilot::net::core
