#include "TestUtil.h"

#include "dsc/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

using namespace dsc::rt;
using dsc::rt::test::errorOf;
using dsc::rt::test::Harness;

TEST(Program, DtypeAndOpcodeNames) {
  EXPECT_EQ(dtypeSize(DType::F32), 4u);
  EXPECT_EQ(dtypeSize(DType::I32), 4u);
  EXPECT_EQ(dtypeSize(DType::I64), 8u);
  EXPECT_STREQ(dtypeName(DType::I64), "i64");
  EXPECT_STREQ(opcodeName(Opcode::LayerNormGrad), "LayerNormGrad");
  EXPECT_STREQ(opcodeName(Opcode::AllReduce), "AllReduce");
}

TEST(Program, InstrGetters) {
  Instr in;
  in.op = Opcode::Softmax;
  in.attrs["scale"] = 0.5;
  in.attrs["causal"] = int64_t(1);
  in.attrs["kind"] = std::string("x");
  EXPECT_EQ(in.getInt("causal"), 1);
  EXPECT_DOUBLE_EQ(in.getFloat("scale"), 0.5);
  EXPECT_DOUBLE_EQ(in.getFloat("causal"), 1.0); // int accepted as float
  EXPECT_EQ(in.getString("kind"), "x");
  try {
    in.getInt("missing");
    FAIL() << "no throw";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("Softmax"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
  try {
    in.getInt("scale");
    FAIL() << "no throw";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("'scale'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("Softmax"), std::string::npos);
  }
  EXPECT_THROW(in.getString("scale"), Error);
  EXPECT_THROW(in.getFloat("kind"), Error);
}

TEST(Program, FindBufferAndFunction) {
  Program p;
  p.buffers.push_back({"w", BufferRole::Param, DType::F32, {2}});
  p.buffers.push_back({"w", BufferRole::GradAcc, DType::F32, {2}});
  EXPECT_EQ(p.findBuffer(BufferRole::GradAcc, "w"), 1);
  EXPECT_EQ(p.findBuffer(BufferRole::Param, "w"), 0);
  EXPECT_EQ(p.findBuffer(BufferRole::OptState, "w"), -1);
  p.functions["micro_step"].name = "micro_step";
  EXPECT_EQ(p.function("micro_step").name, "micro_step");
  EXPECT_THROW(p.function("apply_step"), Error);
}

TEST(Program, PersistentBuffersAreThoseThatOutliveAStep) {
  Program p;
  p.buffers.push_back({"x", BufferRole::Input, DType::I32, {2}});
  p.buffers.push_back({"w", BufferRole::Param, DType::F32, {2}});
  p.buffers.push_back({"t", BufferRole::Temp, DType::F32, {2}});
  p.buffers.push_back({"w", BufferRole::GradAcc, DType::F32, {2}});
  p.buffers.push_back({"loss", BufferRole::Output, DType::F32, {}});
  p.buffers.push_back({"w.m", BufferRole::OptState, DType::F32, {2}});
  EXPECT_EQ(p.persistentBuffers(), (std::vector<int>{1, 3, 5}));
}

TEST(Storage, AlignedAndZeroed) {
  Program p;
  p.buffers.push_back({"a", BufferRole::Temp, DType::F32, {3, 5}});
  p.buffers.push_back({"b", BufferRole::Input, DType::I64, {}});
  p.buffers.push_back({"c", BufferRole::Temp, DType::I32, {0}});
  Storage s(p);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s.data(i)) % 64, 0u);
  for (int k = 0; k < 15; ++k)
    EXPECT_EQ(s.f32(0)[k], 0.0f);
  EXPECT_EQ(s.i64(1)[0], 0);
  EXPECT_EQ(s.totalBytes(), 15u * 4 + 8);
}

TEST(Backend, ValidatesDtypesAndCounts) {
  Harness h;
  int x = h.buf({2, 4});
  int ids = h.buf({3}, DType::F32); // wrong dtype for ids
  int o = h.buf({3, 4});
  int bad = h.buf({5});
  h.alloc();
  try {
    h.run(Opcode::Embedding, {x, ids}, {o});
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()).rfind("Embedding: ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("i32"), std::string::npos);
  }
  try {
    h.run(Opcode::Gelu, {x}, {bad}, {{"approximation", std::string("tanh")}});
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()).rfind("Gelu: ", 0), 0u) << e.what();
  }
  EXPECT_THROW(h.run(Opcode::Gelu, {x}, {99}), Error);
  EXPECT_THROW(h.run(Opcode::Copy, {x, x}, {o}), Error);
  EXPECT_THROW(h.run(Opcode::Gelu, {x}, {x},
                     {{"approximation", std::string("fast")}}),
               Error);
}

