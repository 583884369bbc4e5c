//===- Lora.cpp - Low-rank adapters on a frozen forward graph -------------===//
//
// PEFT's get_peft_model(model, LoraConfig(...)) as a rewrite of @forward:
// the targeted linear layers get y + scale * B(A(dropout(x))), the new A and
// B are the only trainable parameters (with biases, as `bias` says) and
// every other parameter is marked dsc.frozen, so -dsc-autodiff builds no
// gradient for it and -dsc-build-train-step no optimizer state. Names follow
// PEFT (`<module>.lora_A.weight`), so adapters save and load in its format.
//
//===----------------------------------------------------------------------===//

#include "dsc/Support/NameRegex.h"
#include "dsc/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCLORA
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;
using ::dsc::NameRegex;
using ::dsc::RegexError;

namespace {

constexpr llvm::StringLiteral kAllLinear = "all-linear";

/// A linear layer to adapt: its op and the module its weight belongs to.
/// How -dsc-tensor-parallel left a target's weight.
enum class Slicing { Whole, Columns, Rows };

struct Target {
  mutable LinearOp linear; // op handles are not const-callable
  std::string module; ///< "model.layers.0.self_attn.q_proj"
  /// Columns: the layer computes this rank's output features (lora_B is
  /// sliced with it); Rows: its input features, the output summed by the
  /// tp_reduce after it (lora_A is sliced with it).
  Slicing slicing = Slicing::Whole;
  TensorSliceAttr slice; ///< the weight's, unless Whole
};

struct LoraPass : mlir::dsc::impl::DscLoraBase<LoraPass> {
  using DscLoraBase::DscLoraBase;

  void runOnOperation() override;

private:
  LogicalResult checkOptions(ModuleOp module);
  /// Whether the module named `module` is one `target-modules` or
  /// `target-regex` selects; records which entries matched.
  bool selects(StringRef module, bool isHead);
  void adapt(const Target &t, Value a, Value b, int64_t stream);
  /// Tensor slicing ran first: which targets are sliced and how, and the
  /// adapters' own slices; fails on a layer it cannot adapt.
  LogicalResult planSlicing(ModuleOp module, MutableArrayRef<Target> targets);
  /// The slices of the adapters (-dsc-tensor-parallel's dictionary gains
  /// them) and the streams of dropouts on sliced inputs.
  SmallVector<NamedAttribute> adapterSlices;
  SmallVector<int64_t> perRankStreams;
  void recordSettings(ModuleOp module, bool fanInFanOut);

  std::vector<bool> entryMatched;
  std::optional<NameRegex> regex; ///< target-regex, compiled
};

/// The parameter name of a @forward argument, or "" if it is none.
StringRef paramName(func::FuncOp fn, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &fn.getBody().front())
    return "";
  auto attr = fn.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                             kParamAttrName);
  return attr ? attr.getName() : "";
}

} // namespace

LogicalResult LoraPass::checkOptions(ModuleOp module) {
  if (rank < 1)
    return module.emitError("dsc-lora: rank (r) must be >= 1, got ")
           << int64_t(rank);
  if (!std::isfinite(double(alpha)) || !(double(alpha) > 0))
    return module.emitError("dsc-lora: alpha (lora_alpha) must be a finite "
                            "number > 0");
  if (!(double(dropout) >= 0 && double(dropout) < 1))
    return module.emitError("dsc-lora: dropout (lora_dropout) must be in "
                            "[0, 1)");
  if (bias != "none" && bias != "all" && bias != "lora_only")
    return module.emitError("dsc-lora: bias must be none, all or lora_only, "
                            "got '")
           << bias << "'";
  if (targetModules.empty() == targetRegex.empty())
    return module.emitError("dsc-lora: give target-modules or target-regex "
                            "(exactly one)");
  if (!targetRegex.empty()) {
    try {
      regex.emplace(targetRegex);
    } catch (const RegexError &e) {
      // The pattern is the user's and may be huge: quote its start only.
      StringRef shown(targetRegex);
      return module.emitError("dsc-lora: target-regex '")
             << (shown.size() > 60 ? shown.take_front(60).str() + "..."
                                   : shown.str())
             << "' is not a regular expression dsc supports: " << e.what();
    }
  }
  return success();
}

