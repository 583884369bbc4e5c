//===- Remat.cpp - Recompute vs store for saved activations ---------------===//
//
// -dsc-remat decides, for every forward op whose results the backward reads
// (a "saved activation"), whether the result stays alive from the forward to
// the backward or is recomputed in the backward. A recomputed value is
// cloned (with the chain of forward ops it needs whose results are not
// saved anyway) right before the first gradient op that reads it, and every
// gradient op reads the clone, so the forward value dies after its last
// forward use. The clones carry `dsc.grad` (they run in the backward, so the
// memory report does not count their results as saved) and `dsc.remat`.
//
// Recomputing is exact: every op is a pure function of its operands, and
// dropout regenerates its mask from (seed, step, stream, element), so a clone
// yields bitwise the value the forward produced.
//
// Policies (see Passes.td for the user-facing description):
//   none       nothing is recomputed;
//   deepspeed  cheap ops, plus DeepSpeed's gelu_checkpoint /
//              attn_dropout_checkpoint / per-layer activation checkpointing;
//   budget     cheap ops, plus the cheapest set of recomputations that brings
//              the planned peak under the budget (RematSolver.cpp's knapsack,
//              corrected against the real memory planner).
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/LowerToProgram.h"
#include "dsc/Program/MemoryPlan.h"
#include "dsc/Dialect/CostModel.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/RematSolver.h"

#include "mlir/IR/IRMapping.h"

#include <functional>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCREMAT
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;
// Runtime-side names (namespace ::dsc) come in here, once.
namespace rt = ::dsc::rt;
namespace remat = ::dsc::remat;
using ::dsc::lowerToProgram;
using ::dsc::MemoryPlan;
using ::dsc::planMemory;

namespace {

constexpr llvm::StringLiteral kRematAttrName = "dsc.remat";
/// On an exposure (see exposeFusedResults): which results of the fused op
/// defining its first operand its results stand for.
constexpr llvm::StringLiteral kExposesAttrName = "dsc.remat.exposes";
constexpr llvm::StringLiteral kRecomputeFlopsAttrName =
    "dsc.remat.recompute_flops";

int64_t bytesOf(Value v) {
  auto t = dyn_cast<ShapedType>(v.getType());
  if (!t || !t.hasStaticShape())
    return 0;
  return t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
}

/// One forward op with saved results: the unit of decision (a multi-result
/// op such as dsc.bias_split_heads is recomputed as a whole).
struct Candidate {
  Operation *op;
  int64_t bytes = 0;      ///< its results that the backward reads
  int64_t cost = 0;       ///< op + the unsaved forward chain it needs
  bool cheap = false;     ///< op and chain are all cheap to recompute
  bool boundary = false;  ///< read by a forward op outside its layer group
};

/// The forward/backward split of one function and its candidates, in block
/// order (so two analyses of clones of one function number them alike).
/// Layers count in groups of `layerInterval` consecutive ones (DeepSpeed's
/// activation_checkpoint_interval): a value crosses a boundary when a
/// forward op of another group reads it.
struct Analysis {
  int64_t layerInterval = 1;
  DenseSet<Operation *> backward;
  DenseSet<Value> saved;
  SmallVector<Value> checkpoints;
  SmallVector<Candidate> candidates;

