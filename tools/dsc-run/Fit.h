//===- Fit.h - What fits a device: `estimate --device-memory` ---*- C++ -*-===//
//
// Answers "what fits in this much device memory" from the compiler's own
// plans, with no trial run: each candidate training config (the user's,
// then with more recomputation, then with smaller optimizer state) is
// compiled and its arena planned as `estimate` plans it, for every
// micro-batch that keeps the user's samples per step, and the cheapest
// candidate that fits is printed as a ready ds_config.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSCRUN_FIT_H
#define DSC_TOOLS_DSCRUN_FIT_H

#include "dsc/Frontend/Config.h"

#include <cstdint>
#include <ostream>
#include <string>

namespace dsc {

/// "24GiB", "16GB", "512MiB", "1.5e9" (bytes): a byte count; a one-line
/// error naming `option` for anything else.
int64_t parseByteSize(const std::string &text, const std::string &option);

/// Searches the candidates for `configPath` (the user's training config,
/// read with `inputs`) and the model `model` under `budget` bytes of
/// planned device peak; writes the table of candidates and the chosen
/// ds_config to `out`. Returns false when nothing fits.
bool fitDeviceMemory(const ModelConfig &model, const std::string &configPath,
                     const TrainConfigInputs &inputs, int64_t budget,
                     std::ostream &out);

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_FIT_H
