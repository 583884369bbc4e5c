// Token files, safetensors and atomic writes, including every error path.
#include "TestUtil.h"

#include "dsc/Runtime/IO.h"

#include <cstdint>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace dsc::rt;
using dsc::writeFileAtomic;
using namespace dsc::rt::test;

namespace {
void writeRaw(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}
std::string readRaw(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
std::string llmcHeader(int32_t magic, int32_t version, int32_t count) {
  std::string h(1024, '\0');
  int32_t w[3] = {magic, version, count};
  std::memcpy(h.data(), w, sizeof(w));
  return h;
}
std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  DIR *d = opendir(dir.c_str());
  while (dirent *e = readdir(d))
    if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
      names.push_back(e->d_name);
  closedir(d);
  return names;
}
bool contains(const std::string &s, const std::string &sub) {
  return s.find(sub) != std::string::npos;
}
} // namespace

TEST(TokenFile, LlmcRoundTrip) {
  std::string dir = tempDir(), path = dir + "/train.bin";
  std::vector<int32_t> toks = {0, 1, 50256, 65535, 7};
  writeTokenFile(path, toks);
  EXPECT_EQ(readRaw(path).size(), 1024u + 10);
  TokenFile tf = TokenFile::open(path);
  EXPECT_EQ(tf.data(), toks);
  EXPECT_EQ(tf.size(), 5);
  EXPECT_EQ(tf.maxToken(), 65535);
  EXPECT_EQ(tf.path, path);
  EXPECT_THROW(writeTokenFile(dir + "/bad.bin", {70000}), Error);
}

// llm.c's LLaMA 3 files (dev/data/data_common.py): magic 20240801,
// version 7, uint32 tokens, for vocabularies beyond 65,536.
TEST(TokenFile, LlmcLlama3Uint32) {
  std::string dir = tempDir();
  const uint32_t toks[] = {0, 65536, 128255, 7};
  writeRaw(dir + "/l3.bin",
           llmcHeader(20240801, 7, 4) +
               std::string(reinterpret_cast<const char *>(toks), sizeof toks));
  EXPECT_EQ(TokenFile::open(dir + "/l3.bin").data(),
            (std::vector<int32_t>{0, 65536, 128255, 7}));
  // Version 1 is GPT-2's magic's; the uint32 magic needs version 7.
  writeRaw(dir + "/v1.bin", llmcHeader(20240801, 1, 0));
  EXPECT_EQ(errorOf([&] { TokenFile::open(dir + "/v1.bin"); }),
            dir + "/v1.bin: unsupported llm.c token file version 1 (expected "
                  "7 after magic 20240801)");
  // The count is of 4-byte tokens.
  writeRaw(dir + "/odd.bin", llmcHeader(20240801, 7, 2) + std::string(6, '\0'));
  EXPECT_EQ(errorOf([&] { TokenFile::open(dir + "/odd.bin"); }),
            dir + "/odd.bin: truncated (header says 2 tokens, file holds 1)");
  const uint32_t huge[] = {1, 0x80000000u};
  writeRaw(dir + "/huge.bin",
           llmcHeader(20240801, 7, 2) +
               std::string(reinterpret_cast<const char *>(huge), sizeof huge));
  EXPECT_EQ(errorOf([&] { TokenFile::open(dir + "/huge.bin"); }),
            dir + "/huge.bin: token 1 is 2147483648, beyond any vocabulary "
                  "(2^31 - 1)");
}

TEST(TokenFile, RawUint16AndText) {
  std::string dir = tempDir();
  std::string raw("\x01\x00\x02\x01\xff\xff", 6);
  writeRaw(dir + "/a.u16", raw);
  EXPECT_EQ(TokenFile::open(dir + "/a.u16").data(),
            (std::vector<int32_t>{1, 258, 65535}));
  writeRaw(dir + "/t.txt", "hi\xc3\xa9");
  EXPECT_EQ(TokenFile::open(dir + "/t.txt").data(),
            (std::vector<int32_t>{'h', 'i', 0xc3, 0xa9}));
}

