// The topology the demo declares to NCCL's cost model: `nRanks` nodes with one GPU each, every
// node with one (virtual) NIC made of `rails` rails of `railMbit` each — what NCCL would see with
// our net plugin grouping the rails into one device. The model gives the cost table NCCL would
// hand the tuner; it is a prior, and the demo's measurements are what the tuner learns from.
#pragma once

#include "common/abi/tuner_abi.h"
#include "model/cost_model.h"

namespace autopilot::demo {

struct DeclaredTopology {
  int nRanks = 4;
  int rails = 3;
  int railMbit = 250;
  // The tree graph's bandwidth per channel as a multiple of the ring's. 1 is the truth: both
  // cross the same rails. Above 1 the declaration is wrong the way a hand-written topology file
  // or a misdetected path can make it: NCCL's model then prefers Tree for all-reduce, which on
  // the mini-cluster runs about 1.4x slower than Ring (README, "The mistuned scenario").
  double treeBwFactor = 1.0;
};

tuner::model::Topology modelTopology(const DeclaredTopology& t);

}  // namespace autopilot::demo
