

func.func @bias_split_heads_bias(%x: tensor<2x8x72xf32>, %b: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.bias_split_heads' op bias has shape [24], expected [72]}}
  %q, %k, %v = dsc.bias_split_heads %x, %b {num_heads = 3 : i64} : (tensor<2x8x72xf32>, tensor<24xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
  return
}