TEST(TokenFile, Errors) {
  std::string dir = tempDir();
  EXPECT_EQ(errorOf([&] { TokenFile::open(dir + "/nope.bin"); }),
            "cannot open " + dir + "/nope.bin: No such file or directory");
  // Header says 10 tokens, file holds 3.
  writeRaw(dir + "/trunc.bin", llmcHeader(20240520, 1, 10) + std::string(6, '\1'));
  EXPECT_EQ(errorOf([&] { TokenFile::open(dir + "/trunc.bin"); }),
            dir + "/trunc.bin: truncated (header says 10 tokens, file holds 3)");
  // Trailing bytes beyond the header's count.
  writeRaw(dir + "/long.bin", llmcHeader(20240520, 1, 1) + std::string(4, '\1'));
  EXPECT_TRUE(contains(errorOf([&] { TokenFile::open(dir + "/long.bin"); }),
                       "header says 1 tokens"));
  // Right magic, wrong version.
  writeRaw(dir + "/ver.bin", llmcHeader(20240520, 2, 0));
  EXPECT_TRUE(contains(errorOf([&] { TokenFile::open(dir + "/ver.bin"); }),
                       "version 2"));
  // Magic but shorter than the header.
  writeRaw(dir + "/hdr.bin", llmcHeader(20240520, 1, 0).substr(0, 100));
  EXPECT_TRUE(contains(errorOf([&] { TokenFile::open(dir + "/hdr.bin"); }),
                       "truncated llm.c header"));
  // A .bin file without llm.c's magic number is not read as raw tokens.
  writeRaw(dir + "/raw.bin", std::string("\x01\x00\x02\x01", 4));
  EXPECT_EQ(errorOf([&] { TokenFile::open(dir + "/raw.bin"); }),
            dir + "/raw.bin: not an llm.c token file: it starts with 16908289, "
                  "not the magic number 20240520 (uint16 tokens) or 20240801 "
                  "(uint32 tokens); raw uint16 tokens: give the file another "
                  "extension, such as .u16");
  writeRaw(dir + "/short.bin", std::string("\x01\x00", 2));
  EXPECT_TRUE(contains(errorOf([&] { TokenFile::open(dir + "/short.bin"); }),
                       "it starts with 2 bytes"));
  // Raw uint16 with an odd length.
  writeRaw(dir + "/odd.u16", std::string(5, '\0'));
  EXPECT_TRUE(contains(errorOf([&] { TokenFile::open(dir + "/odd.u16"); }),
                       "odd byte length"));
}

TEST(TokenFile, NonRegularFilesAreRefused) {
  // A directory, a FIFO (open() alone would block until a writer comes) and
  // a device that never ends: refused at once, naming the path.
  std::string dir = tempDir(), fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(errorOf([&] { TokenFile::open(dir); }),
            dir + " is not a regular file (a directory)");
  EXPECT_EQ(errorOf([&] { TokenFile::open(fifo); }),
            fifo + " is not a regular file (a FIFO)");
  EXPECT_EQ(errorOf([&] { TokenFile::open("/dev/zero"); }),
            "/dev/zero is not a regular file (a character device)");
  EXPECT_EQ(errorOf([&] { Safetensors::read("/dev/zero"); }),
            "/dev/zero is not a regular file (a character device)");
}

TEST(TokenFile, BatchPositionsAndTooShort) {
  std::string dir = tempDir(), path = dir + "/d.bin";
  std::vector<int32_t> toks(50);
  for (int i = 0; i < 50; ++i)
    toks[size_t(i)] = i;
  writeTokenFile(path, toks);
  TokenFile tf = TokenFile::open(path);
  const int64_t B = 2, T = 3, S = 2; // span = 50 - 12 - 1 = 37
  int32_t in[6], tg[6];
  for (int64_t step : {0, 1, 5}) {
    for (int64_t slice : {0, 1}) {
      tf.batch(step, slice, S, B, T, in, tg);
      int64_t start = (step * S * B * T) % 37 + slice * B * T;
      for (int k = 0; k < 6; ++k) {
        ASSERT_EQ(in[k], start + k);
        ASSERT_EQ(tg[k], start + k + 1);
      }
    }
  }
  writeTokenFile(dir + "/s.bin", {1, 2, 3, 4, 5, 6, 7});
  TokenFile small = TokenFile::open(dir + "/s.bin");
  EXPECT_EQ(errorOf([&] { small.batch(0, 0, 1, B, T, in, tg); }),
            "data file " + dir +
                "/s.bin has 7 tokens; need at least 8 "
                "(train_batch_size*seq_len+2) for a global batch of 2 rows of "
                "seq-len 3");
  EXPECT_EQ(errorOf([&] { tf.batch(0, 2, 2, B, T, in, tg); }),
            "batch: invalid arguments (B=2, T=3, slice 2 of 2)");
  writeTokenFile(dir + "/e.bin", toks);
  EXPECT_NO_THROW(TokenFile::open(dir + "/e.bin").batch(1000000007, 1, 8, B, T, in, tg));
}