bool LoraPass::selects(StringRef module, bool isHead) {
  if (!targetRegex.empty())
    return regex->fullMatch(module);
  bool any = false;
  for (auto [i, entry] : llvm::enumerate(targetModules)) {
    // PEFT: "all-linear" is every linear layer but the output head.
    bool match = entry == kAllLinear
                     ? !isHead
                     : module == entry || module.ends_with("." + entry);
    if (match)
      entryMatched[i] = true;
    any |= match;
  }
  return any;
}

LogicalResult LoraPass::planSlicing(ModuleOp module,
                                    MutableArrayRef<Target> targets) {
  MLIRContext *ctx = &getContext();
  for (Target &t : targets) {
    t.slice = tensorSliceOf(module, t.module + ".weight");
    if (!t.slice)
      continue;
    // Conv1D weights are [in, out], nn.Linear's [out, in].
    const int64_t outDim = t.linear.getTransposeW() ? 0 : 1;
    t.slicing = t.slice.getDim() == outDim ? Slicing::Columns : Slicing::Rows;
    Value out = t.linear.getResult();
    if (t.slicing == Slicing::Rows &&
        !(out.hasOneUse() && isa<TpReduceOp>(*out.user_begin())))
      return t.linear.emitError("dsc-lora: the row-parallel layer '")
             << t.module << "' does not feed a dsc.tp_reduce";
    // lora_B [out, r] is sliced as the output features are, lora_A [r, in]
    // as the input features are.
    const bool columns = t.slicing == Slicing::Columns;
    adapterSlices.push_back(NamedAttribute(
        StringAttr::get(ctx, t.module + (columns ? ".lora_B.weight"
                                                 : ".lora_A.weight")),
        TensorSliceAttr::get(ctx, columns ? 0 : 1, t.slice.getGroups(),
                             t.slice.getSize())));
  }
  return success();
}

void LoraPass::adapt(const Target &t, Value a, Value b, int64_t stream) {
  LinearOp base = t.linear;
  OpBuilder builder(base->getContext());
  // A row-parallel layer's output is this rank's partial sum: the adapter
  // is added to the summed output, its own partial product summed too.
  Operation *output = t.slicing == Slicing::Rows
                          ? *base.getResult().user_begin()
                          : base.getOperation();
  builder.setInsertionPointAfter(output);
  Location loc = base.getLoc();
  auto outType = cast<RankedTensorType>(output->getResult(0).getType());
  auto inType = cast<RankedTensorType>(base.getType());
  SmallVector<int64_t> hiddenShape(inType.getShape());
  hiddenShape.back() = rank;
  auto hiddenType = inType.clone(hiddenShape);
  auto tensorAxis = MeshAxisAttr::get(builder.getContext(), MeshAxis::tensor);
  SmallVector<Operation *> built;
  Value x = base.getInput();
  // A column-parallel layer reads its input through the region's tp_copy,
  // whose backward sums the ranks' partial input gradients; the adapter's
  // gradient is whole on every rank (its tp_copy is on the hidden value),
  // so it reads the input before that copy.
  if (auto copy = x.getDefiningOp<TpCopyOp>();
      copy && t.slicing == Slicing::Columns)
    x = copy.getInput();
  if (double(dropout) > 0) {
    x = builder.create<DropoutOp>(loc, x.getType(), x,
                                  builder.getF64FloatAttr(dropout),
                                  builder.getI64IntegerAttr(stream));
    built.push_back(x.getDefiningOp());
    if (t.slicing == Slicing::Rows) // on this rank's input features
      perRankStreams.push_back(stream);
  }
  // PEFT's lora_A and lora_B are nn.Linear: [out, in] weights.
  Value hidden = builder.create<LinearOp>(loc, hiddenType, x, a, Value(),
                                          builder.getBoolAttr(true));
  built.push_back(hidden.getDefiningOp());
  // Tensor slicing: the [.., r] hidden value crosses between the whole and
  // the sliced side, as Megatron's f (columns: the sliced lora_B's
  // gradients sum over the group) or g (rows: the partial products sum).
  if (t.slicing == Slicing::Columns)
    hidden = builder.create<TpCopyOp>(loc, hiddenType, hidden, tensorAxis);
  else if (t.slicing == Slicing::Rows)
    hidden = builder.create<TpReduceOp>(loc, hiddenType, hidden, tensorAxis);
  if (t.slicing != Slicing::Whole)
    built.push_back(hidden.getDefiningOp());
  auto up = builder.create<LinearOp>(loc, outType, hidden, b, Value(),
                                     builder.getBoolAttr(true));
  const double scale = double(alpha) / (rslora ? std::sqrt(double(rank))
                                               : double(rank));
  auto scaled = builder.create<ScaleOp>(loc, outType, up.getResult(),
                                        builder.getF64FloatAttr(scale));
  auto sum = builder.create<AddOp>(loc, outType, output->getResult(0),
                                   scaled.getResult());
  built.append({up, scaled, sum});
  if (Attribute layer = base->getAttr(kLayerAttrName))
    for (Operation *op : built)
      op->setAttr(kLayerAttrName, layer);
  output->getResult(0).replaceAllUsesExcept(sum.getResult(), sum);
}