TEST(Backend, RunsFunctionBodyInOrder) {
  Harness h;
  int a = h.buf({4});
  int b = h.buf({4});
  h.alloc();
  Function fn;
  Instr fill;
  fill.op = Opcode::Fill;
  fill.outputs = {a};
  fill.attrs["value"] = 2.5;
  Instr add;
  add.op = Opcode::Add;
  add.inputs = {a, a};
  add.outputs = {b};
  fn.body = {fill, add};
  auto comm = createSingleRankCommunicator();
  auto be = createCpuBackend(*comm);
  EXPECT_STREQ(be->name(), "cpu");
  be->run(h.prog, fn, *h.storage, h.rng);
  for (float v : h.get(b))
    EXPECT_EQ(v, 5.0f);
}

TEST(Communicator, SingleRank) {
  auto c = createSingleRankCommunicator();
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->size(), 1);
  float x[3] = {1, 2, 3};
  c->allReduce(x, 3, ReduceOp::Mean);
  EXPECT_EQ(x[2], 3.0f);
  c->allReduce(x, 3, ReduceOp::Max);
  EXPECT_EQ(x[0], 1.0f);
  char gathered[2];
  c->allGather("ab", gathered, 2);
  EXPECT_EQ(std::string(gathered, 2), "ab");
  c->barrier();
  EXPECT_EQ(c->traffic()[CollectiveKind::AllReduce], 0);
  c->broadcast(x, 12, 0);
  EXPECT_EQ(x[1], 2.0f);
  EXPECT_THROW(c->send(x, 12, 0), Error);
  EXPECT_THROW(c->recv(x, 12, 0), Error);
  auto alone = c->split(0, 0);
  EXPECT_EQ(alone->size(), 1);
  MeshGroups groups(*c, Mesh{});
  EXPECT_EQ(&groups.group(MeshAxis::Tensor), c.get());
  EXPECT_THROW(MeshGroups(*c, Mesh{2, 1, 1}), Error);
}

// Ranks count tensor fastest, then data, then pipeline (Megatron's order).
TEST(Mesh, CoordinatesAndPeers) {
  const Mesh m{2, 3, 2}; // data 2, tensor 3, pipeline 2: 12 ranks
  EXPECT_EQ(m.size(), 12);
  // Rank 10 = pipeline 1 * 6 + data 1 * 3 + tensor 1.
  EXPECT_EQ(m.coordinate(10, MeshAxis::Tensor), 1);
  EXPECT_EQ(m.coordinate(10, MeshAxis::Data), 1);
  EXPECT_EQ(m.coordinate(10, MeshAxis::Pipeline), 1);
  EXPECT_EQ(m.rankAlong(10, MeshAxis::Tensor, 0), 9);
  EXPECT_EQ(m.rankAlong(10, MeshAxis::Tensor, 3), 9); // wraps around
  EXPECT_EQ(m.rankAlong(10, MeshAxis::Tensor, -1), 11);
  EXPECT_EQ(m.rankAlong(10, MeshAxis::Data, 0), 7);
  EXPECT_EQ(m.rankAlong(10, MeshAxis::Pipeline, 0), 4);
  EXPECT_EQ(m.groupSize(MeshAxis::Tensor), 3);
  EXPECT_EQ(meshAxisNamed("pipeline"), MeshAxis::Pipeline);
  EXPECT_STREQ(meshAxisName(MeshAxis::Data), "data");
  EXPECT_THROW(meshAxisNamed("model"), Error);

  Program p;
  EXPECT_EQ(p.mesh().size(), 1);
  p.meta["world_size"] = int64_t(4);
  EXPECT_EQ(p.mesh().data, 4); // a step without axes: data parallel
  p.meta["mesh_data"] = int64_t(1);
  p.meta["mesh_tensor"] = int64_t(2);
  p.meta["mesh_pipeline"] = int64_t(2);
  EXPECT_EQ(p.mesh().pipeline, 2);
  p.meta["mesh_tensor"] = int64_t(3);
  EXPECT_THROW(p.mesh(), Error);
}