namespace {
Tensor f32Tensor(std::vector<int64_t> shape, std::vector<float> v) {
  Tensor t;
  t.dtype = DType::F32;
  t.shape = std::move(shape);
  t.bytes.resize(v.size() * 4);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
/// A safetensors file with the given JSON header and data bytes.
std::string stFile(const std::string &header, const std::string &data) {
  uint64_t n = header.size();
  std::string out(reinterpret_cast<const char *>(&n), 8);
  return out + header + data;
}
} // namespace

TEST(Safetensors, RoundTripSortedAligned) {
  std::string dir = tempDir(), path = dir + "/m.safetensors";
  Safetensors st;
  st.tensors["wte.weight"] = f32Tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  st.tensors["a.bias"] = f32Tensor({3}, {-1, 0, 1});
  Tensor ids;
  ids.dtype = DType::I32;
  ids.shape = {2};
  ids.bytes.assign(8, '\x07');
  st.tensors["ids"] = ids;
  Tensor step;
  step.dtype = DType::I64;
  step.shape = {};
  int64_t sv = 123456789012345;
  step.bytes.resize(8);
  std::memcpy(step.bytes.data(), &sv, 8);
  st.tensors["step"] = step;
  st.metadata["format"] = "pt";
  st.write(path);
  std::string raw = readRaw(path);
  uint64_t n;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  std::string header = raw.substr(8, n);
  EXPECT_LT(header.find("\"a.bias\""), header.find("\"ids\""));
  EXPECT_LT(header.find("\"ids\""), header.find("\"step\""));
  EXPECT_LT(header.find("\"step\""), header.find("\"wte.weight\""));
  EXPECT_TRUE(contains(header, "\"__metadata__\":{\"format\":\"pt\"}"));
  Safetensors back = Safetensors::read(path);
  ASSERT_EQ(back.tensors.size(), 4u);
  EXPECT_EQ(back.metadata, st.metadata);
  for (const auto &[name, t] : st.tensors) {
    const Tensor &b = back.tensors.at(name);
    EXPECT_EQ(b.dtype, t.dtype) << name;
    EXPECT_EQ(b.shape, t.shape) << name;
    EXPECT_EQ(b.bytes, t.bytes) << name;
  }
  EXPECT_EQ(listDir(dir).size(), 1u); // no temp file left
}

TEST(Safetensors, HalfTensorsWidenToF32AndOthersAreSkipped) {
  std::string dir = tempDir();
  // F16: 1.0, 65504 (max), 2^-24 (smallest subnormal), -0, inf;
  // BF16: 1.0, -2.5; U8: left out and listed in `skipped`.
  const uint16_t f16[] = {0x3C00, 0x7BFF, 0x0001, 0x8000, 0x7C00};
  const uint16_t bf16[] = {0x3F80, 0xC020};
  std::string data(reinterpret_cast<const char *>(f16), sizeof f16);
  data.append(reinterpret_cast<const char *>(bf16), sizeof bf16);
  data.append(2, '\7');
  writeRaw(dir + "/half.safetensors",
           stFile(R"({"h":{"dtype":"F16","shape":[5],"data_offsets":[0,10]},)"
                  R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[10,14]},)"
                  R"("u":{"dtype":"U8","shape":[2],"data_offsets":[14,16]}})",
                  data));
  Safetensors st = Safetensors::read(dir + "/half.safetensors");
  ASSERT_EQ(st.tensors.count("h"), 1u);
  const Tensor &h = st.tensors.at("h");
  EXPECT_EQ(h.dtype, DType::F32);
  const float *hv = reinterpret_cast<const float *>(h.bytes.data());
  EXPECT_EQ(hv[0], 1.0f);
  EXPECT_EQ(hv[1], 65504.0f);
  EXPECT_EQ(hv[2], std::ldexp(1.0f, -24));
  EXPECT_TRUE(hv[3] == 0.0f && std::signbit(hv[3]));
  EXPECT_TRUE(std::isinf(hv[4]) && hv[4] > 0);
  const float *bv = reinterpret_cast<const float *>(st.tensors.at("b").bytes.data());
  EXPECT_EQ(bv[0], 1.0f);
  EXPECT_EQ(bv[1], -2.5f);
  EXPECT_EQ(st.tensors.count("u"), 0u);
  EXPECT_EQ(st.skipped.at("u"), "U8");
}

