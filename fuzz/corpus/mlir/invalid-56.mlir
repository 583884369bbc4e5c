

func.func @attention_rank(%q: tensor<3x8x4xf32>, %k: tensor<3x8x4xf32>, %v: tensor<3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op expects q of rank 4 [B, H, T, D], got [3, 8, 4]}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<3x8x4xf32>, tensor<3x8x4xf32>, tensor<3x8x4xf32>) -> (tensor<3x8x4xf32>, tensor<3x8xf32>)
  return
}

