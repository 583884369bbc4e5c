

func.func @attention_k(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x6x4xf32>, %v: tensor<2x3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op k has shape [2, 3, 6, 4], expected [2, 3, 8, 4]}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  return
}

