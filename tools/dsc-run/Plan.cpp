//===- Plan.cpp - dsc-run plan: a 3D-parallel job on paper ----------------===//
//
// What is counted, per rank and step (the formulas are in the README):
//  - parameters: the model's own, read off its imported @forward by
//    Hugging Face name. A block's attention and MLP matrices and their
//    column-parallel biases are split over the tensor ranks (Megatron), the
//    word embedding and a separate head by vocabulary rows (padded to a
//    multiple of T); norms, position tables and row-parallel biases are
//    replicated. A tied head is a second copy on the last stage.
//  - model states as dsc keeps them: f32 parameters, f32 gradients, the
//    optimizer's f32 state, each divided over the data ranks by the ZeRO
//    stage (shards of ceil(n / D) elements).
//  - activations: per micro-batch in flight (from the schedule), the
//    per-layer checkpoints when activations are checkpointed, else every
//    layer's activations by Korthikanti et al.'s count (2022), plus one
//    layer's working set and the logits.
//  - communication by the ring algorithms' volume (Communicator traffic):
//    tensor all-reduces (2 per block forward, 2 backward, 2 more when the
//    forward is recomputed; the embedding's and the head's), pipeline sends
//    of activations and gradients, the data-parallel gradient reduction
//    (ZeRO's reduce-scatter and gather), the tied embedding's all-reduce
//    between the first and last stage.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"

#include "dsc/Dialect/CostModel.h"
#include "dsc/Dialect/DscDialect.h"
#include "dsc/Frontend/ModelBuilder.h"
#include "dsc/Program/PipelineSchedule.h"
#include "dsc/Program/Program.h"
#include "dsc/Support/Partition.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>

using namespace dsc;

