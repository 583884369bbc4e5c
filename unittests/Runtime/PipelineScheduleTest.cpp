// Pipeline schedules: each stage's order, the activations it holds at
// most, and the bubble measured by running all stages' orders against
// their dependencies, each against its closed form.
#include "dsc/Program/PipelineSchedule.h"
#include "dsc/Program/Program.h"
#include "dsc/Support/Partition.h"

#include <gtest/gtest.h>

#include <string>

using namespace dsc::rt;

namespace {

/// "F0 F1 B0 ..." (with ".c" for chunks other than 0).
std::string orderText(const PipelineShape &shape, int64_t stage) {
  std::string text;
  for (const PipelineAction &a : pipelineOrder(shape, stage)) {
    text += text.empty() ? "" : " ";
    text += a.kind == PipelineAction::Forward ? "F" : "B";
    text += std::to_string(a.microBatch);
    if (a.chunk)
      text += "." + std::to_string(a.chunk);
  }
  return text;
}

PipelineShape shapeOf(PipelineScheduleKind kind, int64_t P, int64_t m,
                      int64_t v = 1) {
  PipelineShape s;
  s.kind = kind;
  s.stages = P;
  s.microBatches = m;
  s.chunks = v;
  return s;
}

} // namespace

TEST(PipelineSchedule, GPipeRunsAllForwardsFirst) {
  auto s = shapeOf(PipelineScheduleKind::GPipe, 3, 4);
  EXPECT_EQ(orderText(s, 0), "F0 F1 F2 F3 B0 B1 B2 B3");
  EXPECT_EQ(orderText(s, 2), "F0 F1 F2 F3 B0 B1 B2 B3");
}

