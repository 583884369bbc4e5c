// RUN: dsc-opt %s | FileCheck %s
// RUN: dsc-opt %s | dsc-opt | FileCheck %s
// RUN: dsc-opt %s --mlir-print-op-generic | dsc-opt | FileCheck %s

// The LLaMA-family ops round-trip: rotary embeddings (defaults and llama3
// scaling), grouped-query heads, SiLU, products and the SwiGLU gate, their
// gradients, and dsc.attention with fewer key/value heads than query heads.

// CHECK-LABEL: func @llama_ops
func.func @llama_ops(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>,
                     %g: tensor<2x8x40xf32>, %u: tensor<2x8x40xbf16>) {
  // CHECK: dsc.rotary %{{.*}} : (tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %rq = dsc.rotary %q : (tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  // CHECK: dsc.rotary %{{.*}} {factor = 8.000000e+00 : f64, inverse = true, original_max_positions = 16 : i64, scaling = #dsc<rope_scaling llama3>, theta = 5.000000e+05 : f64}
  %rk = dsc.rotary %k {theta = 500000.0 : f64, scaling = #dsc<rope_scaling llama3>, factor = 8.0 : f64, original_max_positions = 16 : i64, inverse = true} : (tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
  // CHECK: dsc.repeat_kv %{{.*}} {groups = 2 : i64} : (tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  %rep = dsc.repeat_kv %rk {groups = 2 : i64} : (tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  // CHECK: dsc.repeat_kv_grad %{{.*}} {groups = 2 : i64} : (tensor<2x4x8x16xf32>) -> tensor<2x2x8x16xf32>
  %sum = dsc.repeat_kv_grad %rep {groups = 2 : i64} : (tensor<2x4x8x16xf32>) -> tensor<2x2x8x16xf32>
  // CHECK: dsc.attention {{.*}} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  %o, %lse = dsc.attention %rq, %rk, %sum {causal = true, rate = 0.0 : f64, stream = 0 : i64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  // CHECK: dsc.attention_grad {{.*}} -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  %dq, %dk, %dv = dsc.attention_grad %o, %rq, %rk, %sum, %o, %lse {causal = true, rate = 0.0 : f64, stream = 0 : i64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  // CHECK: dsc.silu %{{.*}} : (tensor<2x8x40xf32>) -> tensor<2x8x40xf32>
  %s = dsc.silu %g : (tensor<2x8x40xf32>) -> tensor<2x8x40xf32>
  // CHECK: dsc.mul %{{.*}}, %{{.*}} : (tensor<2x8x40xf32>, tensor<2x8x40xbf16>) -> tensor<2x8x40xbf16>
  %m = dsc.mul %s, %u : (tensor<2x8x40xf32>, tensor<2x8x40xbf16>) -> tensor<2x8x40xbf16>
  // CHECK: dsc.silu_grad
  %ds = dsc.silu_grad %s, %g : (tensor<2x8x40xf32>, tensor<2x8x40xf32>) -> tensor<2x8x40xf32>
  // CHECK: dsc.swiglu %{{.*}}, %{{.*}} : (tensor<2x8x40xf32>, tensor<2x8x40xbf16>) -> tensor<2x8x40xbf16>
  %w = dsc.swiglu %g, %u : (tensor<2x8x40xf32>, tensor<2x8x40xbf16>) -> tensor<2x8x40xbf16>
  // CHECK: dsc.swiglu_grad
  %dg, %du = dsc.swiglu_grad %w, %g, %u : (tensor<2x8x40xbf16>, tensor<2x8x40xf32>, tensor<2x8x40xbf16>) -> (tensor<2x8x40xf32>, tensor<2x8x40xbf16>)
  return
}