namespace {

/// The data ranks of one node whose qgZ exchange goes in two hops on
/// nodes of `gpusPerNode` ranks (as dsc-run train decides from the
/// launcher's; hpZ's partitions when set, as -dsc-zero takes them), or 0:
/// one hop (hybrid sharding's shard group is a node).
int64_t qgzNodeRanks(const TrainConfig &train, int64_t gpusPerNode) {
  if (train.zeroShardGroup || !train.zeroQuantizedGradients)
    return 0;
  if (train.zeroHpzGroup) // hpZ's partitions are the nodes
    return train.zeroHpzGroup;
  return train.qgzNodeRanksFor(gpusPerNode);
}

/// `text` padded with spaces to `width` characters.
std::string padded(std::string text, size_t width) {
  if (text.size() < width)
    text.append(width - text.size(), ' ');
  return text;
}


/// One pipeline unit: the embedding, a transformer block, or the head.
struct Unit {
  std::string name;
  double paramsPerRank = 0; ///< elements one tensor rank holds
  /// Of those, the experts' (one expert-parallel rank's share), which ZeRO
  /// leaves whole.
  double expertParamsPerRank = 0;
  double wholeParams = 0;   ///< elements of the unit (tensor ranks together)
  double cost = 0;          ///< forward cost from the compiler's cost model
};

struct ModelUnits {
  std::vector<Unit> units;  ///< embed, block 0 .. L-1, head
  double totalParams = 0;   ///< the model's parameters
  double wordEmbedding = 0; ///< elements of one rank's vocabulary slice
};

bool tensorSliced(const std::string &name) {
  static const std::regex sliced(
      "(c_attn\\.(weight|bias)|attn\\.c_proj\\.weight|c_fc\\.(weight|bias)|"
      "mlp\\.c_proj\\.weight|self\\.(query|key|value)\\.(weight|bias)|"
      "attention\\.output\\.dense\\.weight|intermediate\\.dense\\.(weight|"
      "bias)|layer\\.[0-9]+\\.output\\.dense\\.weight|[qkv]_proj\\.(weight|"
      "bias)|o_proj\\.weight|(gate|up)_proj\\.(weight|bias)|"
      "down_proj\\.weight)$");
  return std::regex_search(name, sliced);
}

/// A mixture-of-experts layer's expert parameter (`.experts.<e>.`).
bool expertParam(const std::string &name) {
  static const std::regex expert("\\.experts\\.[0-9]+\\.");
  return std::regex_search(name, expert);
}

bool vocabSliced(const std::string &name) {
  static const std::regex vocab("(wte\\.weight|embed_tokens\\.weight|"
                                "word_embeddings\\.weight|lm_head\\.weight|"
                                "predictions\\.bias|decoder\\.bias)$");
  return std::regex_search(name, vocab);
}

/// The model's units with their parameters (from the imported @forward's
/// dsc.param names) and forward costs (CostOpInterface, by dsc.layer).
ModelUnits modelUnits(const ModelConfig &model, const TrainConfig &train) {
  mlir::MLIRContext ctx;
  mlir::DialectRegistry registry;
  mlir::dsc::registerCostModel(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadDialect<mlir::dsc::DscDialect, mlir::func::FuncDialect>();
  ImportOptions import;
  import.microBatch = train.microBatch;
  import.seqLen = train.seqLen > 0 ? train.seqLen : model.maxPositions;
  auto module = importModel(ctx, model, import);
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  if (!forward)
    throw dsc::Error("plan: the imported model has no @forward");

  const int64_t L = model.numLayers, T = train.parallel.tensor;
  ModelUnits m;
  m.units.resize(size_t(L + 2));
  m.units[0].name = "embed";
  for (int64_t l = 0; l < L; ++l)
    m.units[size_t(l + 1)].name = std::to_string(l);
  m.units[size_t(L + 1)].name = "head";
  const double V = double(model.vocabSize);
  const double vocabPerRank = std::ceil(V / double(T));
  static const std::regex layerOf("\\.(h|layers|layer)\\.([0-9]+)\\.");
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    auto param =
        forward.getArgAttrOfType<mlir::dsc::ParamAttr>(i, mlir::dsc::kParamAttrName);
    if (!param)
      continue;
    const std::string name = param.getName().str();
    double n = 1;
    for (int64_t d :
         mlir::cast<mlir::RankedTensorType>(forward.getArgument(i).getType())
             .getShape())
      n *= double(d);
    std::smatch match;
    size_t unit;
    if (std::regex_search(name, match, layerOf))
      unit = size_t(std::stoll(match[2].str()) + 1);
    else if (name.find("embed") != std::string::npos ||
             name.find("wte") != std::string::npos ||
             name.find("wpe") != std::string::npos)
      unit = 0;
    else
      unit = size_t(L + 1);
    double perRank = n;
    if (vocabSliced(name))
      perRank = n / V * vocabPerRank;
    else if (tensorSliced(name))
      perRank = n / double(T);
    else if (expertParam(name)) {
      perRank = n / double(train.parallel.expert);
      m.units[unit].expertParamsPerRank += perRank;
    }
    m.units[unit].paramsPerRank += perRank;
    m.units[unit].wholeParams += n;
    m.totalParams += n;
    if (unit == 0 && vocabSliced(name))
      m.wordEmbedding = perRank;
  }
  // Forward costs by layer; ops outside the layers belong to the embedding
  // until the first layer's op, to the head after it.
  bool seenLayer = false;
  forward.walk([&](mlir::Operation *op) {
    const int64_t cost = mlir::dsc::recomputeCost(op);
    if (cost <= 0)
      return;
    size_t unit = seenLayer ? size_t(L + 1) : 0;
    if (auto layer = op->getAttrOfType<mlir::IntegerAttr>(
            mlir::dsc::kLayerAttrName)) {
      seenLayer = true;
      unit = size_t(layer.getInt() + 1);
    }
    m.units[unit].cost += double(cost);
  });
  return m;
}

/// GiB with two decimals, MiB with one below a GiB, bytes below a MiB.
std::string bytesText(double bytes) {
  char text[32];
  if (bytes < double(1 << 20))
    std::snprintf(text, sizeof text, "%.0f B", bytes);
  else if (bytes >= double(1 << 30))
    std::snprintf(text, sizeof text, "%.2f GiB", bytes / double(1 << 30));
  else
    std::snprintf(text, sizeof text, "%.1f MiB", bytes / double(1 << 20));
  return text;
}

std::string count(double n) {
  char text[32];
  if (n >= 1e9)
    std::snprintf(text, sizeof text, "%.2fB", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(text, sizeof text, "%.2fM", n / 1e6);
  else
    std::snprintf(text, sizeof text, "%.0f", n);
  return text;
}

} // namespace

void dsc::printParallelPlan(const ModelConfig &model, const TrainConfig &train,
                            int64_t G, std::ostream &os) {
  const ParallelConfig &par = train.parallel;
  const int64_t W = train.worldSize, T = par.tensor, P = par.pipeline,
                D = train.dataParallel(), v = par.virtualStages,
                m = train.gradAccum;
  if (G < 1)
    throw dsc::Error("plan: --gpus-per-node must be >= 1");
  const rt::Mesh mesh{D, T, P, train.dataInner()};
  // ZeRO's shard group (hybrid sharding: mics_shard_size ranks) and hpZ's
  // secondary partition (0: none).
  const int64_t Z = train.zeroShardGroup ? train.zeroShardGroup : D,
                H = train.zeroHpzGroup;
  const int64_t nodes = (W + G - 1) / G;
  auto nodeOf = [&](int64_t rank) { return rank / G; };
  /// Whether every member of `axis`'s group of `rank` is on its node: a
  /// group's ranks ascend with its coordinate and nodes are runs of ranks,
  /// so its first and last member tell.
  auto insideNode = [&](int64_t rank, rt::MeshAxis axis) {
    return nodeOf(mesh.rankAlong(rank, axis, 0)) ==
           nodeOf(mesh.rankAlong(rank, axis, mesh.groupSize(axis) - 1));
  };

  ModelUnits mu = modelUnits(model, train);
  const size_t L = size_t(model.numLayers);
  // Partition into P * v model chunks; rank s holds chunks s, s + P, ...
  const size_t chunks = size_t(P * v);
  std::vector<double> weights;
  for (const Unit &u : mu.units)
    weights.push_back(par.partition == "uniform"      ? 1.0
                      : par.partition == "parameters" ? u.paramsPerRank
                                                      : u.cost);
  std::vector<size_t> bounds = partitionBalanced(weights, chunks);
  if (bounds.empty())
    throw dsc::Error("plan: cannot cut " + std::to_string(weights.size()) +
                    " units into " + std::to_string(chunks) + " stages");

  // What pipeline rank s holds: its chunks' units, with the last stage's
  // own copy of a tied word embedding.
  struct StageUnits {
    double params = 0, expertParams = 0, layers = 0, sparseLayers = 0;
    bool embed = false, head = false;
    std::string names; ///< "embed-3 8-11": each chunk's first-last unit
  };
  const bool tied = model.tieEmbeddings;
  auto stageUnits = [&](int64_t s) {
    StageUnits st;
    for (int64_t c = 0; c < v; ++c) {
      const size_t chunk = size_t(c * P + s);
      const size_t first = bounds[chunk], last = bounds[chunk + 1] - 1;
      for (size_t u = first; u <= last; ++u) {
        st.params += mu.units[u].paramsPerRank;
        st.expertParams += mu.units[u].expertParamsPerRank;
        st.layers += (u >= 1 && u <= L) ? 1 : 0;
        st.sparseLayers +=
            (u >= 1 && u <= L && model.isMoeLayer(int64_t(u) - 1)) ? 1 : 0;
        st.embed |= u == 0;
        st.head |= u == L + 1;
      }
      st.names += (st.names.empty() ? "" : " ") + mu.units[first].name +
                  (last > first ? "-" + mu.units[last].name : "");
    }
    if (tied && P > 1 && s == P - 1)
      st.params += mu.wordEmbedding;
    return st;
  };

  rt::PipelineShape shape;
  shape.kind = rt::pipelineScheduleNamed(par.schedule);
  shape.stages = P;
  shape.microBatches = m;
  shape.chunks = v;
  // Simulated where that is cheap (it walks every micro-batch of every
  // stage); the closed forms it equals otherwise.
  constexpr double kMaxSimulatedActions = 4e6;
  const bool simulated =
      2.0 * double(P) * double(m) * double(v) <= kMaxSimulatedActions;
  rt::PipelineTimeline timeline, partitioned;
  // The partition's own stage times: each chunk's forward cost by the
  // compiler's cost model, relative to the mean (a backward twice that).
  std::vector<double> chunkCosts(chunks, 0.0);
  double totalCost = 0;
  for (size_t c = 0; c < chunks; ++c) {
    for (size_t u = bounds[c]; u < bounds[c + 1]; ++u)
      chunkCosts[c] += mu.units[u].cost;
    totalCost += chunkCosts[c];
  }
  if (simulated) {
    timeline = rt::simulatePipeline(shape, 1, 2);
    if (totalCost > 0) {
      for (double &c : chunkCosts)
        c *= double(chunks) / totalCost;
      partitioned = rt::simulatePipeline(shape, chunkCosts, 2);
    }
  } else {
    timeline.bubbleFraction = rt::pipelineBubbleFormula(shape);
    for (int64_t s = 0; s < P; ++s)
      timeline.peakInFlight.push_back(rt::pipelinePeakInFlight(shape, s));
  }

  const double B = double(train.microBatch),
               S = double(train.seqLen ? train.seqLen : model.maxPositions),
               h = double(model.hidden), heads = double(model.numHeads);
  const bool half = train.precision.fp16 || train.precision.bf16;
  const double act = half ? 2 : 4; // bytes of an activation element
  // A mixture-of-experts layer runs num_experts_per_tok MLPs per token;
  // with expert parallelism over Ep ranks its rows are the receiving
  // buffer's static bound, Ep * min(K, E / Ep) rows per token, or with
  // token dropping Ep * (E / Ep) * capacity rows per micro-batch if fewer.
  const int64_t Ep = par.expert,
                K = std::max<int64_t>(1, model.expertsPerToken);
  double rowsPerToken = double(K);
  if (Ep > 1) {
    const int64_t El = model.numExperts / Ep;
    rowsPerToken = double(Ep * std::min(K, El));
    const int64_t tokens =
        train.microBatch * (train.seqLen ? train.seqLen : model.maxPositions);
    if (const int64_t capacity =
            train.moeCapacity(tokens, K, model.numExperts))
      rowsPerToken = std::min(rowsPerToken, double(Ep * El * capacity) /
                                                double(tokens));
  }
  // A layer's MLP width per token: a dense layer's intermediate; a sparse
  // one's experts' rows plus its shared expert; averaged over the layers.
  const double denseFfn =
      double(model.intermediate ? model.intermediate : 4 * model.hidden);
  const double sparseLayers = double(model.numMoeLayers());
  const double ffnWidth =
      sparseLayers
          ? (sparseLayers * (double(model.expertIntermediate) * rowsPerToken +
                             double(model.sharedExpertIntermediate)) +
             (double(model.numLayers) - sparseLayers) * denseFfn) /
                double(model.numLayers)
          : denseFfn;
  const bool checkpointed =
      train.remat.perLayer || par.activationCheckpointInterval > 0;
  const int64_t interval =
      par.activationCheckpointInterval > 0 ? par.activationCheckpointInterval
                                           : 1;
  // Korthikanti et al. (2022), one layer, one micro-batch, with tensor
  // slicing, in 16-bit elements: sbh(10 + 24/t) + 5as^2b/t (the last term:
  // scores, softmax and dropout, which dsc's fused attention never stores).
  // The MLP term (ffn = 4h there) scaled to the model's width.
  const double layerActivations =
      act / 2 *
      (S * B * h * (10 + (8 + 16 * ffnWidth / (4 * h)) / double(T)) +
       (train.fusion.attention ? 0 : 5 * heads * S * S * B / double(T)));
  const double checkpoint = act * B * S * h / (par.partitionActivations ? T : 1);
  const double logits = 2 * 4 * B * S * std::ceil(double(model.vocabSize) / T);

  double optimizerBytesPerParam = 8; // Adam/AdamW/LAMB/1-bit Adam: 2 moments
  if (train.optimizer.type == OptimizerType::SGD)
    optimizerBytesPerParam = train.optimizer.momentum > 0 ? 4 : 0;
  // 8-bit Adam: two u8 moments and two f32 scales per 256 elements
  // (tensors under min_8bit_size keep 8 bytes; few parameters).
  if (train.optimizer.type == OptimizerType::Adam8bit ||
      train.optimizer.type == OptimizerType::AdamW8bit)
    optimizerBytesPerParam = 2 + 8.0 / 256;
  // Adafactor: the first moment if any; the factors are rows + columns of
  // each matrix (a fraction of a percent of its elements here).
  if (train.optimizer.type == OptimizerType::Adafactor)
    optimizerBytesPerParam = train.optimizer.firstMoment ? 4 : 0;
  const int zero = int(train.zeroStage);
  auto shardBytes = [&](double elements, double bytesPer, bool sharded) {
    return bytesPer * (sharded ? std::ceil(elements / double(Z)) : elements);
  };

  os << "plan: " << W << " ranks = data " << D << " x pipeline " << P
     << " x tensor " << T << " on " << nodes << " node"
     << (nodes == 1 ? "" : "s") << " of " << G
     << " (ranks count tensor fastest, then data, then pipeline)\n";
  const char *where[] = {"across nodes", "inside a node"};
  os << "  tensor groups " << where[insideNode(0, rt::MeshAxis::Tensor)]
     << ", data groups " << where[insideNode(0, rt::MeshAxis::Data)]
     << ", pipeline stages " << where[insideNode(0, rt::MeshAxis::Pipeline)]
     << "\n";
  if (train.zeroShardGroup || H || Ep > 1)
    os << "  "
       << (Ep > 1 ? "expert-parallel"
           : H    ? "hpZ partition"
                  : "ZeRO shard")
       << " groups of " << mesh.dataInner << " "
       << where[insideNode(0, rt::MeshAxis::DataInner)] << "\n";
  if (G % T != 0 || T > G)
    os << "  warning: tensor groups of " << T << " do not fit nodes of " << G
       << ": their all-reduces cross nodes\n";
  char line[512];
  std::snprintf(line, sizeof line,
                "model: %s, %s parameters, %zu layers; micro-batch %lld x "
                "sequence %lld, %lld micro-batches per step; ZeRO stage %d\n",
                model.typeName.c_str(), count(mu.totalParams).c_str(), L,
                (long long)train.microBatch, (long long)S, (long long)m, zero);
  os << line;
  std::snprintf(line, sizeof line,
                "model states of the whole model: %s (16 bytes per "
                "parameter: f32 weights, gradients and Adam's moments, as "
                "DeepSpeed's 2+2+12 for mixed precision)\n",
                bytesText(16 * mu.totalParams).c_str());
  os << line;

  // ZeRO-Offload: the optimizer state, the fp32 master weights and the
  // host copies of the gradients (4 bytes per parameter each) are this
  // rank's shards in host memory, not on the device (16 bytes per
  // parameter over the data ranks with Adam, DeepSpeed's cpu_mem); "total"
  // is the device's.
  const bool offload = train.offloadOptimizer;
  std::snprintf(line, sizeof line,
                "%-6s %-22s %-15s %-12s %-10s %-10s %-10s %-12s %s\n",
                "stage", ("units (" + par.partition + ")").c_str(), "ranks",
                "params/rank", "weights", "grads", "optimizer",
                "activations",
                offload ? "total      host (offload)" : "total");
  os << line;
  double worstTotal = 0;
  for (int64_t s = 0; s < P; ++s) {
    const StageUnits st = stageUnits(s);
    const double params = st.params, layers = st.layers;
    // ZeRO shards the dense parameters; the experts (split over the
    // expert-parallel ranks already) stay whole.
    const double dense = params - st.expertParams, experts = st.expertParams;
    // With offload_param the shards are the host's master weights; hpZ
    // adds each parameter's secondary shard, all held between the forward
    // and the backward.
    const double weightsBytes =
        (train.offloadParams ? 0 : shardBytes(dense, 4, zero >= 3)) +
        4 * experts + (H ? 4 * std::ceil(params / double(H)) : 0);
    const double gradBytes = shardBytes(dense, 4, zero >= 2) + 4 * experts;
    const double stateBytes =
        shardBytes(dense, optimizerBytesPerParam, zero >= 1) +
        optimizerBytesPerParam * experts;
    const double optBytes = offload ? 0 : stateBytes;
    const double hostBytes =
        offload ? stateBytes + shardBytes(params, 4 + 4, true) : 0;
    const double inFlight = double(timeline.peakInFlight[size_t(s)]) / double(v);
    double actBytes;
    if (checkpointed)
      actBytes = inFlight * std::ceil(layers / double(interval)) * checkpoint +
                 double(std::min<int64_t>(interval, int64_t(layers))) *
                     layerActivations;
    else
      actBytes = inFlight * layers * layerActivations;
    if (s == P - 1)
      actBytes += logits;
    const double total = weightsBytes + gradBytes + optBytes + actBytes;
    worstTotal = std::max(worstTotal, total);
    // The pipeline axis varies slowest: a stage's ranks are contiguous.
    const std::string ranks =
        T * D == 1 ? std::to_string(s)
                   : std::to_string(s * T * D) + "-" +
                         std::to_string((s + 1) * T * D - 1);
    std::snprintf(line, sizeof line,
                  "%-6lld %-22s %-15s %-12s %-10s %-10s %-10s %-12s %s\n",
                  (long long)s, st.names.c_str(), ranks.c_str(),
                  count(params).c_str(), bytesText(weightsBytes).c_str(),
                  bytesText(gradBytes).c_str(), bytesText(optBytes).c_str(),
                  bytesText(actBytes).c_str(),
                  offload ? (padded(bytesText(total), 10) + " " +
                             bytesText(hostBytes))
                                .c_str()
                          : bytesText(total).c_str());
    os << line;
  }
  std::snprintf(line, sizeof line,
                "largest rank: %s (activations: %s per in-flight micro-batch "
                "%s)\n",
                bytesText(worstTotal).c_str(),
                checkpointed ? "checkpoints" : "all layers",
                checkpointed
                    ? ("every " + std::to_string(interval) + " layer" +
                       (interval == 1 ? "" : "s") +
                       (par.partitionActivations ? ", split over the tensor ranks"
                                                 : ""))
                          .c_str()
                    : "(Korthikanti et al.)");
  os << line;

  // Bubble: simulated, and the closed form it must equal.
  const double formula = rt::pipelineBubbleFormula(shape);
  std::snprintf(line, sizeof line,
                "pipeline: %s, %lld stage%s%s, %lld micro-batches: bubble "
                "%.2f%% of the step (%s; (P-1)/(%sm+P-1) = %.2f%%)\n",
                par.schedule.c_str(), (long long)P, P == 1 ? "" : "s",
                v > 1 ? (" x " + std::to_string(v) + " virtual").c_str() : "",
                (long long)m, 100 * timeline.bubbleFraction,
                simulated ? "simulated" : "formula: too long to simulate",
                v > 1 ? "v" : "", 100 * formula);
  os << line;
  if (simulated && totalCost > 0 && P > 1) {
    // Stages are rarely equal: the slowest sets the pace.
    double slowest = 0;
    for (int64_t s = 0; s < P; ++s) {
      double stage = 0;
      for (int64_t c = 0; c < v; ++c)
        stage += chunkCosts[size_t(c * P + s)];
      slowest = std::max(slowest, stage);
    }
    std::snprintf(line, sizeof line,
                  "  with this partition's stage costs (the compiler's cost "
                  "model; slowest stage %.2fx the mean): bubble %.2f%%\n",
                  slowest / double(v), 100 * partitioned.bubbleFraction);
    os << line;
  }
  os << "  peak in-flight micro-batches per stage:";
  for (int64_t s = 0; s < P; ++s) {
    if (P > 8 && s == 4) { // the first and last four of a long pipeline
      os << " ...";
      s = P - 4;
    }
    os << " " << double(timeline.peakInFlight[size_t(s)]) / double(v);
  }
  os << "\n";

  // Communication of the busiest ranks: per stage, the bytes one rank sends
  // per step, by kind and link class.
  os << "communication per rank per step (ring volumes):\n";
  std::snprintf(line, sizeof line, "  %-6s %-28s %16s %16s\n", "stage",
                "kind", "inside a node", "between nodes");
  os << line;
  auto ring = [](double bytes, int64_t g) {
    return g > 1 ? 2 * bytes * double(g - 1) / double(g) : 0.0;
  };
  // Each stage's rows ("kind inside between"); stages whose rows are all
  // equal print once, as a range.
  std::vector<std::vector<std::string>> stageRows(static_cast<size_t>(P));
  for (int64_t s = 0; s < P; ++s) {
    const int64_t rank = mesh.rankAlong(0, rt::MeshAxis::Pipeline, s);
    const StageUnits st = stageUnits(s);
    const double params = st.params, layers = st.layers;
    const bool hasEmbed = st.embed, hasHead = st.head;
    const double hidden = act * B * S * h;
    // Tensor: 2 all-reduces per block forward and backward (2 more when
    // the forward is recomputed), the embedding's output, the head's input
    // gradient, and the vocabulary-parallel loss's [B, S] f32 ones: row
    // maxima, sums and label logits forward, maxima and sums again in the
    // backward (dsc.vocab_cross_entropy_grad recomputes them).
    double tensorBytes =
        double(m) * (layers * (checkpointed ? 6 : 4) * ring(hidden, T) +
                     (hasEmbed ? ring(hidden, T) : 0) +
                     (hasHead ? ring(hidden, T) + 5 * ring(4 * B * S, T) : 0));
    // Pipeline: every chunk boundary sends an activation forward and a
    // gradient backward per micro-batch.
    // Virtual stage vs hands its activations to vs + 1 and its gradients to
    // vs - 1: another rank when P > 1; on one stage its chunks pass them in
    // memory.
    // With the load-balancing loss, a boundary also carries the [2, E] f32
    // router loads of every MoE layer before it, on their way to the head.
    const bool loadsTravel = model.numExperts && model.routerAuxLoss;
    // A boundary travels in f32 whatever the compute format (a stage's
    // inputs and outputs keep the function's f32 types).
    auto boundaryBytes = [&](size_t vs) { // the boundary before vs
      double layersBefore = 0; // sparse layers, whose loads travel
      for (size_t u = 1; u < std::min(bounds[vs], L + 1); ++u)
        layersBefore += model.isMoeLayer(int64_t(u) - 1) ? 1 : 0;
      return 4.0 * B * S * h + (loadsTravel ? layersBefore * 2.0 *
                                                  double(model.numExperts) *
                                                  4.0
                                            : 0.0);
    };
    double pipeBytes = 0;
    for (int64_t c = 0; P > 1 && c < v; ++c) {
      const int64_t vs = c * P + s;
      if (vs < P * v - 1)
        pipeBytes += double(m) * boundaryBytes(size_t(vs + 1));
      if (vs > 0)
        pipeBytes += double(m) * boundaryBytes(size_t(vs));
    }
    // Data: f32 gradients (ZeRO 1-2: reduce-scatter + all-gather, the same
    // volume; stage 2 reduce-scatters each micro-batch; stage 3 also
    // gathers the parameters for each micro-batch's forward and backward,
    // in int8 with qwZ), over ZeRO's shard group; hybrid sharding
    // all-reduces a shard across the groups once per step, and hpZ's
    // backward gathers its f32 secondary shards within their group.
    // The experts' gradients: all-reduced over the D / Ep ranks holding
    // the same experts; ZeRO takes the dense ones.
    const double grads = 4 * (params - st.expertParams);
    const double expertGradBytes =
        Ep > 1 ? ring(4 * st.expertParams, D / Ep) : 0;
    // Expert parallelism: each layer's rows to the other Ep - 1 ranks and
    // back, forward and backward (and the recomputed forward), assuming
    // routing spreads tokens evenly over the experts; what actually
    // travels depends on the routing.
    const double expertRows =
        Ep > 1 ? B * S * double(K) * double(Ep - 1) / double(Ep) : 0;
    const double allToAllBytes =
        double(m) * st.sparseLayers * (checkpointed ? 6 : 4) * expertRows * h *
        act;
    double dataBytes = ring(grads, Z);
    if (zero == 2)
      dataBytes = ring(grads, Z) / 2 * double(m + 1);
    // ZeRO++ qwZ gathers int8 codes and an f32 scale per 256 elements.
    const double gathered =
        train.zeroQuantizedWeights ? (1.0 + 4.0 / 256.0) / 4.0 : 1.0;
    // qgZ's all-to-alls move int4 codes and an f32 scale per 32 elements
    // (the same share of the tensor leaves each rank as in a
    // reduce-scatter); counted for every gradient, though vectors keep
    // their exact reduce-scatter.
    const double scattered =
        train.zeroQuantizedGradients ? (0.5 + 4.0 / 32.0) / 4.0 : 1.0;
    // qgZ over nodes of Ln data ranks: its all-to-alls go within the node
    // and then across the nodes (the partial sums, 1/Ln of the gradient).
    const int64_t Ln = qgzNodeRanks(train, G);
    double qgzInside = 0, qgzBetween = 0;
    if (zero == 3 && Ln > 1) {
      qgzInside = ring(grads, Ln) / 2 * double(m) * scattered;
      qgzBetween = ring(grads / double(Ln), Z / Ln) / 2 * double(m) * scattered;
    }
    if (zero == 3)
      dataBytes = ring(grads, Z) / 2 * (double(Ln > 1 ? 0 : m) * scattered + 1) +
                  ring(grads, Z) / 2 * double(H ? m : 2 * m) * gathered;
    const double hpzBytes = H ? ring(grads, H) / 2 * double(m) : 0;
    const double replicaBytes = ring(grads / double(Z), D / Z);
    const double tiedBytes = tied && P > 1 && (s == 0 || s == P - 1)
                                 ? ring(4 * mu.wordEmbedding, 2)
                                 : 0;
    // Neighbouring stages (with interleaving, the last stage's chunks
    // also send to the first stage's).
    const bool pipeInside =
        v > 1 ? insideNode(rank, rt::MeshAxis::Pipeline)
              : (s == 0 || nodeOf(mesh.rankAlong(rank, rt::MeshAxis::Pipeline,
                                                 s - 1)) == nodeOf(rank)) &&
                    (s == P - 1 ||
                     nodeOf(mesh.rankAlong(rank, rt::MeshAxis::Pipeline,
                                           s + 1)) == nodeOf(rank));
    const bool tiedInside =
        nodeOf(mesh.rankAlong(0, rt::MeshAxis::Pipeline, 0)) ==
        nodeOf(mesh.rankAlong(0, rt::MeshAxis::Pipeline, P - 1));
    struct Row {
      const char *kind;
      double bytes;
      bool inside;
    } rows[] = {
        {"tensor all-reduce", tensorBytes, insideNode(rank, rt::MeshAxis::Tensor)},
        {"pipeline send", pipeBytes, pipeInside},
        {"data-parallel gradients", dataBytes,
         insideNode(rank, train.zeroShardGroup ? rt::MeshAxis::DataInner
                                               : rt::MeshAxis::Data)},
        {"hpZ backward gathers", hpzBytes,
         insideNode(rank, rt::MeshAxis::DataInner)},
        {"qgZ within nodes", qgzInside, true},
        {"qgZ across nodes", qgzBetween, false},
        {"shard groups' all-reduce", replicaBytes,
         insideNode(rank, rt::MeshAxis::DataOuter)},
        {"expert all-to-all (even)", allToAllBytes,
         insideNode(rank, rt::MeshAxis::DataInner)},
        {"expert gradients", expertGradBytes,
         insideNode(rank, rt::MeshAxis::DataOuter)},
        {"tied embedding all-reduce", tiedBytes, tiedInside},
    };
    for (const Row &r : rows) {
      if (r.bytes == 0)
        continue;
      std::snprintf(line, sizeof line, "%-28s %16s %16s\n", r.kind,
                    r.inside ? bytesText(r.bytes).c_str() : "-",
                    r.inside ? "-" : bytesText(r.bytes).c_str());
      stageRows[size_t(s)].push_back(line);
    }
  }
  for (int64_t s = 0; s < P;) {
    int64_t e = s;
    while (e + 1 < P && stageRows[size_t(e + 1)] == stageRows[size_t(s)])
      ++e;
    const std::string stages =
        std::to_string(s) + (e > s ? "-" + std::to_string(e) : "");
    for (const std::string &row : stageRows[size_t(s)]) {
      std::snprintf(line, sizeof line, "  %-6s ", stages.c_str());
      os << line << row;
    }
    s = e + 1;
  }
  std::snprintf(line, sizeof line,
                "rank r: tensor r %% %lld, data (r / %lld) %% %lld, stage r / "
                "%lld, node r / %lld\n",
                (long long)T, (long long)T, (long long)D, (long long)(T * D),
                (long long)G);
  os << line;
}
