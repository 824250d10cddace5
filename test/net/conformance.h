// NCCL's net contract as NCCL's own transports implement it (docs/net-contract.md), checked on
// the real .so from two processes with host memory. Every scenario takes the transport's pair
// options (tcpPair, verbsPair) and the table version to load (maxNetVersion), so one source runs
// over both transports and every table we export.
#pragma once

#include "bench/net/pair.h"

namespace autopilot::test {

// Sends posted in an order the receives' tags do not follow, retried on NULL as NCCL's proxy
// does: a send whose tag the receive next in line does not have gets a NULL request (never an
// error, never a request that waits), and every send lands in the buffer of its tag.
bench::PairOutcome tagOrder(const bench::PairOptions& options);

// Several connections through one listen comm, connected at once; each is accepted, the listen
// comm closes, and every connection still carries its own data.
bench::PairOutcome manyConnectionsPerListen(const bench::PairOptions& options, int connections);

// The receiver posts and closes at once while the sender keeps posting: every isend returns
// success (a NULL request, or one whose test() reports the outcome), closeSend succeeds, and the
// process then connects again normally.
bench::PairOutcome receiverClosesWhileSending(const bench::PairOptions& options);

// The sender posts and closes at once while the receiver keeps posting and testing: the same
// from the other side.
bench::PairOutcome senderClosesWhileReceiving(const bench::PairOptions& options);

}  // namespace autopilot::test