  bool analyze(func::FuncOp fn) {
    Block &body = fn.getBody().front();
    for (Operation &op : body.without_terminator()) {
      bool bwd = op.hasAttr(kGradAttrName);
      for (Value v : op.getOperands())
        if (Operation *def = v.getDefiningOp())
          bwd |= backward.contains(def);
      if (bwd)
        backward.insert(&op);
    }
    Operation *ret = body.getTerminator();
    for (Operation &op : body.without_terminator()) {
      if (backward.contains(&op))
        continue;
      Candidate c{&op};
      bool returned = false;
      std::optional<int64_t> layer;
      if (auto l = op.getAttrOfType<IntegerAttr>(kLayerAttrName))
        layer = l.getInt() / layerInterval;
      for (Value r : op.getResults()) {
        bool readBack = false, crosses = false;
        for (Operation *user : r.getUsers()) {
          if (user == ret)
            returned = true;
          else if (backward.contains(user))
            readBack = true;
          else if (auto l = user->getAttrOfType<IntegerAttr>(kLayerAttrName);
                   !layer || !l || l.getInt() / layerInterval != *layer)
            crosses = true;
        }
        c.boundary |= crosses;
        if (readBack) {
          saved.insert(r);
          c.bytes += bytesOf(r);
        } else if (crosses) {
          // A value crossing a layer boundary that the backward does not
          // read (the residual stream once -dsc-invertible has run) is a
          // checkpoint: recompute chains stop there instead of re-running
          // every earlier layer.
          checkpoints.push_back(r);
        }
      }
      if (c.bytes > 0 && !returned)
        candidates.push_back(c);
    }
    saved.insert(checkpoints.begin(), checkpoints.end());
    // Price each candidate with the chain of unsaved forward values it needs.
    SmallVector<Candidate> priced;
    for (Candidate c : candidates) {
      DenseSet<Operation *> chain;
      bool ok = true, cheap = true;
      std::function<void(Operation *)> visit = [&](Operation *op) {
        if (!ok || !chain.insert(op).second)
          return;
        auto cost = dyn_cast<CostOpInterface>(op);
        if (!cost) {
          ok = false;
          return;
        }
        c.cost += recomputeCost(op);
        cheap &= cost.isCheapToRecompute();
        for (Value v : op->getOperands())
          if (Operation *def = v.getDefiningOp())
            if (!saved.contains(v))
              visit(def);
      };
      visit(c.op);
      if (!ok)
        continue;
      c.cheap = cheap;
      priced.push_back(c);
    }
    candidates = std::move(priced);
    return true;
  }
};

/// Clones the recomputed ops before their first backward reader and
/// redirects the backward readers. Returns the FLOPs of the clones.
int64_t applyRemat(func::FuncOp fn, const Analysis &a,
                   const DenseSet<Operation *> &recompute) {
  Block &body = fn.getBody().front();
  SmallVector<Operation *> readers;
  for (Operation &op : body.without_terminator())
    if (a.backward.contains(&op))
      readers.push_back(&op);
  // A recomputed chain reads an exposed result of a fused op that is not
  // recomputed itself through its exposure, so that it recomputes from the
  // fused op's sibling result (see exposeFusedResults) instead of keeping
  // the forward value alive.
  DenseMap<Value, Value> exposed;
  for (Operation &op : body.without_terminator())
    if (auto results = op.getAttrOfType<DenseI64ArrayAttr>(kExposesAttrName))
      for (auto [i, r] : llvm::enumerate(results.asArrayRef()))
        exposed[op.getOperand(0).getDefiningOp()->getResult(r)] =
            op.getResult(i);
  DenseMap<Value, Value> clones;
  int64_t flops = 0;
  MLIRContext *ctx = fn.getContext();
  std::function<Value(Value, Operation *)> materialize =
      [&](Value v, Operation *before) -> Value {
    if (Value e = exposed.lookup(v); e && !recompute.contains(v.getDefiningOp()))
      v = e;
    if (Value c = clones.lookup(v))
      return c;
    Operation *def = v.getDefiningOp();
    if (!def || a.backward.contains(def) ||
        (a.saved.contains(v) && !recompute.contains(def)))
      return v;
    IRMapping map;
    for (Value operand : def->getOperands())
      map.map(operand, materialize(operand, before));
    OpBuilder b(before);
    Operation *clone = b.clone(*def, map);
    clone->setAttr(kGradAttrName, UnitAttr::get(ctx));
    clone->setAttr(kRematAttrName, UnitAttr::get(ctx));
    if (auto cost = dyn_cast<CostOpInterface>(def))
      flops += cost.getFlops();
    for (auto [orig, copy] : llvm::zip(def->getResults(), clone->getResults()))
      clones[orig] = copy;
    return clones.lookup(v);
  };
  for (Operation *op : readers)
    for (OpOperand &use : op->getOpOperands())
      if (Operation *def = use.get().getDefiningOp())
        if (recompute.contains(def))
          use.set(materialize(use.get(), op));
  fn->setAttr(kRecomputeFlopsAttrName,
              IntegerAttr::get(IntegerType::get(ctx, 64), flops));
  return flops;
}

struct RematPass : mlir::dsc::impl::DscRematBase<RematPass> {
  using DscRematBase::DscRematBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    DscRematBase::getDependentDialects(registry);
    registerCostModel(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (policy == RematPolicy::Budget && budgetBytes <= 0) {
      module.emitError("dsc-remat: policy=budget needs budget-bytes > 0, got ")
          << budgetBytes.getValue();
      return signalPassFailure();
    }
    if (layerInterval < 1 || (layerInterval > 1 && !perLayer)) {
      module.emitError("dsc-remat: layer-interval must be 1, or more with "
                       "per-layer, got ")
          << int64_t(layerInterval);
      return signalPassFailure();
    }
    if (policy != RematPolicy::DeepSpeed && (gelu || attnDropout || perLayer)) {
      module.emitError("dsc-remat: gelu, attn-dropout and per-layer belong to "
                       "policy=deepspeed, got policy=")
          << stringifyRematPolicy(policy);
      return signalPassFailure();
    }
    auto fn = module.lookupSymbol<func::FuncOp>(function);
    if (!fn || fn.isExternal() || !fn.getBody().hasOneBlock()) {
      module.emitError("dsc-remat: no single-block function @")
          << function.getValue() << " to rematerialise";
      return signalPassFailure();
    }
    if (policy == RematPolicy::None)
      return;
    exposeFusedResults(fn);

    Analysis a;
    a.layerInterval = layerInterval;
    a.analyze(fn);
    DenseSet<Operation *> chosen;
    for (const Candidate &c : a.candidates)
      if (selectedByFlags(c))
        chosen.insert(c.op);
    if (policy == RematPolicy::Budget && failed(solveBudget(module, a, chosen)))
      return signalPassFailure();
    applyRemat(fn, a, chosen);
    foldExposures(fn);
  }

