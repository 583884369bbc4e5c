//===- Rotary.h - Rotary frequencies shared by CPU and CUDA -----*- C++ -*-===//
//
// Internal to RotaryCpu.cpp and RotaryEmit.cpp: the frequencies of
// dsc.rotary from its attributes, computed once on the host in double (the
// CPU kernel uses them directly; the CUDA emitter writes them into the
// kernel as exact literals), so both backends rotate by the same angles.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_KERNELS_ROTARY_ROTARY_H
#define DSC_LIB_KERNELS_ROTARY_ROTARY_H

#include "dsc/Program/Program.h"

#include <cmath>
#include <vector>

namespace dsc::rt {

/// f_i for i < D/2: theta^(-2i/D), then rope_scaling as transformers'
/// _compute_default/linear/llama3_parameters do (in double).
inline std::vector<double> rotaryFrequencies(const Instr &I, int64_t D) {
  const double theta = I.getFloat("theta"), factor = I.getFloat("factor");
  const std::string scaling = I.getString("scaling");
  std::vector<double> f(size_t(D / 2));
  for (int64_t i = 0; i < D / 2; ++i)
    f[size_t(i)] = 1.0 / std::pow(theta, double(2 * i) / double(D));
  if (scaling == "linear") {
    for (double &x : f)
      x /= factor;
  } else if (scaling == "llama3") {
    const double low = I.getFloat("low_freq_factor"),
                 high = I.getFloat("high_freq_factor"),
                 context = double(I.getInt("original_max_positions"));
    const double lowWavelen = context / low, highWavelen = context / high;
    for (double &x : f) {
      const double wavelen = 2.0 * M_PI / x;
      if (wavelen > lowWavelen) {
        x /= factor; // long wavelengths: stretched like linear scaling
      } else if (!(wavelen < highWavelen)) {
        // In between: a blend from the stretched to the original frequency.
        const double smooth = (context / wavelen - low) / (high - low);
        x = (1.0 - smooth) * x / factor + smooth * x;
      }
    }
  }
  return f;
}

} // namespace dsc::rt

#endif // DSC_LIB_KERNELS_ROTARY_ROTARY_H
