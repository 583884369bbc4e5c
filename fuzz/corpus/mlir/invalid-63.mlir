

func.func @attention_lse_use(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf32>, %v: tensor<2x3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op lse may only be read by dsc.attention_grad, not by dsc.add}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  %x = dsc.add %l, %l : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return
}

