//===- CommsLog.cpp - DeepSpeed's comms_logger records and summary --------===//

#include "dsc/Runtime/CommsLog.h"

#include <cstdio>
#include <sstream>

namespace dsc::rt {

namespace {
/// DeepSpeed's convert_size: "0B", "1.5 KB", "4.0 MB" (powers of 1024).
std::string sizeText(int64_t bytes) {
  if (bytes <= 0)
    return "0B";
  static const char *units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", v, units[u]);
  return text;
}

std::string fixed(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", v);
  return text;
}
} // namespace

std::pair<double, double> CommsLog::bandwidthGbps(CollectiveKind kind,
                                                  int64_t bytes, int n,
                                                  double seconds) {
  if (seconds <= 0 || n < 1)
    return {0, 0};
  const double algbw = double(bytes) * 8 / seconds / 1e9;
  double factor = 1;
  switch (kind) {
  case CollectiveKind::AllReduce:
    factor = 2.0 * (n - 1) / n;
    break;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllGather:
  case CollectiveKind::AllToAll:
    factor = double(n - 1) / n;
    break;
  case CollectiveKind::Broadcast:
  case CollectiveKind::Send:
  case CollectiveKind::Count:
    break;
  }
  return {algbw, algbw * factor};
}

const std::set<std::string> &CommsLog::operationNames() {
  static const std::set<std::string> names = {
      "all_reduce", "reduce_scatter", "all_gather", "all_to_all",
      "broadcast",  "send",           "recv"};
  return names;
}

void CommsLog::record(const std::string &op, CollectiveKind kind,
                      const std::string &function, int64_t bytes,
                      int groupSize, double seconds) {
  std::string name = op;
  if (options.debug)
    name += " | @" + function;
  const auto [algbw, busbw] = bandwidthGbps(kind, bytes, groupSize, seconds);
  std::lock_guard<std::mutex> lock(mutex);
  Stat &s = stats[name][bytes];
  ++s.count;
  s.seconds += seconds;
  s.algbw += algbw;
  s.busbw += busbw;
  if (options.verbose)
    verboseOut << "comm op: " << name << " | time (ms): "
               << fixed(seconds * 1e3) << " | msg size: " << sizeText(bytes)
               << " | algbw (Gbps): " << fixed(algbw)
               << " | busbw (Gbps): " << fixed(busbw) << "\n"
               << std::flush;
}

std::string CommsLog::summary() const {
  std::lock_guard<std::mutex> lock(mutex);
  if (stats.empty())
    return "";
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-28s%-16s%-10s%-20s%-18s%-18s%s\n",
                "Comm. Op", "Message Size", "Count", "Total Latency(ms)",
                "Avg Latency(ms)", "tput_avg (Gbps)", "busbw_avg (Gbps)");
  out << line;
  for (const auto &[name, bySize] : stats) {
    out << name << "\n";
    for (const auto &[bytes, s] : bySize) {
      std::snprintf(line, sizeof line, "%-28s%-16s%-10lld%-20s%-18s%-18s%s\n",
                    "", sizeText(bytes).c_str(), (long long)s.count,
                    fixed(s.seconds * 1e3).c_str(),
                    fixed(s.seconds * 1e3 / double(s.count)).c_str(),
                    fixed(s.algbw / double(s.count)).c_str(),
                    fixed(s.busbw / double(s.count)).c_str());
      out << line;
    }
  }
  return out.str();
}

} // namespace dsc::rt