  /// A fused op recomputes as a whole, which is coarse: recomputing the
  /// normalised output of dsc.bias_dropout_add_layer_norm or
  /// dsc.add_rms_norm would re-run the residual sum (and its dropout) as
  /// well, and the dropped probabilities of dsc.softmax_dropout would re-run
  /// the softmax. Such a result that the backward reads gets an "exposure":
  /// a plain op deriving it from a sibling result (layer_norm or rms_norm of
  /// the sum; dropout of the probabilities), whose result the backward
  /// reads instead. The exposure is an ordinary candidate of its own;
  /// foldExposures() undoes every exposure that ends up not recomputed, so
  /// the stored graph is the fused one.
  static void exposeFusedResults(func::FuncOp fn) {
    auto readBack = [](Value v) {
      return llvm::any_of(v.getUsers(), [](Operation *user) {
        return user->hasAttr(kGradAttrName);
      });
    };
    auto expose = [](Operation *fused, Operation *exposure,
                     ArrayRef<unsigned> results) {
      exposure->setAttr(kExposesAttrName,
                        DenseI64ArrayAttr::get(
                            fused->getContext(),
                            SmallVector<int64_t>(results.begin(),
                                                 results.end())));
      // The exposure belongs to the layer that reads the result forward;
      // none when that is outside the layers (ln_f's output feeds the LM
      // head): per-layer checkpointing would otherwise recompute the last
      // layer for it at the very start of the backward, while the logits'
      // gradient is still alive.
      Attribute layer;
      for (Operation *user : fused->getResult(results[0]).getUsers())
        if (!user->hasAttr(kGradAttrName))
          if (Attribute l = user->getAttr(kLayerAttrName))
            layer = l;
      if (layer)
        exposure->setAttr(kLayerAttrName, layer);
      for (auto [i, r] : llvm::enumerate(results))
        fused->getResult(r).replaceUsesWithIf(
            exposure->getResult(i), [](OpOperand &use) {
              return use.getOwner()->hasAttr(kGradAttrName);
            });
    };
    SmallVector<Operation *> fusedOps;
    fn.walk([&](Operation *op) {
      if (!op->hasAttr(kGradAttrName) &&
          isa<SoftmaxDropoutOp, BiasDropoutAddLayerNormOp, AddRmsNormOp>(op))
        fusedOps.push_back(op);
    });
    for (Operation *op : fusedOps) {
      OpBuilder b(op->getContext());
      b.setInsertionPointAfter(op);
      if (auto sd = dyn_cast<SoftmaxDropoutOp>(op)) {
        if (!readBack(sd.getResult()))
          continue;
        auto again = b.create<DropoutOp>(sd.getLoc(), sd.getType(0),
                                         sd.getProbs(), sd.getRateAttr(),
                                         sd.getStreamAttr());
        expose(sd, again, {0});
        continue;
      }
      if (auto rms = dyn_cast<AddRmsNormOp>(op)) {
        if (!readBack(rms.getResult()))
          continue;
        if (readBack(rms.getRstd())) { // -dsc-invertible's backward
          auto again = b.create<InvertibleRmsNormOp>(
              rms.getLoc(), rms.getResult().getType(), rms.getRstd().getType(),
              rms.getSum(), rms.getWeight(), rms.getEpsilonAttr());
          expose(rms, again, {1, 2});
        } else {
          auto again = b.create<RmsNormOp>(rms.getLoc(),
                                           rms.getResult().getType(),
                                           rms.getSum(), rms.getWeight(),
                                           rms.getEpsilonAttr());
          expose(rms, again, {1});
        }
        continue;
      }
      auto ln = cast<BiasDropoutAddLayerNormOp>(op);
      if (!readBack(ln.getResult()))
        continue;
      if (readBack(ln.getRstd())) { // -dsc-invertible's backward reads both
        auto again = b.create<InvertibleLayerNormOp>(
            ln.getLoc(), ln.getResult().getType(), ln.getRstd().getType(),
            ln.getSum(), ln.getGamma(), ln.getBeta(), ln.getEpsilonAttr());
        expose(ln, again, {1, 2});
      } else {
        auto again = b.create<LayerNormOp>(
            ln.getLoc(), ln.getResult().getType(), ln.getSum(),
            ln.getGamma(), ln.getBeta(), ln.getEpsilonAttr());
        expose(ln, again, {1});
      }
    }
  }

