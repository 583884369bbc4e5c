//===- Checkpoints.cpp - dsc-run train --checkpoint-every ----------------===//

#include "Checkpoints.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <vector>

using namespace dsc;

PeriodicCheckpoints::PeriodicCheckpoints(std::string path, int64_t every,
                                         int64_t keep)
    : every(every), keep(keep) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash + 1)) {
    stem = path.substr(0, dot);
    extension = path.substr(dot);
  } else {
    stem = std::move(path);
  }
}

std::string PeriodicCheckpoints::pathAfter(int64_t steps) const {
  return stem + "-step" + std::to_string(steps) + extension;
}

void PeriodicCheckpoints::afterStep(const rt::Trainer &trainer) const {
  const int64_t steps = trainer.currentStep();
  if (steps % every != 0)
    return;
  const std::string path = pathAfter(steps);
  // Every rank takes part in the save (ZeRO gathers shards); rank 0 writes.
  const bool writer = trainer.rank() == 0;
  // Also removes temporaries a killed save of this name left behind.
  if (writer)
    dsc::checkOutputFile(path, "--checkpoint-every");
  trainer.saveCheckpoint(path);
  if (writer)
    removeOlder(steps);
}

void PeriodicCheckpoints::removeOlder(int64_t newest) const {
  namespace fs = std::filesystem;
  const fs::path stemPath(stem);
  const fs::path dir = stemPath.has_parent_path() ? stemPath.parent_path() : ".";
  const std::string prefix = stemPath.filename().string() + "-step";
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() + extension.size() ||
        name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - extension.size(), extension.size(),
                     extension) != 0)
      continue;
    const std::string digits = name.substr(
        prefix.size(), name.size() - prefix.size() - extension.size());
    if (digits.empty() || digits.size() > 18 ||
        !std::all_of(digits.begin(), digits.end(), ::isdigit))
      continue;
    // A later step than this run's is another run's: not ours to prune,
    // and counting it would delete what this run just wrote.
    const int64_t step = std::stoll(digits);
    if (step <= newest)
      found.emplace_back(step, e.path());
  }
  std::sort(found.begin(), found.end(),
            [](const auto &a, const auto &b) { return a.first > b.first; });
  for (size_t i = size_t(keep); i < found.size(); ++i)
    fs::remove(found[i].second, ec);
}
