

func.func @attention_v(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf32>, %v: tensor<2x3x8x2xf32>) {
  // expected-error @+1 {{'dsc.attention' op v has shape [2, 3, 8, 2], expected [2, 3, 8, 4]}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x2xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  return
}