// dsc.mesh_data_inner splits the data axis into groups of consecutive data
// ranks: data_inner spans a rank's group, data_outer one rank per group.
TEST(Mesh, DataAxisSplit) {
  const Mesh m{4, 2, 1, 2}; // data 4 (2 groups of 2), tensor 2: 8 ranks
  // Rank 7 = data 3 * 2 + tensor 1: the second of group 1.
  EXPECT_EQ(m.coordinate(7, MeshAxis::DataInner), 1);
  EXPECT_EQ(m.coordinate(7, MeshAxis::DataOuter), 1);
  EXPECT_EQ(m.rankAlong(7, MeshAxis::DataInner, 0), 5);
  EXPECT_EQ(m.rankAlong(7, MeshAxis::DataOuter, 0), 3);
  EXPECT_EQ(m.groupSize(MeshAxis::DataInner), 2);
  EXPECT_EQ(m.groupSize(MeshAxis::DataOuter), 2);
  EXPECT_EQ(meshAxisNamed("data_outer"), MeshAxis::DataOuter);

  Program p;
  p.meta["world_size"] = int64_t(8);
  p.meta["mesh_data"] = int64_t(8);
  p.meta["mesh_data_inner"] = int64_t(4);
  EXPECT_EQ(p.mesh().groupSize(MeshAxis::DataOuter), 2);
  EXPECT_EQ(p.zeroAxis(), MeshAxis::Data);
  p.meta["zero_axis"] = std::string("data_inner");
  EXPECT_EQ(p.zeroAxis(), MeshAxis::DataInner);
  p.meta["mesh_data_inner"] = int64_t(3);
  EXPECT_THROW(p.mesh(), Error);
}

TEST(Backend, AllReduceCopiesWhenNotInPlace) {
  Harness h;
  int a = h.buf({3});
  int b = h.buf({3});
  h.alloc();
  h.set(a, {1, 2, 3});
  h.run(Opcode::AllReduce, {a}, {b}, {{"op", std::string("mean")}, {"axis", std::string("data")}});
  EXPECT_EQ(h.get(b), (std::vector<float>{1, 2, 3}));
  h.run(Opcode::AllReduce, {a}, {a}, {{"op", std::string("sum")}, {"axis", std::string("data")}});
  EXPECT_EQ(h.get(a), (std::vector<float>{1, 2, 3}));
  h.run(Opcode::AllReduce, {a}, {a}, {{"op", std::string("max")}, {"axis", std::string("data")}});
  EXPECT_EQ(h.get(a), (std::vector<float>{1, 2, 3}));
  EXPECT_THROW(h.run(Opcode::AllReduce, {a}, {a}, {{"op", std::string("min")}, {"axis", std::string("data")}}),
               Error);
}