TEST(Safetensors, ReadErrors) {
  std::string dir = tempDir();
  auto err = [&](const std::string &name, const std::string &content) {
    writeRaw(dir + "/" + name, content);
    return errorOf([&] { Safetensors::read(dir + "/" + name); });
  };
  EXPECT_EQ(errorOf([&] { Safetensors::read(dir + "/missing.safetensors"); }),
            "cannot open " + dir + "/missing.safetensors: No such file or directory");
  EXPECT_TRUE(contains(err("short", "abc"), "truncated"));
  {
    std::string f = stFile("{}", "");
    uint64_t big = 1000;
    std::memcpy(f.data(), &big, 8);
    EXPECT_TRUE(contains(err("hdrlen", f), "exceeds the file size"));
  }
  EXPECT_TRUE(contains(err("json", stFile("{\"a\": [", "")), "invalid safetensors header JSON"));
  std::string s = err("oob", stFile(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                        std::string(4, '\0')));
  EXPECT_TRUE(contains(s, "'w'") && contains(s, "outside the data section")) << s;
  s = err("shape", stFile(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                          std::string(8, '\0')));
  EXPECT_TRUE(contains(s, "'w'") && contains(s, "need 12")) << s;
  s = err("nooff", stFile(R"({"w":{"dtype":"F32","shape":[3]}})", ""));
  EXPECT_TRUE(contains(s, "data_offsets")) << s;
  // A file cut short after a valid write.
  Safetensors st;
  st.tensors["x"] = f32Tensor({4}, {1, 2, 3, 4});
  st.write(dir + "/ok.safetensors");
  std::string ok = readRaw(dir + "/ok.safetensors");
  s = err("cut.safetensors", ok.substr(0, ok.size() - 4));
  EXPECT_TRUE(contains(s, "'x'")) << s;
}

/// Header entry "name": dtype, shape, [b, e].
static std::string stEntry(const std::string &name, const std::string &dtype,
                    const std::string &shape, uint64_t b, uint64_t e) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":[" + shape +
         "],\"data_offsets\":[" + std::to_string(b) + "," +
         std::to_string(e) + "]}";
}

TEST(Safetensors, TensorsMustTileTheDataSection) {
  std::string dir = tempDir();
  auto err = [&](const std::string &header, size_t dataBytes) {
    writeRaw(dir + "/t", stFile(header, std::string(dataBytes, '\0')));
    return errorOf([&] { Safetensors::read(dir + "/t"); });
  };
  const std::string a = stEntry("a", "F32", "2", 0, 8);
  EXPECT_EQ(err("{" + a + "," + stEntry("b", "F32", "2", 4, 12) + "}", 12),
            dir + "/t: tensors 'a' and 'b' overlap in the data section "
                  "(bytes 4 to 8)");
  // An alias: two names for the same bytes.
  EXPECT_EQ(err("{" + a + "," + stEntry("b", "F32", "2", 0, 8) + "}", 8),
            dir + "/t: tensors 'a' and 'b' overlap in the data section "
                  "(bytes 0 to 8)");
  EXPECT_EQ(err("{" + a + "," + stEntry("b", "F32", "2", 12, 20) + "}", 20),
            dir + "/t: bytes 8 to 12 of the data section belong to no tensor "
                  "(a gap before tensor 'b')");
  EXPECT_EQ(err("{" + stEntry("b", "F32", "2", 4, 12) + "}", 12),
            dir + "/t: bytes 0 to 4 of the data section belong to no tensor "
                  "(a gap before tensor 'b')");
  EXPECT_EQ(err("{" + a + "}", 12),
            dir + "/t: 4 trailing bytes after the last tensor's data (the "
                  "data section is 12 bytes, the tensors cover 8)");
  EXPECT_EQ(err("{}", 3),
            dir + "/t: 3 trailing bytes after the last tensor's data (the "
                  "data section is 3 bytes, the tensors cover 0)");
  EXPECT_EQ(err("{" + stEntry("a", "F32", "0", 8, 0) + "}", 8),
            dir + "/t: tensor 'a': data_offsets [8, 0] end before they begin");
  // Tensors dsc skips (U8 here) still count: their bytes are theirs.
  EXPECT_EQ(err("{" + a + "," + stEntry("u", "U8", "3", 8, 12) + "}", 12),
            dir + "/t: tensor 'u': data_offsets span 4 bytes but shape and "
                  "dtype need 3");
  EXPECT_EQ(err("{" + stEntry("a", "Q7", "2", 0, 8) + "}", 8),
            dir + "/t: tensor 'a': unknown dtype 'Q7'");
  EXPECT_EQ(err("{" + stEntry("a", "F4", "3", 0, 2) + "}", 2),
            dir + "/t: tensor 'a': 3 elements of F4 do not fill whole bytes");
  // Valid: in any header order, with empty tensors anywhere, U8 and F4
  // tensors skipped but accounted for.
  writeRaw(dir + "/ok", stFile("{" + stEntry("z", "F32", "0", 0, 0) + "," +
                                   stEntry("u", "U8", "3", 8, 11) + "," + a +
                                   "," + stEntry("e", "F32", "0", 8, 8) + "," +
                                   stEntry("f", "F4", "2", 11, 12) + "}",
                               std::string(12, '\0')));
  Safetensors st = Safetensors::read(dir + "/ok");
  EXPECT_EQ(st.tensors.size(), 3u);
  EXPECT_EQ(st.skipped.size(), 2u);
}

