// The tuner's one background thread ("ap-tuner"), shared by every communicator of the process:
// it polls the control-channel sockets and runs each communicator's coordinator and (on the
// leader) learner. Started by the first communicator that needs it, joined when the last one
// finalizes, so nothing of ours runs after the library could be unloaded. Bounded: one thread
// per process whatever the number of communicators; it also ends with exit(), dlclose() and
// fork() (see common/service_thread.h).
//
// Locks: the service's mutex guards only the list of clients and the round in progress; the
// thread never holds it while polling, reading or writing a socket, or running a client, so
// NCCL's init/finalize never wait on the network. A client's TunerComm mutex is taken by the
// thread (staging, resolving) and by NCCL's thread at a switch point, each time briefly.
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace autopilot::tuner {

class ServiceClient {
 public:
  virtual ~ServiceClient() = default;
  virtual void collectFds(std::vector<pollfd>* fds) = 0;
  virtual void handleEvents(const pollfd* fds, size_t count, uint64_t nowNs) = 0;
  // Timers and learning; returns the next time it wants to run.
  virtual uint64_t step(uint64_t nowNs) = 0;
};

class TunerService {
 public:
  // Registers a client (starting the thread if needed). False if the thread cannot start.
  static bool add(ServiceClient* client);
  // Unregisters; when it returns the service thread no longer touches the client. Joins the
  // thread when the last client leaves.
  static void remove(ServiceClient* client);
  // Builds the service now (it is otherwise built by the first add): an owner that builds it
  // before itself is destroyed first and has its fork handlers run first (see
  // common/service_thread.h), so it may call add/remove from its own destructor and locks.
  static void construct();
};

}  // namespace autopilot::tuner
