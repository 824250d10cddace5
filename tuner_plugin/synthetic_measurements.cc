#include "tuner_plugin/synthetic_measurements.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "common/clock.h"
#include "common/measurement_bus.h"

namespace autopilot::tuner {

std::unique_ptr<SyntheticMeasurements> SyntheticMeasurements::fromSpec(const std::string& spec,
                                                                       int rank,
                                                                       std::string* error) {
  auto s = std::make_unique<SyntheticMeasurements>();
  for (double& f : s->scale_) f = 1.0;
  for (double& f : s->halved_) f = 1.0;
  for (double& f : s->halfChunk_) f = 1.0;
  uint64_t seed = 1;
  // Strict number parsing: the whole text must be the number.
  auto number = [](const std::string& text, double* out) {
    char* end = nullptr;
    *out = std::strtod(text.c_str(), &end);
    return !text.empty() && *end == '\0';
  };
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      *error = "'" + item + "' is not key=value";
      return nullptr;
    }
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    double v = 0;
    bool ok = true;
    if (key == "seed") {
      ok = number(value, &v) && v >= 0;
      seed = uint64_t(v);
    } else if (key == "noise") {
      ok = number(value, &v) && v >= 0 && v < 2;
      s->noise_ = v;
    } else if (key == "channels") {
      ok = number(value, &v) && v >= 0 && v <= 64 && v == double(int(v));
      s->channels_ = int(v);
    } else if (key == "scale" || key == "halved" || key == "halfchunk") {
      double* factors = key == "scale" ? s->scale_ : key == "halved" ? s->halved_ : s->halfChunk_;
      std::stringstream pairs(value);
      std::string pair;
      while (ok && std::getline(pairs, pair, '/')) {
        size_t colon = pair.find(':');
        double cell = -1, factor = -1;
        ok = colon != std::string::npos && number(pair.substr(0, colon), &cell) &&
             number(pair.substr(colon + 1), &factor) && cell >= 0 && cell < kNumCells &&
             cell == double(int(cell)) && factor > 0;
        if (ok) factors[int(cell)] = factor;
      }
    } else {
      *error = "unknown key '" + key + "'";
      return nullptr;
    }
    if (!ok) {
      *error = "bad value in '" + item + "'";
      return nullptr;
    }
  }
  s->state_ ^= seed * 0xD1B54A32D192ED03ull + uint64_t(rank + 1) * 0x8CB92BA72F3D8DD7ull;
  return s;
}

double SyntheticMeasurements::uniform() {
  // xorshift64*: deterministic per (seed, rank), allocation-free.
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return double((state_ * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

void SyntheticMeasurements::publish(uint64_t commId, int func, uint64_t seqNumber, uint64_t nBytes,
                                    const float* original, int cell, int channels, bool halfChunk) {
  if (cell < 0 || cell >= kNumCells || !(original[cell] > 0)) return;
  double u1 = std::max(uniform(), 1e-12), u2 = uniform();
  double gauss = std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  const bool fewer = channels > 0 && channels < channels_;
  double us = original[cell] * scale_[cell] * (fewer ? halved_[cell] : 1.0) *
              (halfChunk ? halfChunk_[cell] : 1.0) * std::exp(noise_ * gauss);
  bus::CollectiveSample sample;
  sample.commId = commId;
  sample.func = func;
  sample.seqNumber = seqNumber;
  sample.algo = cell / abi::kNumProtocols;
  sample.proto = cell % abi::kNumProtocols;
  sample.nBytes = nBytes;
  sample.nChannels = channels > 0 ? std::min(channels, channels_) : channels_;
  sample.durationNs = uint64_t(us * 1000);
  sample.clock = bus::DurationClock::kGpu;
  sample.completedAtNs = monotonicNs();
  bus::MeasurementBus::instance().publish(sample);
}

}  // namespace autopilot::tuner
