//===- Monitors.h - dsc-run train's csv_monitor and tensorboard --*- C++ -*-===//
//
// DeepSpeed's file monitors, written by rank 0 after every step: the
// training loss, the learning rate and (fp16) the loss scale under
// DeepSpeed's names (Train/Samples/train_loss, .../lr, .../loss_scale),
// each at DeepSpeed's x value, the samples trained so far. csv_monitor
// appends "step,value" rows to Train_Samples_<name>.csv; tensorboard
// appends TensorBoard scalar events to an events.out.tfevents file. The
// directories come from the compiled step (dsc.csv_monitor_dir,
// dsc.tensorboard_dir: output_path/job_name).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSCRUN_MONITORS_H
#define DSC_TOOLS_DSCRUN_MONITORS_H

#include "dsc/Runtime/Trainer.h"

#include <string>

namespace dsc {

class Monitors {
public:
  explicit Monitors(const rt::Program &program);
  /// Creates the directories and the TensorBoard file, before training;
  /// throws naming the section and the path when it cannot.
  void open();
  /// The events of step `s`.
  void write(const rt::StepStats &s);

private:
  void csv(const std::string &name, int64_t samples, double value);
  void tensorboard(const std::string &tag, int64_t samples, double value);

  std::string csvDir, boardDir, boardFile;
  int64_t samplesPerStep = 1;
};

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_MONITORS_H