TEST(Safetensors, HeaderKeysAreUniqueAndNestingIsBounded) {
  std::string dir = tempDir();
  auto err = [&](const std::string &header, size_t dataBytes) {
    writeRaw(dir + "/t", stFile(header, std::string(dataBytes, '\0')));
    return errorOf([&] { Safetensors::read(dir + "/t"); });
  };
  // nlohmann::json alone keeps the last "a" and the file would load.
  const std::string a = stEntry("a", "F32", "2", 0, 8);
  EXPECT_EQ(err("{" + a + "," + a + "}", 8),
            dir + "/t: safetensors header has the key 'a' twice");
  EXPECT_EQ(err(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],)"
                R"("data_offsets":[0,8]}})", 8),
            dir + "/t: safetensors header has the key 'a.dtype' twice");
  EXPECT_EQ(err(R"({"__metadata__":{"k":"1","k":"2"}})", 0),
            dir + "/t: safetensors header has the key '__metadata__.k' twice");
  std::string deep = "{\"__metadata__\":" + std::string(100000, '[') +
                     std::string(100000, ']') + "}";
  EXPECT_TRUE(contains(err(deep, 0), "nesting too deep (more than 16 levels)"));
}

TEST(Safetensors, WriteRejectsInconsistentTensor) {
  std::string dir = tempDir();
  Safetensors st;
  st.tensors["x"] = f32Tensor({5}, {1, 2, 3, 4});
  EXPECT_THROW(st.write(dir + "/x.safetensors"), Error);
  EXPECT_TRUE(listDir(dir).empty());
}

TEST(AtomicWrite, FailedWriteKeepsOldFileAndRemovesTemp) {
  std::string dir = tempDir(), path = dir + "/ckpt.safetensors";
  writeFileAtomic(path, "old contents");
  EXPECT_EQ(readRaw(path), "old contents");
  // Simulate a full disk: a file-size limit makes write() fail with EFBIG.
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto oldHandler = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg = errorOf([&] { writeFileAtomic(path, std::string(1 << 20, 'x')); });
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, oldHandler);
  EXPECT_TRUE(contains(msg, "cannot write " + path)) << msg;
  EXPECT_EQ(readRaw(path), "old contents");
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"ckpt.safetensors"});
}

// A directory (or device, FIFO) as the target is refused before a temporary
// exists: a rename would replace it.
TEST(AtomicWrite, NonRegularTargetIsRefusedWithoutTemp) {
  std::string dir = tempDir(), target = dir + "/isdir";
  ASSERT_EQ(mkdir(target.c_str(), 0755), 0);
  std::string msg = errorOf([&] { writeFileAtomic(target, "data"); });
  EXPECT_TRUE(contains(msg, "is a directory, not a regular file")) << msg;
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"isdir"});
}

TEST(AtomicWrite, MissingOrUnwritableDirectory) {
  std::string dir = tempDir();
  EXPECT_TRUE(contains(errorOf([&] { writeFileAtomic(dir + "/no/such/f", "x"); }),
                       "cannot write " + dir + "/no/such/f"));
  if (geteuid() != 0) { // root ignores directory permissions
    std::string ro = dir + "/ro";
    ASSERT_EQ(mkdir(ro.c_str(), 0755), 0);
    writeFileAtomic(ro + "/f", "old");
    chmod(ro.c_str(), 0555);
    EXPECT_THROW(writeFileAtomic(ro + "/f", "new"), Error);
    chmod(ro.c_str(), 0755);
    EXPECT_EQ(readRaw(ro + "/f"), "old");
  }
}
