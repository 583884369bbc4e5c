

func.func @attention_types(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf16>, %v: tensor<2x3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op mixes element types 'f16' and 'bf16'}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf16>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xbf16>, tensor<2x3x8xf32>)
  return
}