/// Sets environment variables for one test and restores them after.
class ScopedEnv {
public:
  ScopedEnv(std::initializer_list<std::pair<const char *, const char *>> vars) {
    for (auto [name, value] : vars) {
      const char *old = std::getenv(name);
      saved.emplace_back(name, old ? std::optional<std::string>(old)
                                   : std::nullopt);
      value ? setenv(name, value, 1) : unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (auto &[name, value] : saved)
      value ? setenv(name.c_str(), value->c_str(), 1) : unsetenv(name.c_str());
  }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
};

TEST(Communicator, LauncherEnvironment) {
  ScopedEnv clean({{"OMPI_COMM_WORLD_SIZE", nullptr},
                   {"PMI_SIZE", nullptr},
                   {"SLURM_NTASKS", nullptr},
                   {"WORLD_SIZE", nullptr},
                   {"RANK", nullptr},
                   {"MASTER_ADDR", nullptr},
                   {"MASTER_PORT", nullptr},
                   {"LOCAL_RANK", nullptr},
                   {"LOCAL_WORLD_SIZE", nullptr},
                   {"DSC_COMM_TIMEOUT", nullptr}});
  EXPECT_EQ(createCommunicator()->size(), 1);
  {
    ScopedEnv torchrun({{"WORLD_SIZE", "1"}});
    EXPECT_EQ(createCommunicator()->size(), 1);
  }
  {
    // A job of one rank uses none of torchrun's variables, but each one set
    // is checked as in a job of several.
    ScopedEnv all({{"WORLD_SIZE", "1"},
                   {"RANK", "0"},
                   {"LOCAL_RANK", "0"},
                   {"LOCAL_WORLD_SIZE", "1"},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", "29500"},
                   {"DSC_COMM_TIMEOUT", "5"}});
    EXPECT_EQ(createCommunicator()->size(), 1);
    struct Case {
      const char *name, *value, *message;
    };
    const Case cases[] = {
        {"DSC_COMM_TIMEOUT", "nan",
         "DSC_COMM_TIMEOUT='nan' is not an integer in [0, 86400]"},
        {"LOCAL_WORLD_SIZE", "0",
         "LOCAL_WORLD_SIZE='0' is not an integer in [1, 1]"},
        {"LOCAL_RANK", "3", "LOCAL_RANK='3' is not an integer in [0, 0]"},
        {"MASTER_PORT", "abc",
         "MASTER_PORT='abc' is not an integer in [1, 65535]"},
        {"WORLD_SIZE", nullptr, "RANK='0' is set but WORLD_SIZE is missing"}};
    for (const Case &c : cases) {
      ScopedEnv bad({{c.name, c.value}});
      EXPECT_NE(errorOf([] { createCommunicator(); }).find(c.message),
                std::string::npos)
          << c.name;
    }
  }
  {
    // Several ranks without an MPI launcher meet over TCP, torchrun's way:
    // each variable they need is named when missing or malformed
    // (TcpCommunicatorTest.cpp connects such jobs).
    ScopedEnv torchrun({{"WORLD_SIZE", "2"}});
    EXPECT_NE(errorOf([] { createCommunicator(); })
                  .find("so they meet over TCP: set MASTER_ADDR"),
              std::string::npos);
    ScopedEnv half({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
    EXPECT_NE(errorOf([] { createCommunicator(); }).find("set RANK"),
              std::string::npos);
    ScopedEnv rank({{"RANK", "2"}});
    EXPECT_NE(errorOf([] { createCommunicator(); })
                  .find("environment variable RANK='2' is not an integer in "
                        "[0, 1]"),
              std::string::npos);
    ScopedEnv port({{"RANK", "1"}, {"MASTER_PORT", "http"}});
    EXPECT_NE(errorOf([] { createCommunicator(); })
                  .find("environment variable MASTER_PORT='http' is not an "
                        "integer in [1, 65535]"),
              std::string::npos);
  }
  {
    // The rank each launcher announces, for messages before a communicator
    // exists; none in a one-rank job.
    EXPECT_EQ(launchedRank(), -1);
    ScopedEnv torchrun({{"WORLD_SIZE", "2"}, {"RANK", "1"}});
    EXPECT_EQ(launchedRank(), 1);
    ScopedEnv mpirun(
        {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}});
    EXPECT_EQ(launchedRank(), 3);
    ScopedEnv one(
        {{"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}});
    EXPECT_EQ(launchedRank(), -1);
  }
  {
    ScopedEnv bad({{"OMPI_COMM_WORLD_SIZE", "two"}});
    EXPECT_NE(errorOf([] { createCommunicator(); })
                  .find("environment variable OMPI_COMM_WORLD_SIZE='two' is "
                        "not an integer"),
              std::string::npos);
  }
  {
    // An sbatch script (no srun step) is not a launched rank.
    ScopedEnv sbatch({{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", nullptr}});
    EXPECT_EQ(createCommunicator()->size(), 1);
  }
}

// Megatron's model-parallel RNG: dropouts inside tensor-sliced regions draw
// per-rank masks; every other stream (replicated regions, BERT's masking)
// stays what every rank draws.
TEST(Program, TensorParallelStreamsPerRank) {
  Program p;
  p.tensorParallelStreams = {3};
  Instr sliced{Opcode::Dropout, {}, {}, {{"rate", 0.1}, {"stream", int64_t(3)}}};
  Instr replicated{Opcode::Dropout, {}, {}, {{"rate", 0.1}, {"stream", int64_t(4)}}};
  Instr gemm{Opcode::Linear, {}, {}, {{"transpose_w", int64_t(0)}}};
  p.functions["micro_step"].body = {sliced, replicated, gemm};
  p.functions["eval_step"].body = {sliced};
  Program rank0 = p;
  drawTensorParallelStreamsPerRank(rank0, 0);
  EXPECT_EQ(rank0.functions["micro_step"].body[0].getInt("stream"), 3);
  drawTensorParallelStreamsPerRank(p, 2);
  EXPECT_EQ(p.functions["micro_step"].body[0].getInt("stream"),
            3 + 2 * kTensorRankStreamStride);
  EXPECT_EQ(p.functions["eval_step"].body[0].getInt("stream"),
            3 + 2 * kTensorRankStreamStride);
  EXPECT_EQ(p.functions["micro_step"].body[1].getInt("stream"), 4);
  EXPECT_EQ(p.functions["micro_step"].body[2].attrs.count("stream"), 0u);
}

// Expert parallelism: local expert j of group rank g is expert g * El + j;
// its parameter, optimizer state and accumulator take that expert's name,
// other buffers keep theirs.
TEST(Program, ExpertShardsNamedPerRank) {
  EXPECT_EQ(expertIndexOf("model.layers.3.block_sparse_moe.experts.12.w1.weight"),
            12);
  EXPECT_EQ(expertIndexOf("model.layers.3.mlp.weight"), -1);
  EXPECT_EQ(expertIndexOf("num_experts.3.x"), -1); // not a path segment
  EXPECT_EQ(withExpertIndex("exp_avg/l.experts.1.w2.weight", 7),
            "exp_avg/l.experts.7.w2.weight");
  EXPECT_THROW(withExpertIndex("l.w2.weight", 1), Error);
  Program p;
  p.meta["expert_params"] = std::string("l.experts.0.w1.weight,l.experts.1.w1.weight");
  p.meta["experts_per_rank"] = int64_t(2);
  for (const char *name :
       {"l.experts.0.w1.weight", "l.experts.1.w1.weight",
        "exp_avg/l.experts.1.w1.weight", "l.gate.weight"})
    p.buffers.push_back(Buffer{name});
  Program rank0 = p;
  placeExpertShards(rank0, 0);
  EXPECT_EQ(rank0.buffers[1].name, "l.experts.1.w1.weight");
  EXPECT_TRUE(rank0.buffers[1].expertShard);
  placeExpertShards(p, 3);
  EXPECT_EQ(p.buffers[0].name, "l.experts.6.w1.weight");
  EXPECT_EQ(p.buffers[1].name, "l.experts.7.w1.weight");
  EXPECT_EQ(p.buffers[2].name, "exp_avg/l.experts.7.w1.weight");
  EXPECT_TRUE(p.buffers[2].expertShard);
  EXPECT_EQ(p.buffers[3].name, "l.gate.weight");
  EXPECT_FALSE(p.buffers[3].expertShard);
}
