// The pass checks its options as the config reader does, so dsc-opt builds
// nothing dsc-run would refuse.
// RUN: not dsc-opt %s -dsc-lora="rank=0 target-modules=q_proj" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not dsc-opt %s -dsc-lora="alpha=0 target-modules=q_proj" 2>&1 | FileCheck %s --check-prefix=ALPHA
// RUN: not dsc-opt %s -dsc-lora="dropout=1 target-modules=q_proj" 2>&1 | FileCheck %s --check-prefix=DROPOUT
// RUN: not dsc-opt %s -dsc-lora="bias=some target-modules=q_proj" 2>&1 | FileCheck %s --check-prefix=BIAS
// RUN: not dsc-opt %s -dsc-lora 2>&1 | FileCheck %s --check-prefix=TARGETS
// RUN: not dsc-opt %s -dsc-lora="target-regex=(q" 2>&1 | FileCheck %s --check-prefix=REGEX
// RUN: not dsc-opt %s -dsc-lora="target-regex=k_.*" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// std::regex overflowed its stack on deep groups and backtracked for ever
// on nested repeats; the automaton refuses the first and answers the second
// at once.
// DEFINE: %{nested} = ((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((q))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))
// RUN: not dsc-opt %s -dsc-lora="target-regex=%{nested}" 2>&1 | FileCheck %s --check-prefix=NESTED
// RUN: not dsc-opt %s -dsc-lora="target-regex=((.*)*)*z" 2>&1 | FileCheck %s --check-prefix=BACKTRACK
// RUN: not dsc-opt %s -dsc-lora="target-regex=(a)\1" 2>&1 | FileCheck %s --check-prefix=BACKREF
// RANK: error: dsc-lora: rank (r) must be >= 1, got 0
// ALPHA: error: dsc-lora: alpha (lora_alpha) must be a finite number > 0
// DROPOUT: error: dsc-lora: dropout (lora_dropout) must be in [0, 1)
// BIAS: error: dsc-lora: bias must be none, all or lora_only, got 'some'
// TARGETS: error: dsc-lora: give target-modules or target-regex (exactly one)
// REGEX: error: dsc-lora: target-regex '(q' is not a regular expression
// NOMATCH: error: dsc-lora: target-regex 'k_.*' matches no linear layer of the model
// NESTED: error: dsc-lora: target-regex '{{[(]+}}...' is not a regular expression dsc supports: groups nested deeper than 64 at position 64
// BACKTRACK: error: dsc-lora: target-regex '((.*)*)*z' matches no linear layer of the model
// BACKREF: error: dsc-lora: target-regex '(a)\1' is not a regular expression dsc supports: escape '\1' is not supported at position 4
module {
func.func @forward(%w: tensor<6x8xf32> {dsc.param = #dsc.param<"q_proj.weight", normal, 0.02 : f64>},
                   %x: tensor<2x4x8xf32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x6xf32>) {
  %h = dsc.linear %x, %w {transpose_w = true} : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  %loss = dsc.cross_entropy %h, %y : (tensor<2x4x6xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %h : tensor<f32>, tensor<2x4x6xf32>
}
}
