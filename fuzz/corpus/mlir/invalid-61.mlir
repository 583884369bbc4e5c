

func.func @attention_rate(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf32>, %v: tensor<2x3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op expects rate in [0, 1), got 1}}
  %o, %l = dsc.attention %q, %k, %v {rate = 1.0 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  return
}