  /// Removes the exposures: a recomputed one has only its backward clone
  /// left as a reader and is dead; the others hand their readers back to
  /// the fused op's results (bitwise the same values).
  static void foldExposures(func::FuncOp fn) {
    SmallVector<Operation *> exposures;
    fn.walk([&](Operation *op) {
      if (op->hasAttr(kExposesAttrName) && !op->hasAttr(kGradAttrName))
        exposures.push_back(op);
    });
    for (Operation *op : exposures) {
      Operation *fused = op->getOperand(0).getDefiningOp();
      auto results = op->getAttrOfType<DenseI64ArrayAttr>(kExposesAttrName);
      for (auto [i, r] : llvm::enumerate(results.asArrayRef()))
        op->getResult(i).replaceAllUsesWith(fused->getResult(r));
      op->erase();
    }
    fn.walk([](Operation *op) { op->removeAttr(kExposesAttrName); });
  }

  bool selectedByFlags(const Candidate &c) const {
    if (recomputeCheap && c.cheap)
      return true;
    if (gelu && isa<GeluOp, BiasGeluOp>(c.op))
      return true;
    // DeepSpeed's attn_dropout_checkpoint: any dropping op that reads the
    // attention probabilities (a softmax result).
    if (attnDropout && isa<StochasticOpInterface>(c.op) &&
        c.op->getNumOperands() > 0)
      if (Operation *in = c.op->getOperand(0).getDefiningOp();
          in && isa<SoftmaxOp, SoftmaxDropoutOp>(in))
        return true;
    return perLayer && c.op->hasAttr(kLayerAttrName) && !c.boundary;
  }

  /// Planned peak of the module with `recompute` (indices into the
  /// candidates) applied to a copy of it, or failure.
  FailureOr<int64_t> measure(ModuleOp module, ArrayRef<bool> recompute) {
    OwningOpRef<ModuleOp> copy = module.clone();
    auto fn = copy->lookupSymbol<func::FuncOp>(function);
    Analysis a;
    a.layerInterval = layerInterval;
    a.analyze(fn);
    DenseSet<Operation *> set;
    for (auto [c, r] : llvm::zip(a.candidates, recompute))
      if (r)
        set.insert(c.op);
    applyRemat(fn, a, set);
    foldExposures(fn);
    FailureOr<rt::Program> program = lowerToProgram(*copy);
    if (failed(program)) {
      module.emitError("dsc-remat: policy=budget measures the peak of the "
                       "lowered step, and this module does not lower");
      return failure();
    }
    MemoryPlan plan;
    std::string error;
    if (!planMemory(*program, plan, error)) {
      module.emitError("dsc-remat: ") << error;
      return failure();
    }
    return plan.arenaBytes;
  }