void LoraPass::recordSettings(ModuleOp module, bool fanInFanOut) {
  Builder b(module.getContext());
  auto set = [&](StringRef key, Attribute value) {
    module->setAttr((Twine("dsc.lora_") + key).str(), value);
  };
  set("rank", b.getI64IntegerAttr(rank));
  set("alpha", b.getF64FloatAttr(alpha));
  set("dropout", b.getF64FloatAttr(dropout));
  if (targetRegex.empty())
    set("target_modules",
        b.getStringAttr(llvm::join(targetModules.begin(),
                                   targetModules.end(), ",")));
  else
    set("target_regex", b.getStringAttr(targetRegex));
  set("bias", b.getStringAttr(bias));
  set("rslora", b.getI64IntegerAttr(rslora ? 1 : 0));
  set("fan_in_fan_out", b.getI64IntegerAttr(fanInFanOut ? 1 : 0));
  // PEFT's adapter files name a parameter p "base_model.model.<p>" (its
  // LoraModel wraps the model as base_model, which holds it as model).
  set("file_prefix", b.getStringAttr("base_model.model."));
}

void LoraPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module)))
    return signalPassFailure();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal()) {
    module.emitError("dsc-lora: no @forward with a body");
    return signalPassFailure();
  }
  Block &body = forward.getBody().front();
  entryMatched.assign(targetModules.size(), false);

  // The targets, in program order; each weight feeds linear layers only.
  SmallVector<Target> targets;
  llvm::StringSet<> adapted;
  const bool allLinear =
      targetModules.size() == 1 && targetModules[0] == kAllLinear;
  for (auto linear : body.getOps<LinearOp>()) {
    StringRef weight = paramName(forward, linear.getWeight());
    if (!weight.ends_with(".weight"))
      continue;
    StringRef name = weight.drop_back(strlen(".weight"));
    if (!selects(name, name == "lm_head" || name.ends_with(".lm_head")))
      continue;
    auto notLinear = llvm::find_if(linear.getWeight().getUsers(),
                                   [](Operation *u) { return !isa<LinearOp>(u); });
    if (notLinear != linear.getWeight().getUsers().end()) {
      // all-linear skips a weight that is also an embedding (a tied head);
      // a named target that is one is an error.
      if (allLinear)
        continue;
      linear.emitError("dsc-lora: target module '")
          << name << "' also feeds " << (*notLinear)->getName()
          << "; only linear layers can be adapted";
      return signalPassFailure();
    }
    if (!adapted.insert(name).second) {
      linear.emitError("dsc-lora: module '")
          << name << "' is used by more than one linear layer";
      return signalPassFailure();
    }
    targets.push_back({linear, name.str()});
  }
  for (auto [i, entry] : llvm::enumerate(targetModules))
    if (!entryMatched[i]) {
      module.emitError("dsc-lora: target module '")
          << entry << "' matches no linear layer of the model";
      return signalPassFailure();
    }
  if (targets.empty()) { // a regex, or all-linear on a model of embeddings
    module.emitError("dsc-lora: ")
        << (targetRegex.empty() ? "target-modules" : "target-regex '" +
                                                         targetRegex + "'")
        << " matches no linear layer of the model";
    return signalPassFailure();
  }
  const bool fanInFanOut = !targets.front().linear.getTransposeW();
  for (const Target &t : targets)
    if (t.linear.getTransposeW() == fanInFanOut) {
      t.linear.emitError("dsc-lora: module '")
          << t.module << "' stores its weight as [out, in] and '"
          << targets.front().module << "' as [in, out]; one adapter needs "
          << "one layout (PEFT's fan_in_fan_out)";
      return signalPassFailure();
    }
  for (BlockArgument arg : body.getArguments())
    if (StringRef name = paramName(forward, arg); !name.empty()) {
      for (StringRef suffix : {".lora_A.weight", ".lora_B.weight"})
        if (name.ends_with(suffix)) {
          module.emitError("dsc-lora: the model already has '")
              << name << "'";
          return signalPassFailure();
        }
    }

  // The adapters' parameters, right after the model's last one.
  unsigned firstAdapter = 0;
  for (BlockArgument arg : body.getArguments())
    if (!paramName(forward, arg).empty())
      firstAdapter = arg.getArgNumber() + 1;
  const unsigned endAdapter = firstAdapter + 2 * targets.size();
  MLIRContext *ctx = &getContext();
  auto f32 = Float32Type::get(ctx);
  SmallVector<unsigned> indices;
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
  SmallVector<Location> locs;
  auto addParam = [&](const std::string &name, ArrayRef<int64_t> shape,
                      InitKind init, double scale, Location loc) {
    indices.push_back(firstAdapter);
    types.push_back(RankedTensorType::get(shape, f32));
    attrs.push_back(DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, kParamAttrName),
                             ParamAttr::get(ctx, name, init,
                                            FloatAttr::get(
                                                Float64Type::get(ctx),
                                                scale)))}));
    locs.push_back(loc);
  };
  if (failed(planSlicing(module, targets)))
    return signalPassFailure();
  for (const Target &t : targets) {
    auto w = cast<RankedTensorType>(t.linear.getWeight().getType());
    const bool conv1d = !t.linear.getTransposeW();
    const int64_t in = w.getShape()[conv1d ? 0 : 1],
                  out = w.getShape()[conv1d ? 1 : 0];
    // The bound is PEFT's for the whole layer (a row-parallel slice holds
    // 1/T of its input features).
    const int64_t fanIn = t.slicing == Slicing::Rows ? t.slice.getSize() : in;
    addParam(t.module + ".lora_A.weight", {rank, in}, InitKind::uniform,
             1.0 / std::sqrt(double(fanIn)), t.linear.getLoc());
    addParam(t.module + ".lora_B.weight", {out, rank}, InitKind::zeros, 0.0,
             t.linear.getLoc());
  }
  forward.insertArguments(indices, types, attrs, locs);

  // Dropout streams continue after the model's own.
  int64_t nextStream = 0;
  forward.walk([&](Operation *op) {
    if (auto s = op->getAttrOfType<IntegerAttr>("stream"))
      nextStream = std::max(nextStream, s.getInt() + 1);
  });
  for (auto [i, t] : llvm::enumerate(targets))
    adapt(t, body.getArgument(firstAdapter + 2 * i),
          body.getArgument(firstAdapter + 2 * i + 1), nextStream + int64_t(i));

  // Freeze everything but the adapters and the biases `bias` trains.
  SmallVector<DictionaryAttr> argAttrs;
  for (BlockArgument arg : body.getArguments()) {
    NamedAttrList entries(forward.getArgAttrDict(arg.getArgNumber()));
    StringRef name = paramName(forward, arg);
    bool trainable =
        (arg.getArgNumber() >= firstAdapter &&
         arg.getArgNumber() < endAdapter) ||
        (bias == "all" && name.contains("bias")) ||
        (bias == "lora_only" && name.ends_with(".bias") &&
         adapted.contains(name.drop_back(strlen(".bias"))));
    if (!name.empty() && !trainable)
      entries.set(kFrozenAttrName, UnitAttr::get(ctx));
    argAttrs.push_back(entries.getDictionary(ctx));
  }
  forward.setAllArgAttrs(argAttrs);
  recordSettings(module, fanInFanOut);
  if (!adapterSlices.empty()) {
    NamedAttrList slices(
        module->getAttrOfType<DictionaryAttr>(kTensorSlicesAttrName));
    slices.append(adapterSlices);
    module->setAttr(kTensorSlicesAttrName, slices.getDictionary(ctx));
  }
  if (!perRankStreams.empty()) {
    SmallVector<int64_t> streams;
    if (auto old = module->getAttrOfType<DenseI64ArrayAttr>(
            kTensorParallelStreamsAttrName))
      llvm::append_range(streams, old.asArrayRef());
    llvm::append_range(streams, perRankStreams);
    module->setAttr(kTensorParallelStreamsAttrName,
                    DenseI64ArrayAttr::get(ctx, streams));
  }
}
