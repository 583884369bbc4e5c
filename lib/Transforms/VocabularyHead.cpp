//===- VocabularyHead.cpp - The LM head and its vocabulary tables ---------===//

#include "VocabularyHead.h"

namespace mlir::dsc {

BlockArgument paramArg(func::FuncOp fn, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && arg.getOwner()->getParentOp() == fn &&
                 fn.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                                kParamAttrName)
             ? arg
             : BlockArgument();
}

std::optional<VocabularyHead> findVocabularyHead(func::FuncOp forward) {
  SmallVector<CrossEntropyOp> losses;
  forward.walk([&](CrossEntropyOp ce) { losses.push_back(ce); });
  if (losses.size() != 1)
    return std::nullopt;
  VocabularyHead h;
  h.loss = losses.front();
  h.head = h.loss.getLogits().getDefiningOp<LinearOp>();
  if (!h.head || !h.head.getTransposeW())
    return std::nullopt;
  h.vocab = cast<RankedTensorType>(h.head.getType()).getShape().back();
  auto embeddingsOnly = [&](BlockArgument table, Operation *except) {
    return llvm::all_of(table.getUsers(), [&](Operation *user) {
      auto lookup = dyn_cast<EmbeddingOp>(user);
      return user == except || (lookup && lookup.getTable() == table);
    });
  };
  h.weight = paramArg(forward, h.head.getWeight());
  if (h.head.getBias())
    h.bias = paramArg(forward, h.head.getBias());
  if (!h.weight || !embeddingsOnly(h.weight, h.head) ||
      (h.head.getBias() && (!h.bias || !h.bias.hasOneUse())))
    return std::nullopt;
  h.tables.push_back(h.weight);
  for (BlockArgument arg : forward.getArguments())
    if (arg != h.weight && paramArg(forward, arg) && !arg.use_empty() &&
        cast<RankedTensorType>(arg.getType()).getRank() == 2 &&
        cast<RankedTensorType>(arg.getType()).getDimSize(0) == h.vocab &&
        embeddingsOnly(arg, nullptr))
      h.tables.push_back(arg);
  return h;
}

} // namespace mlir::dsc