  /// Adds to `chosen` the cheapest recomputations under which the planned
  /// peak is <= budgetBytes, in three steps:
  ///  1. knapsack: model peak(R) = P0 - sum_{i in R} bytes_i, where P0 is
  ///     the measured peak with only `chosen` recomputed; the knapsack is
  ///     exact for that model, and the measured peak of its choice corrects
  ///     the capacity until the real plan meets the budget;
  ///  2. per-layer seed: per-layer checkpointing's set (every in-layer,
  ///     non-boundary candidate), which the additive model cannot find when
  ///     the peak is set by one layer's recomputation at a time;
  ///  3. local search from the cheaper feasible one: store each recomputed
  ///     candidate back, most expensive first, wherever the measured peak
  ///     stays within the budget.
  /// The result is never costlier than any feasible seed, and no single
  /// recomputed candidate can be stored without exceeding the budget.
  LogicalResult solveBudget(ModuleOp module, const Analysis &a,
                            DenseSet<Operation *> &chosen) {
    const int64_t budget = budgetBytes;
    SmallVector<bool> base;
    std::vector<remat::Item> items;
    SmallVector<size_t> itemOf;
    int64_t sumBytes = 0;
    for (auto [i, c] : llvm::enumerate(a.candidates)) {
      base.push_back(chosen.contains(c.op));
      if (!base.back()) {
        items.push_back({c.bytes, c.cost});
        itemOf.push_back(i);
        sumBytes += c.bytes;
      }
    }
    auto costOf = [&](ArrayRef<bool> set) {
      int64_t cost = 0;
      for (auto [c, r] : llvm::zip(a.candidates, set))
        if (r)
          cost += c.cost;
      return cost;
    };
    FailureOr<int64_t> p0 = measure(module, base);
    if (failed(p0))
      return failure();
    int64_t capacity = budget - (*p0 - sumBytes);
    SmallVector<bool> best = base;
    int64_t peak = *p0, lowest = *p0;
    for (int iter = 0; iter < 16 && peak > budget; ++iter) {
      remat::Choice choice =
          remat::chooseRecompute(items, capacity);
      SmallVector<bool> trial = base;
      for (auto [k, r] : llvm::enumerate(choice.recompute))
        trial[itemOf[k]] = r;
      FailureOr<int64_t> p = measure(module, trial);
      if (failed(p))
        return failure();
      best = trial;
      peak = *p;
      lowest = std::min(lowest, peak);
      if (!choice.feasible)
        break;
      capacity -= std::max<int64_t>(peak - budget, 1);
    }

    SmallVector<bool> perLayer = base;
    for (auto [i, c] : llvm::enumerate(a.candidates))
      perLayer[i] = perLayer[i] ||
                    (c.op->hasAttr(kLayerAttrName) && !c.boundary);
    FailureOr<int64_t> layerPeak = measure(module, perLayer);
    if (failed(layerPeak))
      return failure();
    lowest = std::min(lowest, *layerPeak);
    if (*layerPeak <= budget &&
        (peak > budget || costOf(perLayer) < costOf(best))) {
      best = perLayer;
      peak = *layerPeak;
    }
    if (peak > budget) {
      module.emitError("dsc-remat: the memory budget of ")
          << budget << " bytes cannot be met: the lowest planned peak "
          << "found is " << lowest << " bytes (knapsack and per-layer "
          << "checkpointing; recomputing everything re-runs the whole "
          << "forward at once and saves nothing)";
      return failure();
    }

    SmallVector<size_t> order;
    for (auto [i, r] : llvm::enumerate(best))
      if (r && !base[i])
        order.push_back(i);
    llvm::stable_sort(order, [&](size_t x, size_t y) {
      return a.candidates[x].cost > a.candidates[y].cost;
    });
    for (size_t i : order) {
      best[i] = false;
      FailureOr<int64_t> p = measure(module, best);
      if (failed(p))
        return failure();
      if (*p > budget)
        best[i] = true;
    }
    for (auto [c, r] : llvm::zip(a.candidates, best))
      if (r)
        chosen.insert(c.op);
    return success();
  }
};

} // namespace