TEST(PipelineSchedule, OneFOneBWarmsUpThenAlternates) {
  auto s = shapeOf(PipelineScheduleKind::OneFOneB, 4, 6);
  EXPECT_EQ(orderText(s, 0), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(orderText(s, 1), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  EXPECT_EQ(orderText(s, 3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than stages: the warm-up is cut short.
  EXPECT_EQ(orderText(shapeOf(PipelineScheduleKind::OneFOneB, 4, 2), 0),
            "F0 F1 B0 B1");
}

TEST(PipelineSchedule, InterleavedWalksChunksInGroupsOfStages) {
  // Megatron-LM's virtual pipeline, P = 2, v = 2, m = 4: rank 0 holds
  // chunks 0 (virtual stage 0) and 1 (virtual stage 2).
  auto s = shapeOf(PipelineScheduleKind::Interleaved, 2, 4, 2);
  EXPECT_EQ(orderText(s, 0),
            "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
  EXPECT_EQ(orderText(s, 1),
            "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
  // m = P: every forward first, as Megatron does.
  EXPECT_EQ(orderText(shapeOf(PipelineScheduleKind::Interleaved, 2, 2, 2), 1),
            "F0 F1 F0.1 F1.1 B0.1 B1.1 B0 B1");
}

TEST(PipelineSchedule, EveryActionOnce) {
  for (auto kind : {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB,
                    PipelineScheduleKind::Interleaved})
    for (int64_t P : {1, 2, 3, 4})
      for (int64_t m : {1, 2, 4, 8, 12}) {
        const int64_t v = kind == PipelineScheduleKind::Interleaved ? 3 : 1;
        if (kind == PipelineScheduleKind::Interleaved && m % P)
          continue;
        auto s = shapeOf(kind, P, m, v);
        for (int64_t stage = 0; stage < P; ++stage) {
          auto order = pipelineOrder(s, stage);
          ASSERT_EQ(int64_t(order.size()), 2 * m * v);
          for (int64_t mb = 0; mb < m; ++mb)
            for (int64_t c = 0; c < v; ++c)
              for (auto k : {PipelineAction::Forward, PipelineAction::Backward})
                EXPECT_EQ(std::count(order.begin(), order.end(),
                                     PipelineAction{k, mb, c}),
                          1);
        }
      }
}

// The measured bubble equals (P-1)/(m+P-1) for GPipe and 1F1B and
// (P-1)/(v*m+P-1) interleaved, with backward twice the forward; the idle
// time of each stage is (P-1)(f+b) (over v interleaved).
TEST(PipelineSchedule, BubbleMatchesTheFormula) {
  for (int64_t P : {1, 2, 3, 4, 8})
    for (int64_t m : {1, 2, 3, 4, 8, 16}) {
      for (auto kind :
           {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB}) {
        auto t = simulatePipeline(shapeOf(kind, P, m), 1, 2);
        EXPECT_DOUBLE_EQ(t.length, 3.0 * double(m + P - 1))
            << pipelineScheduleName(kind) << " P=" << P << " m=" << m;
        EXPECT_DOUBLE_EQ(t.bubbleFraction, double(P - 1) / double(m + P - 1));
        for (double idle : t.idle)
          EXPECT_DOUBLE_EQ(idle, 3.0 * double(P - 1));
      }
      if (m % P)
        continue;
      for (int64_t v : {2, 3}) {
        auto t = simulatePipeline(
            shapeOf(PipelineScheduleKind::Interleaved, P, m, v), 1, 2);
        EXPECT_NEAR(t.bubbleFraction, double(P - 1) / double(v * m + P - 1),
                    1e-12)
            << "interleaved P=" << P << " m=" << m << " v=" << v;
      }
    }
}

// Activations held at once: m for GPipe, P - s for stage s of 1F1B (the
// reason 1F1B exists), Megatron's warm-up plus one for interleaving.
TEST(PipelineSchedule, PeakInFlightMicroBatches) {
  const int64_t P = 4, m = 8;
  auto gpipe = simulatePipeline(shapeOf(PipelineScheduleKind::GPipe, P, m));
  auto oneF = simulatePipeline(shapeOf(PipelineScheduleKind::OneFOneB, P, m));
  auto inter =
      simulatePipeline(shapeOf(PipelineScheduleKind::Interleaved, P, m, 2));
  for (int64_t s = 0; s < P; ++s) {
    EXPECT_EQ(gpipe.peakInFlight[size_t(s)], m);
    EXPECT_EQ(oneF.peakInFlight[size_t(s)], P - s);
    EXPECT_EQ(inter.peakInFlight[size_t(s)], (P - s - 1) * 2 + P + 1);
  }
}

// The closed forms (used where a shape is too large to simulate) equal the
// simulation wherever it runs.
TEST(PipelineSchedule, FormulasEqualTheSimulation) {
  for (auto kind : {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB,
                    PipelineScheduleKind::Interleaved})
    for (int64_t P : {1, 2, 3, 5})
      for (int64_t m : {1, 2, 5, 10, 15})
        for (int64_t v : {1, 2, 3}) {
          if ((kind == PipelineScheduleKind::Interleaved) != (v > 1) ||
              (v > 1 && m % P))
            continue;
          auto shape = shapeOf(kind, P, m, v);
          auto t = simulatePipeline(shape);
          EXPECT_NEAR(t.bubbleFraction, pipelineBubbleFormula(shape), 1e-12);
          for (int64_t s = 0; s < P; ++s)
            EXPECT_EQ(t.peakInFlight[size_t(s)], pipelinePeakInFlight(shape, s))
                << pipelineScheduleName(kind) << " P=" << P << " m=" << m
                << " v=" << v << " stage " << s;
        }
}

// Unequal stages: the slowest stage sets the pace. 1F1B over two stages
// whose second is twice as slow: the step is the slow stage's work plus the
// fast stage's share of the fill and drain, (m + 1) * 3 * 2 - 3 time units
// for m micro-batches (forward 1 and 2, backward twice that).
TEST(PipelineSchedule, UnequalStagesBoundTheStep) {
  const int64_t m = 4;
  auto t = simulatePipeline(shapeOf(PipelineScheduleKind::OneFOneB, 2, m),
                            std::vector<double>{1, 2});
  EXPECT_DOUBLE_EQ(t.length, 3.0 + double(m) * 6.0);
  EXPECT_DOUBLE_EQ(t.idle[1], 3.0);                  // waits for the first F
  EXPECT_DOUBLE_EQ(t.idle[0], t.length - double(m) * 3.0);
  EXPECT_GT(t.bubbleFraction,
            pipelineBubbleFormula(shapeOf(PipelineScheduleKind::OneFOneB, 2, m)));
  EXPECT_THROW(simulatePipeline(shapeOf(PipelineScheduleKind::OneFOneB, 2, m),
                                std::vector<double>{1}),
               Error);
}

TEST(PipelineSchedule, BadShapesAreNamed) {
  auto message = [](const PipelineShape &s) {
    try {
      pipelineOrder(s, 0);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(shapeOf(PipelineScheduleKind::Interleaved, 4, 6, 2)),
            "pipeline: the interleaved schedule needs the micro-batches (6) "
            "to be a multiple of the stages (4)");
  EXPECT_EQ(message(shapeOf(PipelineScheduleKind::OneFOneB, 4, 6, 2)),
            "pipeline: the 1f1b schedule runs one model chunk per stage, not "
            "2 (use the interleaved schedule)");
  EXPECT_EQ(message(shapeOf(PipelineScheduleKind::GPipe, 0, 6)),
            "pipeline: stages, micro-batches and chunks must be >= 1");
  EXPECT_THROW(pipelineScheduleNamed("zero-bubble"), Error);
  EXPECT_EQ(pipelineScheduleNamed("1f1b"), PipelineScheduleKind::OneFOneB);
}

// The stages' cut (-dsc-pipeline-stage, `dsc-run plan`): contiguous,
// non-empty runs whose heaviest is as light as possible.
TEST(PipelineSchedule, PartitionBalancesContiguousRuns) {
  using dsc::partitionBalanced;
  EXPECT_EQ(partitionBalanced({1, 1, 1, 1}, 2),
            (std::vector<size_t>{0, 2, 4}));
  // An embedding heavier than a layer stands alone.
  EXPECT_EQ(partitionBalanced({352, 80, 112, 16}, 2),
            (std::vector<size_t>{0, 1, 4}));
  // A light head joins the last layer; each stage gets at least one unit.
  EXPECT_EQ(partitionBalanced({1, 5, 5, 5, 1}, 3),
            (std::vector<size_t>{0, 2, 3, 5}));
  EXPECT_EQ(partitionBalanced({0, 0, 0}, 3),
            (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_TRUE(partitionBalanced({1, 1}, 3).empty());
}
