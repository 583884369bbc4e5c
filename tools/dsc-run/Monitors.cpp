//===- Monitors.cpp - dsc-run train's csv_monitor and tensorboard ---------===//

#include "Monitors.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace dsc;

namespace {

/// CRC-32C (Castagnoli), as TFRecord frames use it.
uint32_t crc32c(const std::string &bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0x82F63B78u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = ~0u;
  for (unsigned char b : bytes)
    crc = table[(crc ^ b) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t maskedCrc(const std::string &bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string littleEndian(uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i)
    s += char((v >> (8 * i)) & 0xff);
  return s;
}

std::string varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += char((v & 0x7f) | 0x80);
    v >>= 7;
  }
  return s + char(v);
}

/// A length-delimited protobuf field.
std::string bytesField(int field, const std::string &bytes) {
  return varint(uint64_t(field) << 3 | 2) + varint(bytes.size()) + bytes;
}

/// tensorflow.Event: wall_time (1, double), step (2, int64) and either
/// file_version (3) or summary (5).
std::string event(double wallTime, int64_t step, const std::string &rest) {
  uint64_t bits;
  std::memcpy(&bits, &wallTime, sizeof bits);
  return varint(1 << 3 | 1) + littleEndian(bits, 8) + varint(2 << 3 | 0) +
         varint(uint64_t(step)) + rest;
}

/// A TFRecord: length, its masked CRC, the data, its masked CRC.
std::string record(const std::string &data) {
  const std::string length = littleEndian(data.size(), 8);
  return length + littleEndian(maskedCrc(length), 4) + data +
         littleEndian(maskedCrc(data), 4);
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void append(const std::string &path, const std::string &bytes,
            const char *section) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << bytes;
  out.flush();
  if (!out)
    throw Error(std::string(section) + ": cannot write " + path + " (" +
                std::strerror(errno) + ")");
}

void makeDirectory(const std::string &dir, const char *section) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw Error(std::string(section) + ": cannot create directory '" + dir +
                "'" + (ec ? ": " + ec.message() : ": not a directory"));
  if (::access(dir.c_str(), W_OK) != 0)
    throw Error(std::string(section) + ": directory '" + dir +
                "' is not writable");
}

} // namespace

Monitors::Monitors(const rt::Program &program)
    : csvDir(program.metaString("csv_monitor_dir", "")),
      boardDir(program.metaString("tensorboard_dir", "")) {
  samplesPerStep = program.metaInt("micro_batch", 1) *
                   program.metaInt("grad_accum", 1) * program.mesh().data;
}

void Monitors::open() {
  if (!csvDir.empty())
    makeDirectory(csvDir, "csv_monitor");
  if (boardDir.empty())
    return;
  makeDirectory(boardDir, "tensorboard");
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  boardFile = boardDir + "/events.out.tfevents." +
              std::to_string(int64_t(now())) + "." + host + "." +
              std::to_string(::getpid()) + ".0";
  append(boardFile, record(event(now(), 0, bytesField(3, "brain.Event:2"))),
         "tensorboard");
}

void Monitors::csv(const std::string &name, int64_t samples, double value) {
  const std::string path = csvDir + "/Train_Samples_" + name + ".csv";
  std::error_code ec;
  const bool fresh = !std::filesystem::exists(path, ec) ||
                     std::filesystem::file_size(path, ec) == 0;
  char row[64];
  std::snprintf(row, sizeof row, "%lld,%.9g\n", (long long)samples, value);
  append(path, (fresh ? "step," + name + "\n" : std::string()) + row,
         "csv_monitor");
}

void Monitors::tensorboard(const std::string &tag, int64_t samples,
                           double value) {
  const float v = float(value);
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  // Summary { Value { tag (1), simple_value (2, float) } }.
  const std::string summaryValue =
      bytesField(1, tag) + varint(2 << 3 | 5) + littleEndian(bits, 4);
  append(boardFile,
         record(event(now(), samples, bytesField(5, bytesField(1, summaryValue)))),
         "tensorboard");
}

void Monitors::write(const rt::StepStats &s) {
  if (csvDir.empty() && boardDir.empty())
    return;
  // DeepSpeed's x value: the samples trained once this step is done.
  const int64_t samples = (s.step + 1) * samplesPerStep;
  std::vector<std::pair<std::string, double>> values = {{"train_loss", s.loss},
                                                        {"lr", s.lr}};
  if (s.hasLossScale)
    values.emplace_back("loss_scale", s.lossScale);
  for (const auto &[name, value] : values) {
    if (!csvDir.empty())
      csv(name, samples, value);
    if (!boardDir.empty())
      tensorboard("Train/Samples/" + name, samples, value);
  }
}
