

func.func @attention_result(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf32>, %v: tensor<2x3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op result has shape [2, 3, 4, 4], expected [2, 3, 8, 4]}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x8xf32>)
  return
}

